-- inspect: a consistent snapshot of one lease.
-- KEYS[1]  lease key
-- KEYS[2]  wait queue
-- KEYS[3]  the holder set, and KEYS[4] its records (see _holders.lua)
-- Returns  { fence, pttl, waiters, mode, then per holder: owner, holds, kind, ms left, lock delay ms }
--          fence 0 when no record exists; pttl -2 when the key does not exist; waiters = queue length
--          (entries of waiters that died are counted until a handoff skips them); mode "x" (exclusive or free),
--          "s" (shared) or "p<n>" (n permits); kind "x" for the exclusive holder, else the kind of a set hold
--          ("p<n>w<k>" for a hold of k permits).
--          Expired set holds are not listed (they are dropped by the next script that changes the lease). A hold
--          with a lock delay (see _record.lua) is listed until its delay ends: its ms left (of the hold, for its
--          owner) is then <= 0, and ms left + lock delay is what is left of the delay.
-- ARGV[1]  for a watcher (see src/watch.ts): ms to keep the lease's watch key "<lease key>:n" at least (made, or its
--          time lengthened), else omitted. While that key lives, the scripts that grant and release (acquire,
--          acquire_set, acquire_all, release, release_set) publish a message ("g" granted, "r<owner>" released) on
--          the channel of the same name: they count the key in an EXISTS they make anyway, so an unwatched lease
--          costs no command more. They publish with redis.pcall: a user who may not publish there (plain leases need
--          no channel) takes and releases as before, and the watcher reads the change later. (force_unlock tells
--          on "<lease key>:o", which it publishes on anyway: a watcher listens there too. What no script tells — a
--          waiter joining or leaving the queue, an extension, the release of a downgrade's shared hold while its
--          owner holds the lease exclusively — the watcher finds from keyspace notifications, where the server
--          sends them, or at its heartbeat: see docs/watch.md.)
-- @include _record.lua
-- @include _holders.lua
local h, s, d = KEYS[1], KEYS[3], KEYS[4]
-- (Only ever lengthened: watchers of one lease may keep it for different times, and a watcher that reads often must
-- not cut the time a slower one counts on. PEXPIRE ... GT is 0 for a key that is not there: then it is made.)
if ARGV[1] and redis.call('PEXPIRE', h .. ':n', ARGV[1], 'GT') == 0 then
  redis.call('SET', h .. ':n', '1', 'PX', ARGV[1], 'NX')
end
local fence, _, c, _, owner, _m, dly = record(redis.call('GET', h))
local pttl = redis.call('PTTL', h)
local now = now_us()
-- How it is held: exclusive while an exclusive holder lives (its owner may hold shared holds too: a downgrade), else
-- the kind of the live set holds (expired ones are not listed: the next script that changes the lease drops them).
local first = redis.call('ZRANGEBYSCORE', s, '(' .. string.format('%d', now), '+inf', 'LIMIT', 0, 1)
local mode = 'x'
if first[1] and not owner then
  local _f, _a, _c, _u, k = hold_of(d, first[1])
  mode = k and mode_of(k) or 'x'
end
local out = { fence, pttl, redis.call('ZCARD', KEYS[2]), mode }
if owner then
  table.insert(out, owner)
  table.insert(out, c)
  table.insert(out, 'x')
  table.insert(out, pttl - (dly or 0))
  table.insert(out, dly or 0)
end
local holders = redis.call('ZRANGEBYSCORE', s, '(' .. string.format('%d', now), '+inf', 'WITHSCORES')
for i = 1, #holders, 2 do
  local _f, _a, hc, _u, hk, hd = hold_of(d, holders[i])
  if hc then
    table.insert(out, holders[i])
    table.insert(out, hc)
    table.insert(out, hk)
    table.insert(out, math.floor((tonumber(holders[i + 1]) - now) / 1000) - hd)
    table.insert(out, hd)
  end
end
return out
