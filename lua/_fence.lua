-- The fence check of a fenced write (lua/fenced_*.lua): a high-water mark next to the resource holds the highest
-- fence whose write was accepted there, as decimal digits. A lower fence is refused before anything is written; an
-- equal one passes (the reentrant holds of one owner share their fence).
-- @include _constants.lua

-- The mark's fence when it is higher than `fence` (the write must be refused), else nil.
local function stale(mark, fence)
  local v = redis.call('GET', mark)
  if not v then return nil end
  if #v > FENCE_DIGITS or not string.find(v, '^%d+$') then
    error({err = 'ERR redlease: the fence mark holds a value that is not a fence'})
  end
  local high = tonumber(v)
  if tonumber(fence) < high then return high end
  return nil
end

-- Record `fence` in the mark, which outlives the resource by `retain` ms: the resource's TTL plus `retain` when it
-- has one, no TTL when it has none (PERSIST), `retain` when the write left it absent.
local function keep(key, mark, fence, retain)
  local ttl = redis.call('PTTL', key)
  if ttl == -1 then
    redis.call('SET', mark, fence)
    return
  end
  if ttl < 0 then ttl = 0 end
  redis.call('SET', mark, fence, 'PX', ttl + tonumber(retain))
end
