-- extend: reset the lease's TTL if, and only if, this owner still holds it (watchdog renewal, extend(), and the
-- claim of a handed-over grant, which it marks claimed). Redlock renewal may also re-establish the lease on a
-- master that lost it (restarted empty), where it is free there.
-- KEYS[1]  lock hash
-- ARGV[1]  owner
-- ARGV[2]  lease ms (the TTL to set)
-- ARGV[3]  the fence of the hold, or "" to skip the check (a newer grant to the same owner is not this hold)
-- ARGV[4]  "1" to re-establish a lease that is free here (Redlock), else ""
-- ARGV[5]  "GT" to only lengthen the TTL (renewals and claims: a reentrant hold may have asked for longer),
--          "" to set it (extend())
-- Returns  1 when extended, 0 when the owner no longer holds the lease (expired, released or force-unlocked),
--          or the new fence (> 1) when re-established.
-- @include _record.lua
local h = KEYS[1]
local hv = redis.call('HMGET', h, ARGV[1], '')
local fence, gid, by = record(hv[2])
if hv[1] and (ARGV[3] == '' or fence == tonumber(ARGV[3])) then
  if by then redis.call('HSET', h, '', string.format('%d:%s', fence, gid)) end
  if ARGV[5] == 'GT' then redis.call('PEXPIRE', h, ARGV[2], 'GT') else redis.call('PEXPIRE', h, ARGV[2]) end
  return 1
end
if ARGV[4] == '1' and redis.call('HLEN', h) < 2 then
  local f = next_fence(fence, now_us())
  redis.call('HSET', h, '', string.format('%d', f), ARGV[1], 1)
  redis.call('PEXPIRE', h, ARGV[2])
  return f
end
return 0
