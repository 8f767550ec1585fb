-- leader: the state of an election, read atomically: its leader (the holder of the lease), term (the leader's
-- fence) and the value the leader proclaimed.
-- KEYS[1]  lease key (see _record.lua)
-- KEYS[2]  the proclaimed value: "<term>:<value>" (a value proclaimed under an earlier term is not the leader's)
-- Returns  { owner or "", term (the leader's fence, else the latest fence kept, else 0), ms left of the leadership
--          (or -2), value or false }
-- @include _record.lua
local fence, _, _, by, owner = record(redis.call('GET', KEYS[1]))
local pttl = redis.call('PTTL', KEYS[1])
local value = false
local v = redis.call('GET', KEYS[2])
if owner and v then
  local term, text = string.match(v, '^(%d+):(.*)$')
  if term and tonumber(term) == fence then value = text end
end
if not owner then pttl = -2 end
return { owner or '', fence, pttl, value }
