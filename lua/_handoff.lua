-- The admission of waiters, shared by every script that can free room (inlined where a script says
-- `@include _handoff.lua`, which brings _record.lua and _holders.lua with it).
-- @include _record.lua
-- @include _holders.lua
-- The queue is a sorted set: entry -> server µs when queued. An entry is
--   "<client id>|<attempt id>|<lease ms>|<claim ms>|<kind>|<owner>", kind "x" (exclusive), "s" (shared) or "p<n>".
-- admit(h, q, s, d, pub, last, self, top, mode, n): grants waiters from the head of the queue, oldest first, while
--   each can proceed: an exclusive waiter when nothing is held (and then it stops), a shared waiter while the lease
--   is free or shared, a permit waiter while the lease is free or fewer than its n permits are taken. The caller
--   passes the state with no exclusive holder: `mode` nil (free) or the set mode, with `n` live holders; `last` is
--   the latest fence; `top` a ZPOPMIN reply it popped already, if any. An entry whose client has no subscriber
--   (PUBLISH returns 0) is dead and dropped (it consumes a fence), and so is a member that is not an entry.
--   A waiter is told by "<attempt id>:<fence>:<queued µs>:<granted µs>" on its client's channel; its grant is its own
--   unclaimed until its claim window ends (or its lease, if shorter), when it lapses and passes on.
--   The caller's own entry (attempt `self`) is not notified: when it can proceed, admit returns 'self' (its entry
--   removed) and the caller takes the lease. A waiter that cannot proceed is put back, and admission stops.
--   Returns r, last, mode, n: r is 'self'; or the ms until the first grant made lapses unclaimed (a number); or
--   'blocked' (none granted, the head waits); or false (nobody live was queued). In a set mode the record is left with
--   the new `last` (except on 'self': the caller writes it); otherwise the caller keeps `last` (dead entries consume
--   fences).
local function admit(h, q, s, d, pub, last, self, top, mode, n)
  local granted, now, first = false, nil, last
  local function stop(r)
    if mode and last ~= first then redis.call('SET', h, string.format('%d', last) .. '/' .. mode, 'KEEPTTL') end
    return granted or r, last, mode, n
  end
  while true do
    top = top or redis.call('ZPOPMIN', q)
    if not top[1] then return stop(false) end
    local cid, wid, ms, cms, kind, owner = string.match(top[1], '^([^|]*)|([^|]*)|(%d+)|(%d+)|([^|]*)|(.*)$')
    local cap = cid and tonumber(string.match(kind, '^p(%d+)$'))
    -- Whether this waiter can proceed; nil for a member that is not an entry this library writes (dropped).
    local ok
    if kind == 'x' then
      ok = not mode
    elseif kind == 's' then
      ok = not mode or mode == 's'
    elseif cap then
      ok = (not mode or mode == kind) and n < cap
    end
    if ok == false then
      redis.call('ZADD', q, top[2], top[1])
      return stop('blocked')
    elseif ok and wid == self then
      return 'self', last, mode, n
    elseif ok then
      now = now or now_us()
      local f = next_fence(last, now)
      local fs = string.format('%d', f)
      last = f
      if redis.call(pub, h .. ':w:' .. cid, wid .. ':' .. fs .. ':' .. top[2] .. ':' .. string.format('%d', now)) > 0 then
        local window = math.min(tonumber(cms), tonumber(ms))
        if kind == 'x' then
          -- Unclaimed, it lasts until the claim window or the lease ends, whichever is first.
          redis.call('SET', h, held(f, wid, 1, now + tonumber(cms) * 1000, owner), 'PX', ms)
          return window, last, nil, 0
        end
        local us = now + window * 1000
        put(s, d, owner, f, wid, 1, true, us)
        redis.call('SET', h, fs .. '/' .. kind, 'KEEPTTL')
        first = f
        stretch(h, us)
        stretch(s, us)
        stretch(d, us)
        mode, n = kind, n + 1
        granted = math.min(granted or window, window)
      end
    end
    top = nil
  end
end
