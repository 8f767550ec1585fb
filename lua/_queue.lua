-- The reply to a caller that cannot have the lease now (inlined where a script says `@include _queue.lua`).
-- busy(q, entry, at, ttl, retry): try again in `retry` ms. A caller that does not wait (`entry` "") is told
--   -1 - retry; a waiting one joins the queue q with its entry (see _handoff.lua) scored `at` (server µs as digits),
--   or stays in it with its first score, and the queue's TTL is reset to `ttl` ms; it is told
--   { -1 - retry, µs when it was queued, 1 if this call queued it else 0 }.
local function busy(q, entry, at, ttl, retry)
  local r = -1 - retry
  if entry == '' then return r end
  local tq, created = at, redis.call('ZADD', q, 'NX', at, entry)
  if created == 0 then tq = redis.call('ZSCORE', q, entry) end
  redis.call('PEXPIRE', q, ttl)
  return { r, tq, created }
end
