-- acquire_all: take several leases exclusively in one step if every one of them is free (no holder, nobody queued,
-- no shared holds or permits) or held by this owner (a re-entry), else take none: the uncontended path of a lease
-- over several names, for names on one server (standalone or Sentinel). Otherwise the caller takes them one by one
-- in name order.
-- KEYS     per name, in the caller's order: lease key, wait queue, holder set, holder records (4 keys each)
-- ARGV[1]  owner
-- ARGV[2]  lease ms
-- ARGV[3]  attempt id
-- ARGV[4]  lock delay ms (> 0) of the new holds, or omitted for none (see _record.lua)
-- Returns  { fence, ... } (one per name, in order) when all were taken; else the 1-based index of the first name
--          that is not free.
-- @include _record.lua
local owner, ms, aid, lag = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local lasts, counts, lags, watched = {}, {}, {}, {}
local now = now_us()
-- Live holds only: a grant handed over and never claimed keeps its holder set until its lease would end.
local live = '(' .. string.format('%d', now)
for i = 1, #KEYS, 4 do
  local fence, _, c, by, gowner, mode, dly = record(redis.call('GET', KEYS[i]))
  -- (A hold of this owner in its lock delay is not its own any more: see _record.lua.)
  local mine = gowner == owner and not by and alive(KEYS[i], dly)
  if (gowner and not mine) or mode then return (i + 3) / 4 end
  -- Watched (see inspect.lua), the watch key counts 2 in the EXISTS of the queue (an odd count), and the grant is
  -- told on it.
  local wk = KEYS[i] .. ':n'
  local x = redis.call('EXISTS', KEYS[i + 1], wk, wk)
  if x % 2 == 1 or redis.call('ZCOUNT', KEYS[i + 2], live, '+inf') > 0 then return (i + 3) / 4 end
  watched[#lasts + 1] = x >= 2 and wk
  lasts[#lasts + 1] = fence
  counts[#counts + 1] = mine and c or 0
  lags[#lags + 1] = dly or false
end
local fences = {}
for j, last in ipairs(lasts) do
  local h = KEYS[j * 4 - 3]
  if counts[j] > 0 then
    -- A re-entry: one more hold, same fence, the TTL only lengthened (it keeps the hold's lock delay).
    local dly = lags[j] or nil
    write_held(h, last, aid, counts[j] + 1, nil, owner, dly)
    redis.call('PEXPIRE', h, tonumber(ms) + (dly or 0), 'GT')
    fences[j] = last
  else
    fences[j] = next_fence(last, now)
    write_held(h, fences[j], aid, 1, nil, owner, lag, tonumber(ms) + (lag or 0))
  end
  if watched[j] then redis.pcall('PUBLISH', watched[j], 'g') end
end
return fences
