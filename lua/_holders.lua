-- The holder set of shared holds and permits (inlined where a script says `@include _holders.lua`, which brings
-- _record.lua with it), with the one parser and the one builder of a holder's record:
--   s  a sorted set: owner -> µs (server time) when the hold expires; an unclaimed grant expires when its claim
--      window ends, a claimed one when its lease does; a hold with a lock delay expires (leaves its place) that
--      delay later, and is its owner's only until the delay before that (see hold_of);
--   d  a hash: owner -> "<fence>:<attempt id>:<holds>:<unclaimed>:<kind>[:<lock delay ms>]" (unclaimed "1" until
--      the waiter claims it, else ""; kind "s", "p<n>" or "p<n>w<k>": k of n permits, its weight). A hold in its
--      lock delay (its holder let it expire without a release) keeps its share or permits from everyone, its owner
--      included, until the delay ends. Its field "" (no owner is empty) is the surplus: the sum over the holds in s
--      of their weight - 1, absent when 0 (no weighted hold), kept by every script that adds or drops a weighted
--      hold. So the permits in use are ZCARD s + the surplus, without reading the records.
-- The live holds decide how the lease is held (their kind), whatever the lease key says: that key may be the
-- exclusive record of an owner that also holds shared holds (a downgrade), a set record "<fence>/<kind>" that keeps
-- the fence, or gone. So every path that finds the lease free of an exclusive holder counts the live holds first
-- (the uncontended acquire does so by `EXISTS queue holders`). s and d live as long as the latest live hold; so does
-- a set record, but never an exclusive record, which keeps its own TTL. A grant still unclaimed keeps s and d (not
-- the set record) until its lease would end, as an exclusive grant's record lives: so the waiter that finds it
-- lapsed purges it, and tells that it passed it on, even when it was the only hold.
-- purge(s, d, now, self): drops the holds that expired by `now`; returns the permits they use (the holds left, each
--   counted by its weight: see the surplus above), and whether one dropped
--   was a grant still unclaimed (its waiter never claimed it: this call passes it on), unless granted to attempt
--   `self` (the caller's own, which it takes again). Nothing expired: no more calls than the count and the surplus.
-- holders(s, d, now, hint, self): purge(), and the kind of the live holds, without weight (nil when none): `hint`
--   when given (the kind a set record names: it is the kind of the live holds while any live), else read from the
--   first hold's record; and purge()'s whether a grant was passed on. Without a hint, one EXISTS tells the common
--   case (no holder set); with one, the set is there to count.
-- earliest(s, now): ms until the first live hold expires (at least 1).
-- latest(s): µs when the last live hold expires (0 when none).
-- hold_fields(v): a holder's record parsed: fence (number), attempt id, holds (number), unclaimed (boolean), kind (its
--   weight included: "p<n>w<k>"), lock delay ms (0 for none) and weight (1 unless given); nil for a value that is not
--   one (or none).
-- mode_of(kind): the kind without its weight ("p<n>w<k>" -> "p<n>"): how the lease is held, as a set record says.
-- weight_of(kind): k of a kind "p<n>w<k>", else 1.
-- add_surplus(d, x): adds x (> 0 for a weighted hold added, < 0 for one dropped) to the surplus.
-- hold_text(f, a, c, unclaimed, kind, dly): a holder's record, as d keeps it (dly: lock delay ms, 0 or nil for none).
-- hold_of(d, owner): hold_fields() of the owner's record, or nil when it has none; an error for a record this
--   library does not write. The hold is its owner's while its score - the delay is in the future.
-- put(s, d, owner, f, a, c, unclaimed, us, kind, fresh, keep, dly): writes the owner's hold, expiring at `us` (its
--   lock delay `dly` ms, if any, included); s and d live as long, or until `keep` (µs) when given (a grant handed
--   over unclaimed: until its lease would end, plus the delay).
--   `fresh`: the caller counted no live hold before this one (so s and d are new: their TTL is set, not only
--   lengthened); otherwise they have a TTL, and it is only lengthened.
-- @include _record.lua
local function hold_fields(v)
  if not v then return nil end
  local f, a, c, u, k, wt, dly = string.match(v, '^(%d+):([^:]*):(%d+):(1?):([sp]%d*w?(%d*)):?(%d*)$')
  if not f then return nil end
  return tonumber(f), a, tonumber(c), u == '1', k, tonumber(dly) or 0, tonumber(wt) or 1
