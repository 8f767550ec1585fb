-- proclaim: the leader's value, set if, and only if, this owner still leads with this term; then (and also with
-- no value: an announcement) observers are told on the election's channel. A value outlives the leadership for a
-- day at most: observers read it only while its term leads.
-- KEYS[1]  lease key
-- KEYS[2]  the proclaimed value
-- ARGV[1]  owner ("" with no term: only announce)
-- ARGV[2]  term (the leader's fence)
-- ARGV[3]  value, or "" with ARGV[4] "0" to set none (an announcement)
-- ARGV[4]  "1" to set the value, "0" to only announce
-- ARGV[5]  publish command: PUBLISH or SPUBLISH
-- Returns  1 when proclaimed (or announced), 0 when this owner no longer leads with this term.
-- @include _record.lua
if ARGV[1] ~= '' then
  local fence, _, _, _, owner, _m, dly = record(redis.call('GET', KEYS[1]))
  if owner ~= ARGV[1] or string.format('%d', fence) ~= ARGV[2] or not alive(KEYS[1], dly) then return 0 end
  if ARGV[4] == '1' then redis.call('SET', KEYS[2], ARGV[2] .. ':' .. ARGV[3], 'PX', 86400000) end
end
redis.call(ARGV[5], KEYS[1] .. ':o', ARGV[2])
return 1
