-- Shared helpers (inlined where a script says `@include _record.lua`).
-- The lock hash's "" field is the grant record: "<fence>[:<attempt id>[:<claim by µs>:<owner>]]". The attempt id
-- names the acquire call that took the current hold (so a retry or an undo of that call is recognised); a claim
-- deadline and owner are present while a handed-over grant has not been claimed by its waiter yet.
-- record(v): fence (number), attempt id, claim-by (number or nil), owner of an unclaimed grant.
-- now_us(): server time in microseconds.
-- next_fence(last, now): max(now, last + 1): strictly increasing per name while a record exists, time-anchored
--   when none does (Redis TTLs already assume the server clock does not step back).
local function record(v)
  if not v then return 0, '', nil, nil end
  local f, a, by, o = string.match(v, '^(%d+):?([^:]*):?(%d*):?(.*)$')
  if by == '' then return tonumber(f), a, nil, nil end
  return tonumber(f), a, tonumber(by), o
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function next_fence(last, now)
  if last >= now then return last + 1 end
  return now
end