end

local function mode_of(kind)
  return string.match(kind, '^[sp]%d*')
end

local function weight_of(kind)
  return tonumber(string.match(kind, 'w(%d+)$')) or 1
end

local function add_surplus(d, x)
  if x ~= 0 and redis.call('HINCRBY', d, '', x) <= 0 then redis.call('HDEL', d, '') end
end

local function hold_text(f, a, c, unclaimed, kind, dly)
  local rec = string.format('%d', f) .. ':' .. a .. ':' .. string.format('%d', c) .. ':' .. (unclaimed and '1' or '') ..
    ':' .. kind
  if dly and dly > 0 then rec = rec .. ':' .. string.format('%d', dly) end
  return rec
end

-- (The permits the holds left in s take: their count, plus the surplus while any is left. A surplus with no hold is
-- none: left by a holder set deleted behind the scripts' back, it is dropped.)
local function taken(s, d)
  local n = redis.call('ZCARD', s)
  if n == 0 then
    redis.call('HDEL', d, '')
    return 0
  end
  return n + (tonumber(redis.call('HGET', d, '')) or 0)
end

local function purge(s, d, now, self)
  local gone = redis.call('ZRANGEBYSCORE', s, '-inf', now)
  if #gone == 0 then return taken(s, d) end
  -- (Rare: the records are read, a batch at a time, for a grant still unclaimed and the weights they free.)
  local passed, extra = false, 0
  for i = 1, #gone, 1000 do
    local j = math.min(i + 999, #gone)
    for _, v in ipairs(redis.call('HMGET', d, unpack(gone, i, j))) do
      local f, a, _c, unclaimed, _k, _dly, wt = hold_fields(v)
      if f and unclaimed and a ~= self then passed = true end
      if f then extra = extra + wt - 1 end
    end
    redis.call('HDEL', d, unpack(gone, i, j))
  end
  redis.call('ZREMRANGEBYSCORE', s, '-inf', now)
  add_surplus(d, -extra)
  return taken(s, d), passed
end

local function hold_of(d, owner)
  local v = redis.call('HGET', d, owner)
  if not v then return nil end
  local f, a, c, u, k, dly, wt = hold_fields(v)
  if not f then error({ err = 'ERR redlease: a lease holder record is not one this library writes' }) end
  return f, a, c, u, k, dly, wt
end

local function holders(s, d, now, hint, self)
  -- (Most leases have no holder set: one call tells.)
  if not hint and redis.call('EXISTS', s) == 0 then return 0, nil end
  local n, passed = purge(s, d, now, self)
  if n == 0 then return 0, nil, passed end
  if hint then return n, hint, passed end
  local first = redis.call('ZRANGE', s, 0, 0)
  local _, _, _, _, kind = hold_of(d, first[1])
  return n, mode_of(kind), passed
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

local function put(s, d, owner, f, a, c, unclaimed, us, kind, fresh, keep, dly)
  redis.call('ZADD', s, us, owner)
  redis.call('HSET', d, owner, hold_text(f, a, c, unclaimed, kind, dly))
  local at = at_ms(keep or us)
  if fresh then
    redis.call('PEXPIREAT', s, at)
    redis.call('PEXPIREAT', d, at)
  else
    redis.call('PEXPIREAT', s, at, 'GT')
    redis.call('PEXPIREAT', d, at, 'GT')
  end
end
