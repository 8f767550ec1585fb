-- inspect: a consistent snapshot of one lease.
-- KEYS[1]  lock hash
-- KEYS[2]  wait queue
-- Returns  { fence, pttl, waiters, owner1, count1, owner2, count2, ... }
--          fence 0 when no record exists; pttl -2 when the hash does not exist; waiters = queue length
--          (entries of waiters that died are counted until a handoff skips them).
local h = KEYS[1]
local all = redis.call('HGETALL', h)
local out = { 0, redis.call('PTTL', h), redis.call('ZCARD', KEYS[2]) }
for i = 1, #all, 2 do
  if all[i] == '' then
    out[1] = tonumber(string.match(all[i + 1], '^%d+'))
  else
    out[#out + 1] = all[i]
    out[#out + 1] = tonumber(all[i + 1])
  end
end
return out
