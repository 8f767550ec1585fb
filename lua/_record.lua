-- Shared helpers (inlined where a script says `@include _record.lua`).
-- The lease key is a string, the grant record:
--   held  "<fence>:<attempt id>:<holds>:<claim by µs>[d<delay ms>]:<owner>"  (claim by empty once claimed; owner
--         last, so it may hold any character). The attempt id names the acquire call that took the current hold (so
--         a retry or an undo of that call is recognised); a claim deadline is present while a handed-over grant has
--         not been claimed by its waiter yet. "d<delay ms>" only for a hold granted with a lock delay: its key then
--         lives that much longer than the hold (TTL = the hold's time left + delay), so a hold that was not
--         released keeps the lease from everyone for the delay after it expired, while its PTTL <= delay it is dead
--         for its holder (alive(): no renewal, re-entry, release or claim), and a release deletes it at once.
--   free  "<fence>": the last fence, kept for a while after the final release (a fence taken from the clock after
--         that is larger anyway, and a burst of grants may have run the fence ahead of the clock).
--   set   "<fence>/<kind>": held by shared holds ("s") or permits ("p<n>"), see _holders.lua: the record keeps the
--         latest fence handed out and lives as long as the live holds (which, not the record, say how it is held).
-- record(v): fence (number, 0 without a record), attempt id, holds (number), claim by (number or nil), owner
--   (nil when free), the set mode (nil unless a set record), and the lock delay in ms (nil when none). Any other value is not ours: an error, never a
--   free lease.
-- now_us(): server time in microseconds.
-- next_fence(last, now): max(now, last + 1): strictly increasing per name while a record exists, time-anchored
--   when none does (Redis TTLs already assume the server clock does not step back).
-- held(f, a, c, by, o, dly): the text of a held record (dly: its lock delay ms, or nil).
-- alive(h, dly): whether the exclusive hold at h (with lock delay `dly`, or nil) is still its holder's: true
--   without a delay, else while its PTTL exceeds the delay.
local function record(v)
  if not v then return 0 end
  local f, a, c, by, dly, o = string.match(v, '^(%d+):([^:]*):(%d+):(%d*)d?(%d*):(.*)$')
  if not f then
    local sf, mode = string.match(v, '^(%d+)/(s)$')
    if not sf then sf, mode = string.match(v, '^(%d+)/(p%d+)$') end
    if sf and #sf <= 16 then return tonumber(sf), nil, nil, nil, nil, mode end
    -- A kept fence: digits only, at most 16 (microseconds since 1970 until the year 2286).
    if #v > 16 or not string.find(v, '^%d+$') then
      error({ err = 'ERR redlease: the lease key holds a value that is not a lease record' })
    end
    return tonumber(v)
  end
  return tonumber(f), a, tonumber(c), tonumber(by), o, nil, tonumber(dly)
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function next_fence(last, now)
  if last >= now then return last + 1 end
  return now
end

local function held(f, a, c, by, o, dly)
  -- Joined with `..`: string.format's %s would cut an owner at a NUL byte.
  local rec = string.format('%d', f) .. ':' .. a .. ':' .. string.format('%d', c) .. ':'
  if by then rec = rec .. string.format('%d', by) end
  if dly then rec = rec .. 'd' .. string.format('%d', dly) end
  return rec .. ':' .. o
end

local function alive(h, dly)
  return not dly or redis.call('PTTL', h) > dly
end

