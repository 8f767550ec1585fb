-- release: drop one hold of this owner; on the last one, hand the lease to the first live waiter or free it.
-- With an attempt id it undoes that acquire call instead (a cancelled wait, or a call whose reply was lost):
-- its queue entry is removed, and the hold it took, if any, is released.
-- KEYS[1]  lease key
-- KEYS[2]  wait queue
-- KEYS[3]  the holder set, and KEYS[4] its records (see _holders.lua): the owner may hold shared holds too, which
--          stay (the lease is then shared: waiters that can join them are admitted)
-- ARGV[1]  owner
-- ARGV[2]  how long the grant record outlives the final release, ms
-- ARGV[3]  the fence of the hold being released, or "" to skip the check: a hold of an earlier grant (expired,
--          force-unlocked, then re-granted to the same owner) must not release the newer grant
-- ARGV[4]  attempt id to undo; "" or omitted (the record remembers the owner's latest attempt: an earlier one whose
--          record a re-entry overwrote is not recognised, and its hold lapses with the lease)
-- ARGV[5]  that attempt's queue entry; "" or omitted
-- ARGV[6]  publish command: SPUBLISH (cluster), or PUBLISH (the default when omitted)
-- A hold in its lock delay (see _record.lua) is not its owner's: its release changes nothing (the delay runs out).
-- Returns  0 not held by this owner (or that attempt holds nothing: nothing changed but its entry removed),
--          1 one hold released and the owner still holds it (reentrant count > 0),
--          2 released and freed, 3 released and handed to a waiting client.
local h, q, s, d = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, hold_fence, aid, entry = ARGV[1], ARGV[3], ARGV[4] or '', ARGV[5] or ''
if entry ~= '' then redis.call('ZREM', q, entry) end
-- @include _record.lua (held, alive, write_free)
local v = redis.call('GET', h)
-- The common record first: one hold, no lock delay ("<fence>:<attempt id>:1:<claim by>:<owner>", see _record.lua;
-- a claim deadline, of a grant released before it was claimed, matters only to a hold that stays). One match of two
-- captures tells it, with no alive() check (no delay): record() (a closure, six captures and their conversions) is
-- for the other shapes, an undo, and the holds that stay.
local fs, o, f, a, c, by, dly, top, now
if v and aid == '' then fs, o = string.match(v, '^(%d+):[^:]*:1:%d*:(.*)$') end
if o == owner and (hold_fence == '' or fs == hold_fence) then
  c = 1
else
-- @include _record.lua (record)
  local _m
  f, a, c, by, o, _m, dly, fs = record(v, true)
  if o ~= owner or (hold_fence ~= '' and fs ~= hold_fence) or (aid ~= '' and a ~= aid) then
    return 0
  end
  if not alive(h, dly) then return 0 end
  if c ~= 1 then
    -- An undone attempt is forgotten (a repeated undo must not drop another hold). (held() is inlined: its
    -- arguments must be names.)
    if aid ~= '' then a = '' end
    local left = c - 1
    redis.call('SET', h, held(fs, a, left, by, o, dly), 'KEEPTTL')
    return 1
  end
end
-- The last hold. Whether anyone waits is one EXISTS of the queue and the holder set (an integer: ZPOPMIN's empty
-- reply is a table to build and collect on every call), which also tells the handoff whether shared holds live.
-- Watched (see inspect.lua), the watch key counts 3 in the same EXISTS, and the release is told on its channel.
local wk = h .. ':n'
local queued = redis.call('EXISTS', q, s, wk, wk, wk)
local pub = ARGV[6] or 'PUBLISH'
if queued >= 3 then
  queued = queued - 3
  redis.pcall(pub, wk, 'r' .. owner)
end
if queued > 0 then top = redis.call('ZPOPMIN', q) end
if not (top and top[1]) then
  -- Nobody waits: keep the fence for a while (a fence taken from the clock after that is larger anyway, and a
  -- burst of grants may have run the fence ahead of the clock). Shared holds the owner added while exclusive (a
  -- downgrade) stay in the holder set, and every path that finds the lease free counts them (_holders.lua).
  write_free(h, fs, ARGV[2])
  return 2
end
f = tonumber(fs)
if queued == 1 then
  -- The common handoff: a waiter was popped and no holder set exists (EXISTS counted the queue only), so the lease
  -- is free for it. An exclusive waiter is granted here as admit() would (see _handoff.lua: the fence, the message,
  -- the unclaimed record with its claim deadline), without admit()'s closures and table. Any other head (shared,
  -- permits, not an entry), or one whose client is gone (PUBLISH 0: its fence consumed), goes on below.
  local cid, wid, wms, lag, cms, kind, wo = string.match(top[1], '^([^|]*)|([^|]*)|(%d+)d?(%d*)|(%d+)|([^|]*)|(.*)$')
  if kind == 'x' then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if f >= now then f = f + 1 else f = now end
    local gs = string.format('%d', f)
    if redis.call(pub, h .. ':w:' .. cid, wid .. ':' .. gs .. ':' .. top[2] .. ':' .. string.format('%d', now)) > 0 then
      local until_us, lag_ms = now + tonumber(cms) * 1000, tonumber(lag)
      redis.call('SET', h, held(gs, wid, '1', until_us, wo, lag_ms), 'PX', tonumber(wms) + (lag_ms or 0))
      return 3
    end
    top = nil
  end
end
-- Handed to a waiter (no table until one is found).
-- @include _handoff.lua
now = now or now_us()
local n, mode = holders(s, d, now)
if n > 0 then
  -- The owner added shared holds while exclusive (a downgrade): they stay, and the lease is now shared.
  write_set(h, f, mode, latest(s))
end
local w = { h = h, q = q, s = s, d = d, pub = pub, last = f, top = top, mode = mode, n = n, now = now }
admit(w)
if w.granted then return 3 end
if not w.mode then write_free(h, w.last, ARGV[2]) end
return 2
