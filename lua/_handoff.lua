-- Shared by release.lua and force_unlock.lua (inlined where they say `@include _handoff.lua`).
-- fence_of(value): the numeric fence stored in the lock hash's "" field ("<fence>" or "<fence>:<waiter id>").
-- next_fence(last): max(server time in microseconds, last + 1), as a decimal string: strictly increasing per
--   name while a record exists, and time-anchored when none does (Redis TTLs already assume the server clock
--   does not step back).
-- handoff(h, q, pub, last): pops waiters from the queue until one is listening, grants it the lease (owner
--   field, fence, marker, its own lease ms) and publishes "<waiter id>:<fence>" to that waiter's client channel.
--   An entry whose client has no live subscriber (PUBLISH returns 0) is a dead waiter and is dropped. Returns
--   true when the lease was handed over, false when the queue held nobody alive. `last` (the previous fence)
--   is read from the hash when nil, and only once a waiter is found.
local function fence_of(v)
  if not v then return 0 end
  return tonumber(string.match(v, '^%d+'))
end

local function next_fence(last)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if last >= now then now = last + 1 end
  return string.format('%d', now)
end

local function handoff(h, q, pub, last)
  while true do
    local e = redis.call('LPOP', q)
    if not e then return false end
    if not last then last = fence_of(redis.call('HGET', h, '')) end
    local cid, wid, ms, owner = string.match(e, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
    local f = next_fence(last)
    if redis.call(pub, h .. ':w:' .. cid, wid .. ':' .. f) > 0 then
      redis.call('HSET', h, '', f .. ':' .. wid)
      redis.call('HINCRBY', h, owner, 1)
      redis.call('PEXPIRE', h, ms)
      return true
    end
    last = tonumber(f)
  end
end
