-- release_set: drop one shared hold or permit of this owner; on its last hold, admit the waiters that can now
-- proceed (k permits freed: the waiters at the head that now fit, in order; the last shared hold gone: the exclusive
-- waiter at the head). With an attempt
-- id it undoes that acquire call instead (see release.lua).
-- KEYS[1]  lease key
-- KEYS[2]  wait queue
-- KEYS[3]  holder set, KEYS[4] holder records (see _holders.lua)
-- ARGV[1]  owner
-- ARGV[2]  how long the grant record outlives the final release, ms
-- ARGV[3]  the fence of the hold being released, or "" to skip the check
-- ARGV[4]  attempt id to undo; "" or omitted
-- ARGV[5]  that attempt's queue entry; "" or omitted
-- ARGV[6]  publish command: SPUBLISH, or PUBLISH (the default when omitted)
-- Returns  as release.lua: 0 not held by this owner, 1 one hold released and the owner still holds it, 2 released,
--          3 released and a waiter admitted.
local h, q, s, d = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold_fence, aid, entry = ARGV[3], ARGV[4] or '', ARGV[5] or ''
if entry ~= '' then redis.call('ZREM', q, entry) end
local owner = ARGV[1]
-- The common case first, with no closure and no table: a plain release of a live single hold of weight 1 without a
-- lock delay ("<fence>:<attempt id>:1:<unclaimed>:<kind>", see _holders.lua) is dropped here; with nobody queued it
-- is done here too when live holds stay (the set record is theirs; expired ones among them are purged by whoever
-- next counts them) or none is left at all (the fence kept). Anything else (only expired holds left, the admission of
-- waiters) takes the general path below.
local now, dropped
if aid == '' then
  local v = redis.call('HGET', d, owner)
  local fs = v and string.match(v, '^(%d+):[^:]*:1:1?:[sp]%d*$')
  if fs and (hold_fence == '' or fs == hold_fence) then
    local exp = tonumber(redis.call('ZSCORE', s, owner))
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    if exp and exp > now then
      redis.call('ZREM', s, owner)
      redis.call('HDEL', d, owner)
      dropped = true
      -- (Watched, see inspect.lua: the watch key counts 2, and the release is told on its channel.)
      local x = redis.call('EXISTS', q, h .. ':n', h .. ':n')
      if x >= 2 then redis.pcall(ARGV[6] or 'PUBLISH', h .. ':n', 'r' .. owner) end
      if x % 2 == 0 then
        if redis.call('EXISTS', s) == 1 then
          -- Live holds stay, and the set record with them (expired ones are purged by whoever next counts). Only
          -- expired ones left: the general path below purges them and keeps the fence for FENCE_RETAIN_MS.
          if redis.call('ZCOUNT', s, '(' .. string.format('%d', now), '+inf') > 0 then return 2 end
        else
          local r = redis.call('GET', h)
          local sf = r and string.match(r, '^(%d+)/[sp]%d*$')
          if sf then
            redis.call('SET', h, sf, 'PX', ARGV[2])
            return 2
          end
        end
      end
    end
  end
end
-- @include _handoff.lua
if not dropped then
  now = now or now_us()
  local mf, ma, mc, unclaimed, kind, md, wt = hold_of(d, owner)
  if not mf then return 0 end
  local exp = tonumber(redis.call('ZSCORE', s, owner))
  -- (A hold in its lock delay is not its owner's: its release changes nothing, the delay runs out.)
  if not exp or exp - md * 1000 <= now then return 0 end
  if (hold_fence ~= '' and string.format('%d', mf) ~= hold_fence) or (aid ~= '' and ma ~= aid) then return 0 end
  if mc > 1 then
    -- An undone attempt is forgotten (a repeated undo must not drop another hold).
    redis.call('HSET', d, owner, hold_text(mf, aid ~= '' and '' or ma, mc - 1, unclaimed, kind, md))
    return 1
  end
  redis.call('ZREM', s, owner)
  redis.call('HDEL', d, owner)
  add_surplus(d, 1 - wt)
end
local fence, _, _, _, gowner, smode = record(redis.call('GET', h))
-- An exclusive holder (the owner, whose downgrade this was) excludes everyone else still.
if gowner then return 2 end
local n, mode = holders(s, d, now, smode)
local last = fence
local x = dropped and 0 or redis.call('EXISTS', q, h .. ':n', h .. ':n')
if x >= 2 then redis.pcall(ARGV[6] or 'PUBLISH', h .. ':n', 'r' .. owner) end
if (dropped and redis.call('EXISTS', q) == 1) or x % 2 == 1 then
  local w = { h = h, q = q, s = s, d = d, pub = ARGV[6] or 'PUBLISH', last = fence, mode = mode, n = n, now = now }
  admit(w)
  if w.granted then return 3 end
  last, mode = w.last, w.mode
end
if not mode then write_free(h, last, ARGV[2]) end
return 2
