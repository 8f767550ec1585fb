-- acquire_all: take several leases exclusively in one step if every one of them is free (no holder, nobody queued,
-- no shared holds or permits) or held by this owner (a re-entry), else take none: the uncontended path of a lease
-- over several names, for names on one server (standalone or Sentinel). Otherwise the caller takes them one by one
-- in name order.
-- KEYS     per name, in the caller's order: lease key, wait queue, holder set, holder records (4 keys each)
-- ARGV[1]  owner
-- ARGV[2]  lease ms
-- ARGV[3]  attempt id
-- Returns  { fence, ... } (one per name, in order) when all were taken; else the 1-based index of the first name
--          that is not free.
-- @include _record.lua
local owner, ms, aid = ARGV[1], ARGV[2], ARGV[3]
local lasts, counts = {}, {}
local now = now_us()
-- Live holds only: a grant handed over and never claimed keeps its holder set until its lease would end.
local live = '(' .. string.format('%d', now)
for i = 1, #KEYS, 4 do
  local fence, _, c, by, gowner, mode = record(redis.call('GET', KEYS[i]))
  local mine = gowner == owner and not by
  if (gowner and not mine) or mode or redis.call('EXISTS', KEYS[i + 1]) > 0 or
    redis.call('ZCOUNT', KEYS[i + 2], live, '+inf') > 0 then return (i + 3) / 4 end
  lasts[#lasts + 1] = fence
  counts[#counts + 1] = mine and c or 0
end
local fences = {}
for j, last in ipairs(lasts) do
  local h = KEYS[j * 4 - 3]
  if counts[j] > 0 then
    -- A re-entry: one more hold, same fence, the TTL only lengthened.
    redis.call('SET', h, held(last, aid, counts[j] + 1, nil, owner), 'KEEPTTL')
    redis.call('PEXPIRE', h, ms, 'GT')
    fences[j] = last
  else
    fences[j] = next_fence(last, now)
    redis.call('SET', h, held(fences[j], aid, 1, nil, owner), 'PX', ms)
  end
end
return fences
