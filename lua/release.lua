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
local hold_fence, aid, entry = ARGV[3], ARGV[4] or '', ARGV[5] or ''
if entry ~= '' then redis.call('ZREM', q, entry) end
local v = redis.call('GET', h)
if not v then return 0 end
local f, a, c, by, lag, o = string.match(v, '^(%d+):([^:]*):(%d+):(%d*)(d?%d*):(.*)$')
if o ~= ARGV[1] or (hold_fence ~= '' and f ~= hold_fence) or (aid ~= '' and a ~= aid) then return 0 end
if lag ~= '' and redis.call('PTTL', h) <= tonumber(string.sub(lag, 2)) then return 0 end
if c ~= '1' then
  -- An undone attempt is forgotten (a repeated undo must not drop another hold).
  if aid ~= '' then a = '' end
  redis.call('SET', h, f .. ':' .. a .. ':' .. (c - 1) .. ':' .. by .. lag .. ':' .. o, 'KEEPTTL')
  return 1
end
-- The last hold. No number conversions and no closures until a waiter is found.
local top = redis.call('ZPOPMIN', q)
if not top[1] then
  -- Nobody waits: keep the fence for a while (a fence taken from the clock after that is larger anyway, and a
  -- burst of grants may have run the fence ahead of the clock). Shared holds the owner added while exclusive (a
  -- downgrade) stay in the holder set, and every path that finds the lease free counts them (_holders.lua).
  redis.call('SET', h, f, 'PX', ARGV[2])
  return 2
end
-- @include _handoff.lua
local last, now = tonumber(f), now_us()
local n, mode = holders(s, d, now)
if n > 0 then
  -- The owner added shared holds while exclusive (a downgrade): they stay, and the lease is now shared.
  redis.call('SET', h, f .. '/' .. mode, 'PXAT', at_ms(latest(s)))
end
local g, _r, _m, _n
if top[1] then _r, last, mode, _n, g = admit(h, q, s, d, ARGV[6] or 'PUBLISH', last, nil, top, mode, n, now) end
if g then return 3 end
if not mode then redis.call('SET', h, string.format('%d', last), 'PX', ARGV[2]) end
return 2
