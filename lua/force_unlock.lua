-- force_unlock: remove every hold of every owner (an operator's tool), keep the grant record's fence, and hand
-- the lease to the first live waiter.
-- KEYS[1]  lock hash
-- KEYS[2]  wait queue
-- ARGV[1]  how long the grant record outlives the unlock, ms
-- ARGV[2]  publish command: PUBLISH or SPUBLISH
-- Returns  0 when the lease was not held, 1 when it was freed, 2 when it was freed and handed to a waiter.
-- @include _handoff.lua
local h, q = KEYS[1], KEYS[2]
if redis.call('HLEN', h) < 2 then return 0 end
local last = record(redis.call('HGET', h, ''))
redis.call('DEL', h)
redis.call('HSET', h, '', string.format('%d', last))
if handoff(h, q, ARGV[2], last, nil) then return 2 end
redis.call('PEXPIRE', h, ARGV[1])
return 1
