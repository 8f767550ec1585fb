-- fenced_incr_by: INCRBY within optional bounds unless a higher fence wrote the key before (src/fenced_incr_by.ts).
-- KEYS[1]  the resource (an integer string; absent counts as 0)
-- KEYS[2]  its fence mark (see _fence.lua)
-- ARGV[1]  the writer's fence
-- ARGV[2]  how long the mark outlives the resource, ms
-- ARGV[3]  the increment (negative to decrement)
-- ARGV[4]  the lowest value the result may have, or "" for none
-- ARGV[5]  the highest value the result may have, or "" for none
-- Returns  {0, highest fence} refused; {1, new value} written; {2} the bounds refused it (the value unchanged)
-- @include _fence.lua
local key, mark, fence, retain = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local high = stale(mark, fence)
if high then return {0, high} end
local by = tonumber(ARGV[3])
if ARGV[4] ~= '' or ARGV[5] ~= '' then
  -- A value that is not an integer is left to INCRBY, which refuses it with its own error.
  local now = tonumber(redis.call('GET', key) or '0')
  if now then
    local want = now + by
    if (ARGV[4] ~= '' and want < tonumber(ARGV[4])) or (ARGV[5] ~= '' and want > tonumber(ARGV[5])) then
      keep(key, mark, fence, retain)
      return {2}
    end
  end
end
local v = redis.call('INCRBY', key, ARGV[3])
keep(key, mark, fence, retain)
return {1, v}
