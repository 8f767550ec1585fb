-- force_unlock: remove every hold of every owner (an operator's tool), keep the fence, and hand the lease to the
-- first live waiter.
-- KEYS[1]  lease key
-- KEYS[2]  wait queue
-- ARGV[1]  how long the grant record outlives the unlock, ms
-- ARGV[2]  publish command: PUBLISH or SPUBLISH
-- Returns  0 when the lease was not held, 1 when it was freed, 2 when it was freed and handed to a waiter.
-- @include _record.lua
-- @include _handoff.lua
local h, q = KEYS[1], KEYS[2]
local fence, _, _, _, owner = record(redis.call('GET', h))
if not owner then return 0 end
local r, last = handoff(h, q, ARGV[2], fence, nil)
if r then return 2 end
redis.call('SET', h, string.format('%d', last), 'PX', ARGV[1])
return 1
