-- fenced_del: DEL the key unless a higher fence wrote it before (src/fenced_del.ts). The mark stays for ARGV[2] ms:
-- a writer with a lower fence cannot create the key again until then.
-- KEYS[1]  the resource
-- KEYS[2]  its fence mark (see _fence.lua)
-- ARGV[1]  the writer's fence
-- ARGV[2]  how long the mark outlives the resource, ms
-- Returns  {0, highest fence} refused; {1, 1} deleted; {1, 0} there was no such key
-- @include _fence.lua
local key, mark, fence, retain = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local high = stale(mark, fence)
if high then return {0, high} end
local n = redis.call('DEL', key)
keep(key, mark, fence, retain)
return {1, n}
