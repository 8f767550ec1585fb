-- The admission of waiters, shared by every script that can free room (inlined where a script says
-- `@include _handoff.lua`, which brings _record.lua and _holders.lua with it).
-- @include _record.lua
-- @include _holders.lua
-- The queue is a sorted set: entry -> server µs when queued. An entry is
--   "<client id>|<attempt id>|<lease ms>[d<lock delay ms>]|<claim ms>|<kind>|<owner>", kind "x" (exclusive), "s"
--   (shared), "p<n>" or "p<n>w<k>" (k of n permits); a lock delay (see _record.lua, _holders.lua) goes with the hold
--   granted.
-- admit(w): grants waiters from the head of the queue, oldest first, while each can proceed: an exclusive waiter when
--   nothing is held (and then it stops), a shared waiter while the lease is free or shared, a permit waiter of weight
--   k while the lease is free or k more of its n permits are free. It stops at the first waiter that cannot proceed
--   (strict FIFO: a waiter of weight k at the head is not passed by lighter ones behind it). A set waiter whose
--   owner holds the lease with another weight is dropped unnotified: its own next check is refused. A blocked head of
--   weight k while permits are free is dropped unnotified when its client has no subscriber (a dead waiter would
--   else block those behind it for as long as the holds last). `w` is the
--   admission, by name (built only where a queue exists: the uncontended paths build no table):
--     w.h, w.q, w.s, w.d  the lease key, its queue, holder set and holder records
--     w.pub   the publish command (PUBLISH or SPUBLISH)
--     w.last  the latest fence; updated (admission and dead entries consume fences)
--     w.mode, w.n  the state, with no exclusive holder: mode nil (free) or the kind of the live holds (no weight),
--             using n permits (holds, each counted by its weight); updated as waiters are admitted (mode nil, n 0
--             after an exclusive grant)
--     w.self  the caller's attempt id, or nil
--     w.top   a ZPOPMIN reply the caller popped already, or nil
--     w.now   the server µs, or nil to read it here
--   and admit sets w.granted: the ms until the first grant made lapses unclaimed, or nil when none was made.
--   An entry whose client has no subscriber (PUBLISH returns 0) is dead and dropped (it consumes a fence), and so is
--   a member that is not an entry. A waiter is told by "<attempt id>:<fence>:<queued µs>:<granted µs>" on its
--   client's channel; its grant is its own unclaimed until its claim window ends (or its lease, if shorter), when it
--   lapses and passes on (a set grant keeps the holder set until its lease would end, so that whoever purges it sees
--   the lapse: see _holders.lua). A set waiter whose owner holds the lease already (another of its requests was
--   admitted) re-enters that hold, with its fence.
--   The caller's own entry (attempt w.self) is not notified: when it can proceed, admission stops with 'self' (its
--   entry removed) and the caller takes the lease. A waiter that cannot proceed is put back, and admission stops.
--   Returns why it stopped: 'self', 'exclusive' (an exclusive waiter was granted the lease), 'blocked' (the head
--   waits) or 'empty' (the queue ran out). In a set mode the lease key is left with the new w.last (except on
--   'self': the caller writes it); otherwise the caller writes w.last.
--   While nothing is held the head can always proceed, so it is popped; while the lease is held in a set mode the
--   head may have to wait, so it is only looked at (ZRANGE) and removed once it proceeds or is dropped: a blocked
--   head then costs one read instead of a pop and a push back.
local function admit(w)
  local h, q, s, d, pub, self = w.h, w.q, w.s, w.d, w.pub, w.self
  local last, mode, n, top, now = w.last, w.mode, w.n, w.top, w.now or now_us()
  local granted, first, peeked = nil, last, false
  -- When the latest live hold expires (read when first needed): the set record lives as long.
  local maxus
  local function stop(r, write)
    if write and mode and last ~= first then
      maxus = maxus or (n > 0 and latest(s) or 0)
      write_set(h, last, mode, maxus)
    end
    w.last, w.mode, w.n, w.granted, w.now = last, mode, n, granted, now
    return r
  end
  while true do
    if not top then
      peeked = mode ~= nil
      if peeked then top = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES') else top = redis.call('ZPOPMIN', q) end
    end
    if not top[1] then return stop('empty', true) end
    local cid, wid, ms, lag, cms, kind, owner =
      string.match(top[1], '^([^|]*)|([^|]*)|(%d+)d?(%d*)|(%d+)|([^|]*)|(.*)$')
    lag = tonumber(lag)
    local cap = cid and tonumber(string.match(kind, '^p(%d+)'))
    local wt = cap and weight_of(kind) or 1
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
    if ok == nil and mf and mk ~= kind and mode_of(mk) == mode_of(kind) then
      -- (Its owner holds the lease with another weight: dropped, see above.)
    elseif ok == false then
    elseif kind == 'x' then
      ok = not mode
    elseif kind == 's' then
      ok = not mode or mode == 's'
    elseif cap then
      ok = (not mode or mode == mode_of(kind)) and (n + wt <= cap or mf ~= nil)
    end
    if ok == false and cap and n < cap and wid ~= self and not mf then
      -- A head of weight k that does not fit while permits are free blocks waiters behind it that would fit: it must
      -- be alive to. One whose client no longer listens (its process died while queued) is dropped, as its grant's
      -- message would be (the waiter of a live client that lost its subscription is queued again when it checks).
      local sub = redis.call('PUBSUB', pub == 'SPUBLISH' and 'SHARDNUMSUB' or 'NUMSUB', h .. ':w:' .. cid)
      if tonumber(sub[2]) == 0 then ok = nil end
    end
    if ok == false then
      if not peeked then
        -- (A head popped by the caller: put back. ZPOPMIN may have emptied, and so deleted, the queue: the key made
        -- again must expire too.)
        redis.call('ZADD', q, top[2], top[1])
        redis.call('PEXPIRE', q, QUEUE_TTL_MS, 'NX')
      end
      return stop('blocked', true)
    end
    if peeked then redis.call('ZREM', q, top[1]) end
    if ok and wid == self then
      return stop('self', false)
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
          write_held(h, f, wid, 1, now + tonumber(cms) * 1000, owner, lag, tonumber(ms) + (lag or 0))
          mode, n = nil, 0
          return stop('exclusive', false)
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
          add_surplus(d, wt - 1)
          n = n + wt
        end
        mode = mode_of(kind)
        -- (Read after this hold was written, the latest includes it.)
        maxus = math.max(maxus or latest(s), us)
        write_set(h, last, mode, maxus)
        first = last
      end
    end
    top = nil
  end
end
