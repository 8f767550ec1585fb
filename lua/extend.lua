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
-- @include _record.lua (alive)
local v = redis.call('GET', h)
-- This owner's hold: one match (no closure, no conversion but the delay's) gives the record up to its claim deadline,
-- the fence, that deadline, the lock delay part ("d<ms>" or "") and the owner. A claim rewrites the record without
-- its deadline, the rest as it is.
local head, fs, cb, dp, o
if v then head, fs, cb, dp, o = string.match(v, '^((%d+):[^:]*:%d+:)(%d*)(d?%d*):(.*)$') end
if o == ARGV[1] and (ARGV[3] == '' or fs == ARGV[3]) then
  local dly = tonumber(string.sub(dp, 2))
  if not alive(h, dly) then return 0 end
  local ttl = dly and tonumber(ARGV[2]) + dly or ARGV[2]
  if cb ~= '' then redis.call('SET', h, head .. dp .. ':' .. o, 'KEEPTTL') end
  if ARGV[5] == 'GT' then redis.call('PEXPIRE', h, ttl, 'GT') else redis.call('PEXPIRE', h, ttl) end
  return 1
end
-- (Not over a set record, nor over any other value with a '/' in it: that lease is not free here. A value that is
-- not a lease record and has no '/' is an error, as everywhere a lease is taken: record() without loose.)
if ARGV[4] == '1' and not o and not (v and string.find(v, '/', 1, true)) then
-- @include _record.lua (record, next_fence, now_us, write_held)
  local fence = next_fence(record(v), now_us())
  local lag = tonumber(ARGV[6])
  write_held(h, fence, '', 1, nil, ARGV[1], lag, lag and tonumber(ARGV[2]) + lag or ARGV[2])
  return fence
end
return 0
