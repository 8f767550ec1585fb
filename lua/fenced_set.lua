-- fenced_set: SET a string value unless a higher fence wrote the key before (src/fenced_set.ts).
-- KEYS[1]  the resource
-- KEYS[2]  its fence mark (see _fence.lua)
-- ARGV[1]  the writer's fence
-- ARGV[2]  how long the mark outlives the resource, ms
-- ARGV[3]  the value
-- ARGV[4]  the value's TTL in ms, or "" for none (SET clears an earlier TTL, as SET does)
-- ARGV[5]  "1": write only if the value differs from the current one; "" write anyway
-- Returns  {0, highest fence} refused; {1, 1} written; {1, 0} unchanged (ARGV[5] and the value was equal)
-- @include _fence.lua
local key, mark, fence, retain = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local high = stale(mark, fence)
if high then return {0, high} end
local wrote = 1
if ARGV[5] == '1' and redis.call('GET', key) == ARGV[3] then
  wrote = 0
elseif ARGV[4] == '' then
  redis.call('SET', key, ARGV[3])
else
  redis.call('SET', key, ARGV[3], 'PX', ARGV[4])
end
keep(key, mark, fence, retain)
return {1, wrote}
