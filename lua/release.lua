-- release: drop one hold of this owner; on the last one, hand the lease to the first live waiter or free it.
-- With an attempt id it undoes that acquire call instead (a cancelled wait, or a call whose reply was lost):
-- its queue entry is removed, and the hold it took, if any, is released.
-- KEYS[1]  lock hash
-- KEYS[2]  wait queue
-- ARGV[1]  owner
-- ARGV[2]  how long the grant record outlives the final release, ms
-- ARGV[3]  publish command: PUBLISH (single node) or SPUBLISH (cluster)
-- ARGV[4]  the fence of the hold being released, or "" to skip the check: a hold of an earlier grant (expired,
--          force-unlocked, then re-granted to the same owner) must not release the newer grant
-- ARGV[5]  attempt id to undo, or "" (the record remembers the owner's latest attempt: an earlier one whose
--          record a re-entry overwrote is not recognised, and its hold lapses with the lease)
-- ARGV[6]  that attempt's queue entry, or ""
-- Returns  0 not held by this owner (or that attempt holds nothing: nothing changed but its entry removed),
--          1 one hold released and the owner still holds it (reentrant count > 0),
--          2 released and freed, 3 released and handed to a waiting client.
-- @include _handoff.lua
local h, q = KEYS[1], KEYS[2]
local owner = ARGV[1]
if ARGV[6] ~= '' then redis.call('ZREM', q, ARGV[6]) end
local hv = redis.call('HMGET', h, owner, '')
local c = tonumber(hv[1])
if not c then return 0 end
local fence, gid = record(hv[2])
if ARGV[4] ~= '' and fence ~= tonumber(ARGV[4]) then return 0 end
if ARGV[5] ~= '' and gid ~= ARGV[5] then return 0 end
if c > 1 then
  redis.call('HINCRBY', h, owner, -1)
  -- An undone attempt is forgotten (a repeated undo must not drop another hold), and so is a claim window.
  if ARGV[5] ~= '' then redis.call('HSET', h, '', string.format('%d', fence)) end
  return 1
end
redis.call('HDEL', h, owner)
redis.call('HSET', h, '', string.format('%d', fence))
if handoff(h, q, ARGV[3], fence, nil) then return 3 end
redis.call('PEXPIRE', h, ARGV[2])
return 2
