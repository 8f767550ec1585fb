-- force_unlock: remove every hold of every owner (an operator's tool), keep the fence, and hand the lease to the
-- first live waiter. Holds in their lock delay (see _record.lua) are removed too: the operator's word ends a delay.
-- KEYS[1]  lease key
-- KEYS[2]  wait queue
-- KEYS[3]  the holder set, and KEYS[4] its records: every shared hold and permit is removed as well
-- ARGV[1]  how long the grant record outlives the unlock, ms
-- ARGV[2]  publish command: PUBLISH or SPUBLISH
-- Returns  0 when the lease was not held, 1 when it was freed, 2 when it was freed and handed to a waiter. Tells
--          observers of an election on this name (lua/proclaim.lua) when it was held.
-- @include _handoff.lua
local h, q, s, d = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local fence, _, _, _, owner = record(redis.call('GET', h))
local n = purge(s, d, now_us())
if not owner and n == 0 then return 0 end
redis.call('DEL', s, d)
-- Observers of an election on this name (see proclaim.lua) read its state again.
redis.call(ARGV[2], h .. ':o', string.format('%d', fence))
local w = { h = h, q = q, s = s, d = d, pub = ARGV[2], last = fence, n = 0 }
admit(w)
if w.granted then return 2 end
write_free(h, w.last, ARGV[1])
return 1
