-- leader: the state of an election, read atomically: its leader (the holder of the lease), term (the leader's
-- fence) and the value the leader proclaimed.
-- KEYS[1]  lease key (see _record.lua)
-- KEYS[2]  the proclaimed value: "<term>:<value>" (a value proclaimed under an earlier term is not the leader's)
-- Returns  { owner or "", term (the leader's fence, else the latest fence kept, else 0), ms left of the leadership
--          (or -2), value or false }. A leader whose hold is in its lock delay (see _record.lua) leads no more: no
--          leader, though nobody can win until the delay ends.
-- @include _record.lua
local fence, _, _, by, owner, _m, dly = record(redis.call('GET', KEYS[1]))
local pttl = redis.call('PTTL', KEYS[1])
if dly then
  pttl = pttl - dly
  if pttl <= 0 then owner = nil end
end
local value = false
local v = redis.call('GET', KEYS[2])
if owner and v then
  local term, text = string.match(v, '^(%d+):(.*)$')
  if term and tonumber(term) == fence then value = text end
end
if not owner then pttl = -2 end
return { owner or '', fence, pttl, value }
