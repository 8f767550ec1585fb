-- acquire: take a free lease, re-enter one this owner holds, claim one handed to this attempt, or report the
-- holder's remaining time and (for a waiting caller) join the FIFO wait queue. A free lease goes to the head of
-- the live queue before any newcomer (FIFO across expiry), and a handed-over grant that its waiter did not claim
-- within its claim window is taken back and passed on.
-- KEYS[1]  lock hash: field "" = grant record (see _handoff.lua), field <owner> = hold count
-- KEYS[2]  wait queue: sorted set of "<client id>|<attempt id>|<lease ms>|<claim ms>|<owner>" -> µs when queued
-- ARGV[1]  owner
-- ARGV[2]  lease ms (the TTL to set)
-- ARGV[3]  attempt id (unique per acquire call)
-- ARGV[4]  queue entry for this waiter, or "" when the caller does not wait
-- ARGV[5]  queue TTL ms (how long an idle queue may live)
-- ARGV[6]  publish command: PUBLISH or SPUBLISH
-- Returns  fence (> 0) when the caller holds the lease now: fresh, re-entered, or handed to this attempt
--          (which this call claims);
--          otherwise -1 - the ms after which to try again (the holder's PTTL, or what is left of an unclaimed
--          grant's claim window); for a waiting caller { that number, µs when it was queued, 1 if this call
--          queued it else 0 }.
-- @include _handoff.lua
local h, q = KEYS[1], KEYS[2]
local owner, ms, aid, entry, pub = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[6]

local function busy(retry)
  local r = -1 - retry
  if entry == '' then return r end
  local tq = redis.call('ZSCORE', q, entry)
  local created = 0
  if not tq then
    tq = now_us()
    redis.call('ZADD', q, tq, entry)
    created = 1
  end
  redis.call('PEXPIRE', q, ARGV[5])
  return { r, tonumber(tq), created }
end

-- The lease has no owner: the head of the live queue goes first, then the caller.
local function take_free(last)
  if redis.call('EXISTS', q) == 1 then
    local r = handoff(h, q, pub, last, aid)
    if type(r) == 'number' then return busy(r) end
    if r == 'self' then entry = '' end
  end
  local f = next_fence(last, now_us())
  redis.call('HSET', h, '', string.format('%d:%s', f, aid), owner, 1)
  redis.call('PEXPIRE', h, ms)
  if entry ~= '' then redis.call('ZREM', q, entry) end
  return f
end

local len = redis.call('HLEN', h)
if len < 2 then
  -- Free: no owner field. A lone "" field is the record a release leaves behind.
  local last = 0
  if len == 1 then last = record(redis.call('HGET', h, '')) end
  return take_free(last)
end
local hv = redis.call('HMGET', h, '', owner)
local fence, gid, by, gowner = record(hv[1])
if gid == aid and hv[2] then
  -- This attempt holds it already (a retry, or a handoff whose message crossed this call): claim it.
  if by then
    redis.call('HSET', h, '', string.format('%d:%s', fence, aid))
    redis.call('PEXPIRE', h, ms)
  end
  if entry ~= '' then redis.call('ZREM', q, entry) end
  return fence
end
if by then
  local now = now_us()
  if now > by then
    -- Handed over but never claimed (its waiter is dead, partitioned or deaf): take it back, pass it on.
    if redis.call('HINCRBY', h, gowner, -1) <= 0 then redis.call('HDEL', h, gowner) end
    redis.call('HSET', h, '', string.format('%d', fence))
    if redis.call('HLEN', h) < 2 then return take_free(fence) end
    hv = redis.call('HMGET', h, '', owner)
    by = nil
  elseif not hv[2] then
    return busy(math.min(redis.call('PTTL', h), math.floor((by - now) / 1000) + 1))
  end
end
if hv[2] then
  redis.call('HINCRBY', h, owner, 1)
  redis.call('PEXPIRE', h, ms, 'GT')
  -- Record this attempt, for its undo. If the owner's hold is a grant still to be claimed by its waiter, the
  -- owner is evidently alive: that claims it, and the record keeps the waiter's attempt id so that its own
  -- re-check still finds its grant (holds are counted per owner, so a claim window on a shared count could
  -- otherwise take back another attempt's hold).
  redis.call('HSET', h, '', string.format('%d:%s', fence, by and gid or aid))
  if entry ~= '' then redis.call('ZREM', q, entry) end
  return fence
end
return busy(redis.call('PTTL', h))
