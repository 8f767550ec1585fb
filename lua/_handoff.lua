-- The admission of waiters, shared by every script that can free room (inlined where a script says
-- `@include _handoff.lua`, which brings _record.lua and _holders.lua with it).
-- @include _record.lua
-- @include _holders.lua
-- The queue is a sorted set: entry -> server µs when queued. An entry is
--   "<client id>|<attempt id>|<lease ms>[d<lock delay ms>]|<claim ms>|<kind>|<owner>", kind "x" (exclusive), "s"
--   (shared) or "p<n>"; a lock delay (see _record.lua, _holders.lua) goes with the hold granted.
-- admit(h, q, s, d, pub, last, self, top, mode, n, now): grants waiters from the head of the queue, oldest first, while
--   each can proceed: an exclusive waiter when nothing is held (and then it stops), a shared waiter while the lease
--   is free or shared, a permit waiter while the lease is free or fewer than its n permits are taken. The caller
--   passes the state with no exclusive holder: `mode` nil (free) or the kind of the live holds, with `n` of them;
--   `last` is the latest fence; `top` a ZPOPMIN reply it popped already, if any; `now` the server µs, if read already. An entry whose client has no
--   subscriber (PUBLISH returns 0) is dead and dropped (it consumes a fence), and so is a member that is not an entry.
--   A waiter is told by "<attempt id>:<fence>:<queued µs>:<granted µs>" on its client's channel; its grant is its own
--   unclaimed until its claim window ends (or its lease, if shorter), when it lapses and passes on (a set grant keeps
--   the holder set until its lease would end, so that whoever purges it sees the lapse: see _holders.lua). A set
--   waiter whose owner holds the lease already (another of its requests was admitted) re-enters that hold, with its
--   fence.
--   The caller's own entry (attempt `self`) is not notified: when it can proceed, admission stops with 'self' (its
--   entry removed) and the caller takes the lease. A waiter that cannot proceed is put back, and admission stops.
--   Returns r, last, mode, n, granted: r is 'self', 'exclusive' (an exclusive waiter was granted the lease),
--   'blocked' (the head waits) or 'empty' (the queue ran out); granted is the ms until the first grant made lapses
--   unclaimed, or false when none was made. In a set mode the lease key is left with the new `last` (except on
--   'self': the caller writes it); otherwise the caller keeps `last` (dead entries consume fences).
--   While nothing is held the head can always proceed, so it is popped; while the lease is held in a set mode the
--   head may have to wait, so it is only looked at (ZRANGE) and removed once it proceeds or is dropped: a blocked
--   head then costs one read instead of a pop and a push back.
local function admit(h, q, s, d, pub, last, self, top, mode, n, now)
  local granted, first, peeked = false, last, false
  now = now or now_us()
  -- When the latest live hold expires (read when first needed): the set record lives as long.
  local maxus
  local function stop(r)
    if mode and last ~= first then
      maxus = maxus or (n > 0 and latest(s) or 0)
      redis.call('SET', h, string.format('%d', last) .. '/' .. mode, 'PXAT', at_ms(maxus))
    end
    return r, last, mode, n, granted
  end
  while true do
    if not top then
      peeked = mode ~= nil
      if peeked then top = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES') else top = redis.call('ZPOPMIN', q) end
    end
    if not top[1] then return stop('empty') end
    local cid, wid, ms, lag, cms, kind, owner =
      string.match(top[1], '^([^|]*)|([^|]*)|(%d+)d?(%d*)|(%d+)|([^|]*)|(.*)$')
    lag = tonumber(lag)
    local cap = cid and tonumber(string.match(kind, '^p(%d+)$'))
    -- Whether this waiter can proceed; nil for a member that is not an entry this library writes (dropped).
    -- The owner's live hold, for a set waiter whose owner holds the lease already: a re-entry takes no new permit.
    local mf, ma, mc, mu, mk, md, ok = nil, nil, nil, nil, nil, nil, nil
    if kind == 's' or cap then
      mf, ma, mc, mu, mk, md = hold_of(d, owner)
      -- (A hold in its lock delay is not its owner's any more, and keeps its place: this waiter waits. The expiry
      -- is read only for an owner with a hold, as before the delay.)
      local exp = mf and tonumber(redis.call('ZSCORE', s, owner)) or 0
      if mf and exp - md * 1000 <= now then
        mf = nil
        if exp > now then ok = false end
      end
    end
    if ok == false then
    elseif kind == 'x' then
      ok = not mode
    elseif kind == 's' then
      ok = not mode or mode == 's'
    elseif cap then
      ok = (not mode or mode == kind) and (n < cap or mf ~= nil)
    end
    if ok == false then
      if not peeked then
        -- (A head popped by the caller: put back. ZPOPMIN may have emptied, and so deleted, the queue: the key made
        -- again must expire too.)
        redis.call('ZADD', q, top[2], top[1])
        redis.call('PEXPIRE', q, 30000, 'NX')
      end
      return stop('blocked')
    end
    if peeked then redis.call('ZREM', q, top[1]) end
    if ok and wid == self then
      return 'self', last, mode, n, granted
    elseif ok then
      local window = math.min(tonumber(cms), tonumber(ms))
      local us = now + window * 1000
      local f = mf or next_fence(last, now)
      local fs = string.format('%d', f)
      if not mf then last = f end
      if redis.call(pub, h .. ':w:' .. cid, wid .. ':' .. fs .. ':' .. top[2] .. ':' .. string.format('%d', now)) > 0 then
        granted = math.min(granted or window, window)
        if kind == 'x' then
          -- Unclaimed, it lasts until the claim window or the lease ends, whichever is first.
          redis.call('SET', h, held(f, wid, 1, now + tonumber(cms) * 1000, owner, lag), 'PX', tonumber(ms) + (lag or 0))
          return 'exclusive', last, nil, 0, granted
        end
        if mf then
          -- A re-entry: one more hold, its expiry never shortened; it keeps the attempt of a grant still unclaimed.
          -- (It keeps the lock delay its hold was granted with.)
          us = math.max(us + md * 1000, tonumber(redis.call('ZSCORE', s, owner)))
          put(s, d, owner, f, mu and ma or wid, mc + 1, mu, us, kind, false, nil, md)
        else
          -- (s and d outlive its claim window until its lease would end: a lapse is told when purged. With a lock
          -- delay, its place is kept that much longer: see _holders.lua.)
          local lus = (lag or 0) * 1000
          us = us + lus
          put(s, d, owner, f, wid, 1, true, us, kind, n == 0, now + tonumber(ms) * 1000 + lus, lag)
          n = n + 1
        end
        mode = kind
        -- (Read after this hold was written, the latest includes it.)
        maxus = math.max(maxus or latest(s), us)
        redis.call('SET', h, string.format('%d', last) .. '/' .. kind, 'PXAT', at_ms(maxus))
        first = last
      end
    end
    top = nil
  end
end
