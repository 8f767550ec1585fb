-- extend: reset the lease's TTL if, and only if, this owner still holds it (watchdog renewal and extend()).
-- KEYS[1]  lock hash
-- ARGV[1]  owner
-- ARGV[2]  lease ms (the TTL to set)
-- ARGV[3]  the fence of the hold, or "" to skip the check (a newer grant to the same owner is not this hold)
-- Returns  1 when extended, 0 when the owner no longer holds the lease (expired, released or force-unlocked).
local hv = redis.call('HMGET', KEYS[1], ARGV[1], '')
if hv[1] and (ARGV[3] == '' or tonumber(string.match(hv[2], '^%d+')) == tonumber(ARGV[3])) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
