-- inspect: a consistent snapshot of one lease.
-- KEYS[1]  lease key
-- KEYS[2]  wait queue
-- Returns  { fence, pttl, waiters, owner, holds } (no owner and holds when free)
--          fence 0 when no record exists; pttl -2 when the key does not exist; waiters = queue length
--          (entries of waiters that died are counted until a handoff skips them).
-- @include _record.lua
local h = KEYS[1]
local fence, _, c, _, owner = record(redis.call('GET', h))
local out = { fence, redis.call('PTTL', h), redis.call('ZCARD', KEYS[2]) }
if owner then
  out[4] = owner
  out[5] = c
end
return out
