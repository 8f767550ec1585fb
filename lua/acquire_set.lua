-- acquire_set: take, re-enter or claim a shared hold or a permit, or report when to try again (and, for a waiting
-- caller, join the FIFO wait queue). Shared holds coexist with one another and with the shared holds of an owner
-- that holds the lease exclusively (a downgrade: that hold shares the exclusive hold's fence); permits coexist up
-- to their number. A newcomer never passes a queued waiter (so a queued exclusive waiter is not starved by new
-- shared requests); once this caller is admitted, the waiters behind it that can proceed with it are too.
-- KEYS[1]  lease key (see _record.lua)
-- KEYS[2]  wait queue (see _handoff.lua)
-- KEYS[3]  holder set, KEYS[4] holder records (see _holders.lua)
-- ARGV[1]  owner
-- ARGV[2]  lease ms
-- ARGV[3]  attempt id
-- ARGV[4]  queue entry for this waiter, or "" when the caller does not wait
-- ARGV[5]  queue TTL ms
-- ARGV[6]  publish command: PUBLISH or SPUBLISH
-- ARGV[7]  kind: "s" (shared), "p<n>" (one of n permits) or "p<n>w<k>" (k of n permits at once: a weighted hold)
-- ARGV[8]  lock delay ms (> 0), or omitted for none: a hold granted to this call that expires without a release
--          keeps its place (its share or permit) from everyone for that long after (see _holders.lua)
-- Returns  as acquire.lua: the fence (> 0) when held now; else -1 - the ms after which to try again, or for a
--          waiting caller { that number, µs when it was queued, 1 if this call queued it else 0 };
--          or "!x" when permits are asked of a lease held exclusively, "!<mode>" when the lease is held in another
--          set mode (shared, or another number of permits), "!wp<n>" when this owner holds the permits with another
--          weight (a re-entry must ask the weight it holds). When this call passed on a grant its waiter never
--          claimed (an exclusive one it took back, or a set hold still unclaimed that its purge dropped), a number
--          reply comes as { that number, 0, 0, 1 } and a table reply with a 4th element 1 (as acquire.lua's).
local h, q, s, d = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, ms, aid, entry, pub, kind = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[6], ARGV[7]
-- The common cases come first, with no closure but busy() and no table (each helper is included after them): a
-- lease free or held in this kind with no expired hold to purge, and no lock delay asked, where this call takes a
-- hold, is told to wait (all permits taken), or claims the grant made to this attempt; for weight 1 only, with no
-- weighted hold live (no surplus: see _holders.lua). The fence digits are the
-- server time in µs, as acquire.lua's. Anything else (a queue ahead of a free place, a re-entry, an exclusive or
-- other record, a hold to purge, a lock delay) takes the general path below, which reads nothing written here.
-- @include _constants.lua
-- @include _queue.lua
local t = redis.call('TIME')
local us = t[2]
if #us < 6 then us = string.rep('0', 6 - #us) .. us end
local fresh = t[1] .. us
local now = tonumber(fresh)
local v = redis.call('GET', h)
if not ARGV[8] and not string.find(kind, 'w', 1, true) then
  -- The last fence (digits) and the live holds, where this path applies.
  -- (Watched, see inspect.lua: the watch key wk counts in an EXISTS made anyway, and a new hold is told on wk.)
  local last, n, wk, seen = nil, nil, h .. ':n', false
  if not v or (#v <= FENCE_DIGITS and string.find(v, '^%d+$')) then
    -- Free (a fence kept, or none) with nobody queued and no holds (shared holds of an exclusive holder's downgrade
    -- outlive its record: the holder set tells).
    local x = redis.call('EXISTS', q, s, wk, wk, wk)
    seen = x >= 3
    if x % 3 == 0 then last, n = v or '0', 0 end
  else
    local sf, k = string.match(v, '^(%d+)/([sp]%d*)$')
    if k == kind and #sf <= FENCE_DIGITS and redis.call('ZCOUNT', s, '-inf', fresh) == 0 then
      last, n = sf, redis.call('ZCARD', s)
      -- (A set record left with no holds, by a purge that wrote nothing (force_unlock's, finding them expired) or
      -- an eviction, is a free lease: its waiters go first.)
      if n == 0 and redis.call('EXISTS', q) == 1 then n = nil end
    end
  end
  local cap = tonumber(string.match(kind, '^p(%d+)$'))
  if n and n > 0 then
    local got = redis.call('HMGET', d, owner, '')
    local mine = got[1]
    if got[2] then
      -- (Weighted holds live: more permits are used than there are holds. The general path counts them.)
      n = nil
    elseif mine then
      -- Its grant to this attempt, by message or not yet claimed: claimed (a re-entry takes the general path).
      local mf, ma, mc, _u = string.match(mine, '^(%d+):([^:]*):(%d+):(1?):[sp]%d*$')
      local exp = tonumber(redis.call('ZSCORE', s, owner))
      if ma == aid and exp and exp > now then
        exp = math.max(now + tonumber(ms) * 1000, exp)
        local at = math.floor(exp / 1000) + 1
        redis.call('ZADD', s, exp, owner)
        redis.call('HSET', d, owner, mf .. ':' .. aid .. ':' .. mc .. '::' .. kind)
        redis.call('PEXPIREAT', s, at, 'GT')
        redis.call('PEXPIREAT', d, at, 'GT')
        redis.call('PEXPIREAT', h, at, 'GT')
        if entry ~= '' then redis.call('ZREM', q, entry) end
        return mf
      end
      n = nil
    elseif cap and n >= cap then
      -- Every permit taken: wait for the earliest hold to end (or a release).
      local first = redis.call('ZRANGE', s, 0, 0, 'WITHSCORES')
      return busy(q, entry, fresh, ARGV[5], math.max(1, math.floor((tonumber(first[2]) - now) / 1000) + 1))
    else
      local x = redis.call('EXISTS', q, wk, wk)
      seen = x >= 2
      if x % 2 == 1 then n = nil end
    end
  end
  if n and not (cap and n >= cap) then
    -- A new hold, with a fence above the last one.
    local f = fresh
    if tonumber(last) >= now then f = string.format('%d', tonumber(last) + 1) end
    local exp = now + tonumber(ms) * 1000
    local at = math.floor(exp / 1000) + 1
    redis.call('ZADD', s, exp, owner)
    redis.call('HSET', d, owner, f .. ':' .. aid .. ':1::' .. kind)
    if n == 0 then
      redis.call('PEXPIREAT', s, at)
      redis.call('PEXPIREAT', d, at)
      redis.call('SET', h, f .. '/' .. kind, 'PXAT', at)
    else
      redis.call('PEXPIREAT', s, at, 'GT')
      redis.call('PEXPIREAT', d, at, 'GT')
      redis.call('SET', h, f .. '/' .. kind, 'KEEPTTL')
      redis.call('PEXPIREAT', h, at, 'GT')
    end
    if entry ~= '' then redis.call('ZREM', q, entry) end
    if seen then redis.pcall(pub, wk, 'g') end
    return f
  end
end
-- @include _handoff.lua
local until_us = now + tonumber(ms) * 1000
local lag = tonumber(ARGV[8])
local lus = (lag or 0) * 1000
-- How the lease is held with this hold (its kind without weight), and how many permits it takes.
local km, wt = mode_of(kind), weight_of(kind)

-- Whether this call passed on a grant that its waiter never claimed: the reply says so.
local passed = false
local function told(r)
  if not passed then return r end
  if type(r) == 'table' then
    r[4] = 1
    return r
  end
  return { r, 0, 0, 1 }
end

local function wait(retry)
  return told(busy(q, entry, string.format('%d', now), ARGV[5], retry))
end

local function done(f)
  if entry ~= '' then redis.call('ZREM', q, entry) end
  return told(f)
end

local fence, gid, c, by, gowner, smode, dly = record(v)
-- (An unclaimed grant with a lock delay keeps the lease for the delay after its claim window.)
if by and dly then by = by + dly * 1000 end
if gowner and by and now > by then
  -- An exclusive grant never claimed within its claim window: taken back (the admission below passes it on; shared
  -- holds of its owner stay).
  gowner = nil
  passed = true
end
if gowner then
  if kind ~= 's' then return '!x' end
  -- (An exclusive hold in its lock delay keeps the lease, as held, until the delay ends: from its owner too.)
  if gowner ~= owner or not alive(h, dly) then
    local r = redis.call('PTTL', h)
    if by then r = math.min(r, math.floor((by - now) / 1000) + 1) end
    return wait(math.max(r, 1))
  end
  -- A downgrade: a shared hold for the exclusive holder, with its fence, reentrant like any shared hold. Its owner
  -- is evidently alive: an exclusive grant still to be claimed is claimed (its TTL, the lease, was set when it was
  -- handed over). The exclusive record keeps its own TTL: the shared hold may outlive it.
  if by then write_held(h, fence, gid, c, nil, owner, dly) end
  local mf, ma, mc, _u, _k, md = hold_of(d, owner)
  local exp = tonumber(redis.call('ZSCORE', s, owner)) or 0
  if mf and exp > now then
    -- (Its shared hold in its lock delay: dead for it too, it waits for the delay's end.)
    if exp - md * 1000 <= now then return wait(math.floor((exp - now) / 1000) + 1) end
    put(s, d, owner, mf, aid, ma == aid and mc or mc + 1, false, math.max(until_us + md * 1000, exp), 's', false, nil,
      md)
    return done(mf)
  end
  -- (Watched, see inspect.lua: the watch key counts 2 in the EXISTS of the holder set, and the new hold is told.)
  local x = redis.call('EXISTS', s, h .. ':n', h .. ':n')
  put(s, d, owner, fence, aid, 1, false, until_us + lus, 's', x % 2 == 0, nil, lag)
  if x >= 2 then redis.pcall(pub, h .. ':n', 'g') end
  return done(fence)
end
-- (An expired hold still unclaimed is a grant its waiter never claimed: dropped, it is passed on.)
local n, mode, lapsed = holders(s, d, now, smode, aid)
if lapsed then passed = true end
if mode and mode ~= km then return '!' .. mode end
if mode then
  -- This owner's live hold: re-entered, or claimed by the attempt it was granted to (a retry, or a handoff whose
  -- message crossed this call). A re-entry while the hold is still unclaimed claims it, and keeps the waiter's
  -- attempt id so that its own re-check still finds its grant (as acquire.lua does).
  local mf, ma, mc, unclaimed, mk, md = hold_of(d, owner)
  if mf then
    local exp = tonumber(redis.call('ZSCORE', s, owner))
    -- (Its hold in its lock delay: dead for it too, it waits for the delay's end.)
    if exp - md * 1000 <= now then return wait(math.floor((exp - now) / 1000) + 1) end
    -- (A re-entry takes no more permits: it must ask the weight its hold has.)
    if mk ~= kind then return '!w' .. mode end
    exp = math.max(until_us + md * 1000, exp)
    if ma == aid then
      put(s, d, owner, mf, aid, mc, false, exp, kind, false, nil, md)
    else
      put(s, d, owner, mf, unclaimed and ma or aid, mc + 1, false, exp, kind, false, nil, md)
    end
    redis.call('PEXPIREAT', h, at_ms(exp), 'GT')
    return done(mf)
  end
end
local cap = tonumber(string.match(kind, '^p(%d+)'))
if cap and n >= cap then return wait(earliest(s, now)) end
-- FIFO: queued waiters go first; the run admitted may reach this caller, or empty the queue. (A caller too heavy for
-- the permits left still admits the waiters ahead of it that fit.)
-- Watched (see inspect.lua), the watch key counts 2 in the same EXISTS (an odd count is the queue), and a grant made
-- here, to this caller or to waiters admitted, is told on it.
local wk = h .. ':n'
local x = redis.call('EXISTS', q, wk, wk)
local queued = x % 2 == 1
if cap and n + wt > cap and not queued then return wait(earliest(s, now)) end
if queued then
  local w = { h = h, q = q, s = s, d = d, pub = pub, last = fence, self = aid, mode = mode, n = n, now = now }
  local r = admit(w)
  fence, mode, n = w.last, w.mode, w.n
  if (r ~= 'self' and r ~= 'empty') or (mode and mode ~= km) or (cap and n + wt > cap) then
    if w.granted and x >= 2 then redis.pcall(pub, wk, 'g') end
    if w.granted then return wait(w.granted) end
    if n > 0 then return wait(earliest(s, now)) end
    return wait(math.max(redis.call('PTTL', h), 1))
  end
  if r == 'self' then entry = '' end
end
local f = next_fence(fence, now)
put(s, d, owner, f, aid, 1, false, until_us + lus, kind, n == 0, nil, lag)
add_surplus(d, wt - 1)
write_set(h, f, km, n == 0 and until_us + lus or latest(s))
if x >= 2 then redis.pcall(pub, wk, 'g') end
local r = done(f)
-- The waiters behind this caller that can proceed with it (a run of shared waiters, free permits); none when nobody
-- was queued before (this script queued nobody since).
if queued and redis.call('EXISTS', q) == 1 then
  admit({ h = h, q = q, s = s, d = d, pub = pub, last = f, mode = km, n = n + wt, now = now })
end
return r
