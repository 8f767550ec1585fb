-- extend: reset the lease's TTL if, and only if, this owner still holds it (watchdog renewal, extend(), and the
-- claim of a handed-over grant, which it marks claimed). Redlock renewal may also re-establish the lease on a
-- master that lost it (restarted empty), where it is free there.
-- KEYS[1]  lease key
-- ARGV[1]  owner
-- ARGV[2]  lease ms (the TTL to set)
-- ARGV[3]  the fence of the hold, or "" to skip the check (a newer grant to the same owner is not this hold)
-- ARGV[4]  "1" to re-establish a lease that is free here (Redlock), else ""
-- ARGV[5]  "GT" to only lengthen the TTL (renewals and claims: a reentrant hold may have asked for longer),
--          "" to set it (extend())
-- ARGV[6]  the hold's lock delay ms (> 0), or omitted for none: a hold re-established here keeps it (else that
--          master would grant the lease to another right after the hold expired, and with another such master make
--          a majority within the delay)
-- Returns  1 when extended, 0 when the owner no longer holds the lease (expired, released or force-unlocked,
--          or in its lock delay: see _record.lua), or the new fence (> 1) when re-established. A hold with a lock
--          delay keeps its key the delay longer than the TTL asked, and so does one re-established.
local h = KEYS[1]
local v = redis.call('GET', h)
local f, a, c, by, lag, o
if v then f, a, c, by, lag, o = string.match(v, '^(%d+):([^:]*):(%d+):(%d*)(d?%d*):(.*)$') end
if o == ARGV[1] and (ARGV[3] == '' or f == ARGV[3]) then
  local ttl = ARGV[2]
  if lag ~= '' then
    local dly = tonumber(string.sub(lag, 2))
    if redis.call('PTTL', h) <= dly then return 0 end
    ttl = tonumber(ttl) + dly
  end
  if by ~= '' then redis.call('SET', h, f .. ':' .. a .. ':' .. c .. ':' .. lag .. ':' .. o, 'KEEPTTL') end
  if ARGV[5] == 'GT' then redis.call('PEXPIRE', h, ttl, 'GT') else redis.call('PEXPIRE', h, ttl) end
  return 1
end
if ARGV[4] == '1' and not o and not (v and string.find(v, '/', 1, true)) then
-- @include _record.lua
  local fence = next_fence(record(v), now_us())
  local dly = tonumber(ARGV[6])
  redis.call('SET', h, held(fence, '', 1, nil, ARGV[1], dly), 'PX', dly and tonumber(ARGV[2]) + dly or ARGV[2])
  return fence
end
return 0
