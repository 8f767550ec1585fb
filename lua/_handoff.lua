-- Shared by acquire.lua, release.lua and force_unlock.lua (inlined where they say `@include _handoff.lua`).
-- handoff(h, q, pub, last, self): pops waiters from the queue (a sorted set: entry -> server µs when queued),
--   oldest first, until one is listening. An entry is "<client id>|<attempt id>|<lease ms>|<claim ms>|<owner>".
--   The caller's own entry (attempt id `self`) is not notified: returns "self" so the caller takes the lease.
--   Otherwise the first listening waiter is granted the lease, unclaimed, for its lease ms, and told by
--   "<attempt id>:<fence>:<queued µs>:<granted µs>" on its client's channel; the next entry is told
--   "<attempt id>:0:<ms>" (re-check after that: when the grant's claim window or its lease ends). Entries whose client has no subscriber (PUBLISH
--   returns 0) are dead and dropped. Returns the ms until an unclaimed grant lapses (claim window or lease) when handed over,
--   false when nobody live was queued.
-- @include _record.lua
local function handoff(h, q, pub, last, self)
  while true do
    local top = redis.call('ZPOPMIN', q)
    if not top[1] then return false end
    local cid, wid, ms, cms, owner = string.match(top[1], '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
    if wid == self then return 'self' end
    local now = now_us()
    local f = next_fence(last, now)
    local msg = string.format('%s:%d:%s:%d', wid, f, top[2], now)
    if redis.call(pub, h .. ':w:' .. cid, msg) > 0 then
      -- Unclaimed, it lasts until the claim window or the lease ends, whichever is first.
      local window = math.min(tonumber(cms), tonumber(ms))
      redis.call('HSET', h, '', string.format('%d:%s:%d:%s', f, wid, now + tonumber(cms) * 1000, owner))
      redis.call('HINCRBY', h, owner, 1)
      redis.call('PEXPIRE', h, ms)
      local nxt = redis.call('ZRANGE', q, 0, 0)[1]
      if nxt then
        local ncid, nwid = string.match(nxt, '^([^|]*)|([^|]*)|')
        if nwid ~= self then redis.call(pub, h .. ':w:' .. ncid, nwid .. ':0:' .. window) end
      end
      return window
    end
    last = f
  end
end
