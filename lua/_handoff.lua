-- Shared by acquire.lua, release.lua and force_unlock.lua (inlined where they say `@include _handoff.lua`).
-- handoff(h, q, pub, last, self, top): pops waiters from the queue (a sorted set: entry -> server µs when queued),
--   oldest first, until one is listening; `top` is the ZPOPMIN reply of an entry the caller popped already.
--   An entry is "<client id>|<attempt id>|<lease ms>|<claim ms>|<owner>".
--   The caller's own entry (attempt id `self`) is not notified: returns "self" so the caller takes the lease.
--   Otherwise the first listening waiter is granted the lease, unclaimed, for its lease ms, and told by
--   "<attempt id>:<fence>:<queued µs>:<granted µs>" on its client's channel. Entries whose client has no
--   subscriber (PUBLISH returns 0) are dead and dropped, and so are members that are not such entries. Returns
--   the ms until the unclaimed grant lapses (claim window or lease) and the fence when handed over; otherwise
--   false when nobody live was queued, and then the fence to keep (dead entries consume fences).
-- It stands alone (release.lua, the contended path, includes nothing else): the server time, the next fence and
-- the grant record are written out here as now_us(), next_fence() and held() in _record.lua write them.
local function handoff(h, q, pub, last, self, top)
  while true do
    top = top or redis.call('ZPOPMIN', q)
    if not top[1] then return false, last end
    local cid, wid, ms, cms, owner = string.match(top[1], '^([^|]*)|([^|]*)|(%d+)|(%d+)|(.*)$')
    if not cid then
      -- Not an entry this library writes: dropped, as a dead waiter's is (it takes no fence).
      top = nil
    elseif wid == self then
      return 'self', last
    else
      local t = redis.call('TIME')
      local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
      local f = last + 1
      if now > f then f = now end
      local fs, ns = string.format('%d', f), string.format('%d', now)
      if redis.call(pub, h .. ':w:' .. cid, wid .. ':' .. fs .. ':' .. top[2] .. ':' .. ns) > 0 then
        -- Unclaimed, it lasts until the claim window or the lease ends, whichever is first.
        local by = string.format('%d', now + tonumber(cms) * 1000)
        redis.call('SET', h, fs .. ':' .. wid .. ':1:' .. by .. ':' .. owner, 'PX', ms)
        return math.min(tonumber(cms), tonumber(ms)), f
      end
      last = f
      top = nil
    end
  end
end
