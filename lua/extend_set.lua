-- extend_set: reset the expiry of this owner's shared hold or permit if, and only if, it still holds it (watchdog
-- renewal, extend(), and the claim of a handed-over grant, which it marks claimed).
-- KEYS[1]  lease key
-- KEYS[2]  holder set, KEYS[3] holder records (see _holders.lua)
-- ARGV[1]  owner
-- ARGV[2]  lease ms
-- ARGV[3]  the fence of the hold, or "" to skip the check
-- ARGV[4]  (unused: set holds are not re-established)
-- ARGV[5]  "GT" to only lengthen the expiry (renewals and claims), "" to set it (extend())
-- Returns  1 when extended, 0 when the owner no longer holds it (expired, released or force-unlocked, or in its
--          lock delay: see _holders.lua). A hold with a lock delay keeps its place the delay longer than asked.
local h, s, d = KEYS[1], KEYS[2], KEYS[3]
-- @include _holders.lua
local now = now_us()
local mf, ma, mc, _, kind, md = hold_of(d, ARGV[1])
if not mf or (ARGV[3] ~= '' and string.format('%d', mf) ~= ARGV[3]) then return 0 end
local exp = tonumber(redis.call('ZSCORE', s, ARGV[1]))
if not exp or exp - md * 1000 <= now then return 0 end
local us = now + (tonumber(ARGV[2]) + md) * 1000
if ARGV[5] == 'GT' and exp > us then us = exp end
put(s, d, ARGV[1], mf, ma, mc, false, us, kind, false, nil, md)
-- A set record lives as long as the holds (an exclusive record keeps its own TTL: a downgraded owner's).
local v = redis.call('GET', h)
local _f, _a, _c, _b, gowner = record(v)
if not v then
  write_set(h, mf, mode_of(kind), latest(s))
elseif not gowner then
  redis.call('PEXPIREAT', h, at_ms(us), 'GT')
end
return 1
