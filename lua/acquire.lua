-- acquire: take a free lease, re-enter one this owner holds, claim one handed to this attempt, or report the
-- holder's remaining time and (for a waiting caller) join the FIFO wait queue. A free lease goes to the head of
-- the live queue before any newcomer (FIFO across expiry), and a handed-over grant that its waiter did not claim
-- within its claim window is taken back and passed on.
-- KEYS[1]  lease key: the grant record (see _record.lua)
-- KEYS[2]  wait queue: sorted set of entries (see _handoff.lua) -> µs when queued
-- KEYS[3]  the holder set of shared holds or permits, and KEYS[4] its records (see _holders.lua)
-- ARGV[1]  owner
-- ARGV[2]  lease ms (the TTL to set)
-- ARGV[3]  attempt id (unique per acquire call)
-- ARGV[4]  queue entry for this waiter; "" or omitted when the caller does not wait
-- ARGV[5]  queue TTL ms (how long an idle queue may live), with an entry
-- ARGV[6]  publish command: SPUBLISH, or PUBLISH (the default when omitted)
-- ARGV[7]  lock delay ms (> 0), or omitted for none: a hold granted to this call that expires without a release
--          keeps the lease from everyone for that long after (see _record.lua)
--          (An uncontended call on one server sends the first three only: every argument costs the client and
--          Redis on every call.)
-- Returns  fence (> 0) when the caller holds the lease now: fresh or free with only its kept fence and nobody waiting
--          (as a string of digits), re-entered, or
--          handed to this attempt (which this call claims);
--          otherwise -1 - the ms after which to try again (the holder's PTTL, or what is left of an unclaimed
--          grant's claim window); for a waiting caller { that number, µs when it was queued, 1 if this call
--          queued it else 0 };
--          "!upgrade" when this owner holds the lease shared (waiting for exclusive would deadlock), "!p<n>" when
--          the lease is held as n permits. When this call passed on a grant its waiter never claimed, a number reply
--          comes as { that number, 0, 0, 1 } and a table reply with a 4th element 1.
local h, q, s, d = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, ms, aid, entry, pub = ARGV[1], ARGV[2], ARGV[3], ARGV[4] or '', ARGV[6] or 'PUBLISH'
-- With a lock delay: the record says so, and its key lives the delay longer than the hold.
local lag, ttl = ARGV[7], ms
if lag then ttl = tonumber(ms) + tonumber(lag) end
-- The uncontended path comes first and stays cheap (no number conversions, no closures: held() is inlined, and
-- each other helper is included just before the path that first needs it): with no record and nobody queued,
-- SET ... NX GET takes the key in one call; otherwise it returns the record that is there. The fresh fence is the
-- server time in µs, written as TIME's seconds and zero-padded microseconds.
-- @include _record.lua (held)
local t = redis.call('TIME')
local us = t[2]
if #us < 6 then us = string.rep('0', 6 - #us) .. us end
local fresh = t[1] .. us
local v = redis.call('SET', h, held(fresh, aid, '1', nil, owner, lag), 'NX', 'PX', ttl, 'GET')
-- Watched (see inspect.lua), the watch key "<lease key>:n" exists: it is counted in the EXISTS that looks for a queue
-- and holds (one command either way), and a watched lease takes the general path, which tells its grant (take_free).
if not v then
  if redis.call('EXISTS', q, s, h .. ':n') == 0 then return fresh end
  -- Free, but waiters are queued (their holder's lease expired: they go first), or shared holds or permits live, or
  -- it is watched.
  redis.call('DEL', h)
elseif string.find(v, '^%d+$') and #v <= FENCE_DIGITS and redis.call('EXISTS', q, s, h .. ':n') == 0 then
  -- Free since a release moments ago (its fence kept: see _record.lua), with nobody queued and no shared holds or
  -- permits: as cheap as a fresh lease but for one more SET (no parse, no closure). The fence is the clock's unless
  -- the kept one is not below it (a burst of grants ran ahead of the clock): then the kept one + 1.
  local f = fresh
  if tonumber(v) >= tonumber(fresh) then f = string.format('%d', tonumber(v) + 1) end
  redis.call('SET', h, held(f, aid, '1', nil, owner, lag), 'PX', ttl)
  return f
end
-- @include _queue.lua
-- Held by another owner, claimed or handed over and still within its claim window (the common contended case, a
-- waiter's call): told apart by one match of two captures, before record() (a closure, six captures and their
-- conversions). Busy for the holder's PTTL, or what is left of an unclaimed grant's claim window. Past that window,
-- the slow path takes it back (or, with a lock delay, waits for its end). A hold in its lock delay is busy for its
-- PTTL, the delay's end.
if v then
  local cb, o = string.match(v, '^%d+:[^:]*:%d+:(%d*)d?%d*:(.*)$')
  if o and o ~= owner then
    if cb == '' then return busy(q, entry, fresh, ARGV[5], redis.call('PTTL', h)) end
    local by, now = tonumber(cb), tonumber(fresh)
    if by >= now then
      return busy(q, entry, fresh, ARGV[5], math.min(redis.call('PTTL', h), math.floor((by - now) / 1000) + 1))
    end
  end
end
-- @include _record.lua (record)
local now = tonumber(fresh)
local fence, gid, c, by, gowner, smode, dly = record(v)
-- @include _handoff.lua

-- No exclusive holder: shared holds or permits may live (then the caller waits, or is refused); else the head of
-- the live queue goes first, then the caller.
local function take_free(last, hint)
  local n, mode = holders(s, d, now, hint)
  if n > 0 then
    write_set(h, last, mode, latest(s))
    if mode ~= 's' then return '!' .. mode end
    -- (A shared hold of this owner in its lock delay is not its own: the caller waits for it like anyone.)
    local sc = redis.call('ZSCORE', s, owner)
    if sc then
      local _f, _a, _c, _u, _k, md = hold_of(d, owner)
      if tonumber(sc) - (md or 0) * 1000 > now then return '!upgrade' end
    end
    return busy(q, entry, fresh, ARGV[5], earliest(s, now))
  end
  -- (The watch key counts 2: an odd count is the queue.)
  local wk = h .. ':n'
  local x = redis.call('EXISTS', q, wk, wk)
  if x >= 2 then redis.pcall(pub, wk, 'g') end
  if x % 2 == 1 then
    local w = { h = h, q = q, s = s, d = d, pub = pub, last = last, self = aid, n = 0, now = now }
    local r = admit(w)
    last = w.last
    if w.granted then return busy(q, entry, fresh, ARGV[5], w.granted) end
    if r == 'self' then entry = '' end
  end
  local f = next_fence(last, now)
  write_held(h, f, aid, 1, nil, owner, tonumber(lag), ttl)
  if entry ~= '' then redis.call('ZREM', q, entry) end
  return f
end

if not gowner then return take_free(fence, smode) end
-- A hold in its lock delay is dead for its owner too: it waits for the delay's end like anyone.
if gowner == owner and not alive(h, dly) then return busy(q, entry, fresh, ARGV[5], math.max(redis.call('PTTL', h), 1)) end
if gowner == owner and gid == aid then
  -- This attempt holds it already (a retry, or a handoff whose message crossed this call): claim it.
  if by then write_held(h, fence, aid, c, nil, owner, dly, tonumber(ms) + (dly or 0)) end
  if entry ~= '' then redis.call('ZREM', q, entry) end
  return fence
end
if by and dly and now > by and now <= by + dly * 1000 then
  -- Handed over but never claimed within its claim window, with a lock delay: its waiter may have used it until
  -- that window ended. (Within the window only its owner gets here, whose re-entry below claims it, as without a
  -- delay.)
  return busy(q, entry, fresh, ARGV[5], math.floor((by + dly * 1000 - now) / 1000) + 1)
end
if by and now > by then
  -- Handed over but never claimed (its waiter is dead, partitioned or deaf): take it back, pass it on. An
  -- unclaimed grant is its owner's only exclusive hold (a re-entry or a downgrade would have claimed it); shared
  -- holds of its owner stay, and take_free counts them. The reply says so (as a table with a 4th element 1).
  local r = take_free(fence)
  if type(r) == 'table' then
    r[4] = 1
    return r
  end
  if type(r) == 'number' then return { r, 0, 0, 1 } end
  return r
end
-- Re-entry (another owner's hold took the contended path above). Record this attempt, for its undo. If the
-- owner's hold is a grant still to be claimed by its waiter, the owner is evidently alive: that claims it, and the
-- record keeps the waiter's attempt id so that its own re-check still finds its grant (holds are counted per owner,
-- so a claim window on a shared count could otherwise take back another attempt's hold).
-- (A re-entry keeps the lock delay its hold was granted with.)
write_held(h, fence, by and gid or aid, c + 1, nil, owner, dly)
redis.call('PEXPIRE', h, tonumber(ms) + (dly or 0), 'GT')
if entry ~= '' then redis.call('ZREM', q, entry) end
return fence
