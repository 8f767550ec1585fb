-- The lease key's record: its one parser, its builders and its writes (inlined where a script says
-- `@include _record.lua`). No script reads or writes the lease key's value but through these.
-- @include _constants.lua
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
-- A fence is written as its decimal digits (string.format's %d: `..` would write a number of more than 14 digits
-- in exponent form). The writers take it as a number or as those digits, which they write as they are: the cheap
-- paths have the digits already (TIME's, or the record's), and a conversion to a number and back costs on every
-- call.
-- record(v, loose): fence (number, 0 without a record), attempt id, holds (number), claim by (number or nil), owner
--   (nil when free), the set mode (nil unless a set record), the lock delay in ms (nil when none), and the fence's
--   digits as written (nil without a record). Any other value is not ours: an error, never a free lease; or, when
--   `loose`, nothing (fence and owner nil): for the scripts that only act for its owner (release, extend), which
--   leave a value not theirs as it is and say "not held".
-- held(fs, a, c, by, o, dly): the text of a held record, its fence given as digits (fs; write_held() takes a
--   number too). c: holds (a number, or digits); by: claim deadline µs or nil; dly: lock delay ms or nil. c and dly
--   are written with `..`, exact for integers of up to 14 digits.
-- write_held(h, f, a, c, by, o, dly, ttl): writes that record at h, expiring in `ttl` ms, or keeping the key's TTL
--   when `ttl` is nil.
-- write_set(h, f, kind, us): writes the set record "<f>/<kind>" at h, living until `us` (server µs: when the
--   latest live hold expires; 0 or past: the key is deleted at once).
-- write_free(h, f, ms): writes the free record "<f>" at h, kept for `ms` ms.
-- now_us(): server time in microseconds.
-- next_fence(last, now): max(now, last + 1): strictly increasing per name while a record exists, time-anchored
--   when none does (Redis TTLs already assume the server clock does not step back).
-- alive(h, dly): whether the exclusive hold at h (with lock delay `dly`, or nil) is still its holder's: true
--   without a delay, else while its PTTL exceeds the delay.
-- at_ms(us): the PEXPIREAT / PXAT time (ms) at which something expiring at `us` (µs) has surely expired.
-- A helper marked `@inline` costs no closure: scripts/gen_lua.ts puts its expression in place of each call (whose
-- arguments must then be names, fields or literals).
local function record(v, loose)
  if not v then return 0 end
  local f, a, c, by, dly, o = string.match(v, '^(%d+):([^:]*):(%d+):(%d*)d?(%d*):(.*)$')
  if not f then
    local sf, mode = string.match(v, '^(%d+)/(s)$')
    if not sf then sf, mode = string.match(v, '^(%d+)/(p%d+)$') end
    if sf and #sf <= FENCE_DIGITS then return tonumber(sf), nil, nil, nil, nil, mode, nil, sf end
    -- A kept fence: digits only.
    if #v > FENCE_DIGITS or not string.find(v, '^%d+$') then
      if loose then return nil end
      error({ err = 'ERR redlease: the lease key holds a value that is not a lease record' })
    end
    return tonumber(v), nil, nil, nil, nil, nil, nil, v
  end
  -- (No conversion of what is absent: most records have no claim deadline and no lock delay.)
  if by == '' then by = nil else by = tonumber(by) end
  if dly == '' then dly = nil else dly = tonumber(dly) end
  return tonumber(f), a, tonumber(c), by, o, nil, dly, f
end

-- (Joined with `..`: string.format's %s would cut an owner at a NUL byte. Inlined: the uncontended acquire builds
-- its record with it.)
-- @inline
local function held(fs, a, c, by, o, dly)
  return fs .. ':' .. a .. ':' .. c .. ':' .. (by and string.format('%d', by) or '') .. (dly and 'd' .. dly or '') ..
    ':' .. o
end

local function write_held(h, f, a, c, by, o, dly, ttl)
  if type(f) == 'number' then f = string.format('%d', f) end
  local rec = held(f, a, c, by, o, dly)
  if ttl then return redis.call('SET', h, rec, 'PX', ttl) end
  return redis.call('SET', h, rec, 'KEEPTTL')
end

local function at_ms(us)
  return math.floor(us / 1000) + 1
end

local function write_set(h, f, kind, us)
  if type(f) == 'number' then f = string.format('%d', f) end
  return redis.call('SET', h, f .. '/' .. kind, 'PXAT', at_ms(us))
end

-- (Inlined: the uncontended release writes it.)
-- @inline
local function write_free(h, f, ms)
  return redis.call('SET', h, type(f) == 'number' and string.format('%d', f) or f, 'PX', ms)
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function next_fence(last, now)
  if last >= now then return last + 1 end
  return now
end

-- (Inlined: the uncontended release checks it.)
-- @inline
local function alive(h, dly)
  return not dly or redis.call('PTTL', h) > dly
end

