-- fenced_eval: the caller's own script under the fence check (src/fenced_eval.ts). src/_fence.ts puts the caller's
-- script before this text as `local function body(KEYS, ARGV) … end`, so the script sees its own KEYS and ARGV
-- (the locals shadow the globals), and hashes the whole with Web Crypto: it has no build-time SHA1 of its own.
-- KEYS[1…n]  the caller's keys; KEYS[1] is the guarded resource
-- KEYS[n+1]  the fence mark of KEYS[1] (see _fence.lua)
-- ARGV[1…m]  the caller's arguments
-- ARGV[m+1]  the writer's fence
-- ARGV[m+2]  how long the mark outlives the resource, ms
-- Returns  {0, highest fence} refused; {1, the script's reply} run (an error reply it returns is returned as is)
-- @include _fence.lua
local n, m = #KEYS - 1, #ARGV - 2
local mark, fence, retain = KEYS[n + 1], ARGV[m + 1], ARGV[m + 2]
local high = stale(mark, fence)
if high then return {0, high} end
-- Recorded before the script runs too: a script that raises an error after writing leaves its writes (Redis does
-- not roll a script back), and a lower fence must not overwrite them.
keep(KEYS[1], mark, fence, retain)
local r = body({unpack(KEYS, 1, n)}, {unpack(ARGV, 1, m)})
keep(KEYS[1], mark, fence, retain)
if type(r) == 'table' and r.err then return r end
return {1, r}
