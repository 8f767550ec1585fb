-- release: drop one hold of this owner; on the last one, hand the lease to the first live waiter or free it.
-- Also cancels a wait: with a waiter id, remove its queue entry, and if the lease had already been handed to
-- that waiter (the grant raced the cancel), release that grant.
-- KEYS[1]  lock hash
-- KEYS[2]  wait queue
-- ARGV[1]  owner
-- ARGV[2]  how long the fence record outlives the final release, ms
-- ARGV[3]  publish command: PUBLISH (single node) or SPUBLISH (cluster)
-- ARGV[4]  waiter id when cancelling a wait, else ""
-- ARGV[5]  that waiter's queue entry, else ""
-- ARGV[6]  the fence of the hold being released, or "" to skip the check: a hold of an earlier grant (expired,
--          force-unlocked, then re-granted to the same owner) must not release the newer grant
-- Returns  0 not held by this owner (nothing changed; for a cancel: the waiter had not been granted it),
--          1 one hold released and the owner still holds it (reentrant count > 0),
--          2 released and freed, 3 released and handed to a waiting client.
-- @include _handoff.lua
local h, q = KEYS[1], KEYS[2]
local owner = ARGV[1]
if ARGV[4] ~= '' then
  if redis.call('LREM', q, 1, ARGV[5]) == 1 then return 0 end
  local v = redis.call('HGET', h, '')
  if not v or string.match(v, ':(.*)$') ~= ARGV[4] then return 0 end
end
local hv = redis.call('HMGET', h, owner, '')
local c = tonumber(hv[1])
if not c then return 0 end
if ARGV[6] ~= '' and fence_of(hv[2]) ~= tonumber(ARGV[6]) then return 0 end
if c > 1 then
  redis.call('HINCRBY', h, owner, -1)
  return 1
end
redis.call('HDEL', h, owner)
if handoff(h, q, ARGV[3], fence_of(hv[2])) then return 3 end
redis.call('PEXPIRE', h, ARGV[2])
return 2
