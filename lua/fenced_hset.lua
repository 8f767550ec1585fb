-- fenced_hset: HSET fields of a hash unless a higher fence wrote the key before (src/fenced_hset.ts).
-- KEYS[1]  the resource (a hash)
-- KEYS[2]  its fence mark (see _fence.lua)
-- ARGV[1]  the writer's fence
-- ARGV[2]  how long the mark outlives the resource, ms
-- ARGV[3…] field, value, field, value, …
-- Returns  {0, highest fence} refused; {1, fields added} written (HSET's reply)
-- @include _fence.lua
local key, mark, fence, retain = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local high = stale(mark, fence)
if high then return {0, high} end
local added = redis.call('HSET', key, unpack(ARGV, 3))
keep(key, mark, fence, retain)
return {1, added}
