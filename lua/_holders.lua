-- The holder set of shared holds and permits (inlined where a script says `@include _holders.lua`):
--   s  a sorted set: owner -> µs (server time) when the hold expires; an unclaimed grant expires when its claim
--      window ends, a claimed one when its lease does;
--   d  a hash: owner -> "<fence>:<attempt id>:<holds>:<unclaimed>:<kind>" (unclaimed "1" until the waiter claims
--      it, else ""; kind "s" or "p<n>").
-- The live holds decide how the lease is held (their kind), whatever the lease key says: that key may be the
-- exclusive record of an owner that also holds shared holds (a downgrade), a set record "<fence>/<kind>" that keeps
-- the fence, or gone. So every path that finds the lease free of an exclusive holder counts the live holds first
-- (the uncontended acquire does so by `EXISTS queue holders`). s and d live as long as the latest live hold; so does
-- a set record, but never an exclusive record, which keeps its own TTL.
-- purge(s, d, now): drops the holds that expired by `now`; returns how many are left.
-- holders(s, d, now, hint): purge(), and the kind of the live holds (nil when none): `hint` when given (the kind a
--   set record names: it is the kind of the live holds while any live), else read from the first hold's record.
--   Without a hint, one EXISTS tells the common case (no holder set); with one, the set is there to count.
-- at_ms(us): the PEXPIREAT / PXAT time (ms) at which something expiring at `us` (µs) has surely expired.
-- earliest(s, now): ms until the first live hold expires (at least 1).
-- latest(s): µs when the last live hold expires (0 when none).
-- hold_of(d, owner): fence (number), attempt id, holds (number), unclaimed (boolean), kind of the owner's hold, or nil.
-- put(s, d, owner, f, a, c, unclaimed, us, kind, fresh): writes the owner's hold, expiring at `us`; s and d live as
--   long. `fresh`: the caller counted no live hold before this one (so s and d are new: their TTL is set, not only
--   lengthened); otherwise they have a TTL, and it is only lengthened.
local function purge(s, d, now)
  local gone = redis.call('ZRANGEBYSCORE', s, '-inf', now)
  for i = 1, #gone, 1000 do
    redis.call('HDEL', d, unpack(gone, i, math.min(i + 999, #gone)))
  end
  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', s, '-inf', now) end
  return redis.call('ZCARD', s)
end

local function hold_of(d, owner)
  local v = redis.call('HGET', d, owner)
  if not v then return nil end
  local f, a, c, u, k = string.match(v, '^(%d+):([^:]*):(%d+):(1?):([sp]%d*)$')
  if not f then error({ err = 'ERR redlease: a lease holder record is not one this library writes' }) end
  return tonumber(f), a, tonumber(c), u == '1', k
end

local function holders(s, d, now, hint)
  -- (Most leases have no holder set: one call tells.)
  if not hint and redis.call('EXISTS', s) == 0 then return 0, nil end
  local n = purge(s, d, now)
  if n == 0 then return 0, nil end
  if hint then return n, hint end
  local first = redis.call('ZRANGE', s, 0, 0)
  local _, _, _, _, kind = hold_of(d, first[1])
  return n, kind
end

local function at_ms(us)
  return math.floor(us / 1000) + 1
end

local function earliest(s, now)
  local first = redis.call('ZRANGE', s, 0, 0, 'WITHSCORES')
  if not first[2] then return 1 end
  return math.max(1, math.floor((tonumber(first[2]) - now) / 1000) + 1)
end

local function latest(s)
  local last = redis.call('ZRANGE', s, -1, -1, 'WITHSCORES')
  return tonumber(last[2]) or 0
end

local function put(s, d, owner, f, a, c, unclaimed, us, kind, fresh)
  redis.call('ZADD', s, us, owner)
  redis.call('HSET', d, owner, string.format('%d', f) .. ':' .. a .. ':' .. string.format('%d', c) .. ':' ..
    (unclaimed and '1' or '') .. ':' .. kind)
  if fresh then
    redis.call('PEXPIREAT', s, at_ms(us))
    redis.call('PEXPIREAT', d, at_ms(us))
  else
    redis.call('PEXPIREAT', s, at_ms(us), 'GT')
    redis.call('PEXPIREAT', d, at_ms(us), 'GT')
  end
end
