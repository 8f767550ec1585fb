-- acquire: take a free lease, re-enter one this owner holds, or report the holder's remaining time and
-- (for a waiting caller) join the FIFO wait queue.
-- KEYS[1]  lock hash: field "" = "<fence>[:<waiter id granted by handoff>]", field <owner> = hold count
-- KEYS[2]  wait queue (list of "<client id>|<waiter id>|<lease ms>|<owner>")
-- ARGV[1]  owner
-- ARGV[2]  lease ms (the TTL to set)
-- ARGV[3]  waiter id, or "" when the caller does not wait
-- ARGV[4]  queue entry for this waiter ("" when not waiting)
-- ARGV[5]  queue TTL ms (how long an idle queue may live)
-- Returns  fence (> 0) when the caller holds the lease now: fresh, re-entered, or already handed to this waiter;
--          -1 - PTTL when another owner holds it (<= -1; 0 if the hash has no TTL, which redlease never leaves);
--          a waiting caller is then in the queue, appended once.
local h, q = KEYS[1], KEYS[2]
local owner, ms, wid, entry = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local len = redis.call('HLEN', h)
if len < 2 then
  -- Free: no owner field. A lone "" field is the fence record a release leaves behind.
  local last = 0
  if len == 1 then last = tonumber(string.match(redis.call('HGET', h, ''), '^%d+')) end
  local t = redis.call('TIME')
  local f = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if last >= f then f = last + 1 end
  local fs = string.format('%d', f)
  redis.call('HSET', h, '', fs, owner, 1)
  redis.call('PEXPIRE', h, ms)
  if wid ~= '' then redis.call('LREM', q, 1, entry) end
  return f
end
local hv = redis.call('HMGET', h, '', owner)
local fs, granted = string.match(hv[1], '^(%d+):?(.*)$')
if wid ~= '' and granted == wid then
  -- Handed to this waiter while it slept (its message was missed or is still in flight): no second count.
  return tonumber(fs)
end
if hv[2] then
  redis.call('HINCRBY', h, owner, 1)
  redis.call('PEXPIRE', h, ms, 'GT')
  if wid ~= '' then redis.call('LREM', q, 1, entry) end
  return tonumber(fs)
end
if wid ~= '' then
  if not redis.call('LPOS', q, entry) then redis.call('RPUSH', q, entry) end
  redis.call('PEXPIRE', q, ARGV[5])
end
return -1 - redis.call('PTTL', h)
