-- The protocol's numbers that TypeScript uses too (inlined where a script says `@include _constants.lua`). This
-- file is their source of truth: scripts/gen_lua.ts exports each `local NAME = <integer>` below from
-- src/_scripts.ts, with the comment above it as its documentation, and its `--check` fails when another Lua file
-- spells one of these numbers out instead of naming it.

-- An idle wait queue expires after this long, ms; every waiter refreshes it whenever it checks.
local QUEUE_TTL_MS = 30000
-- How long the grant record (the last fence) outlives a final release, ms (release.lua and force_unlock.lua are
-- passed it).
local FENCE_RETAIN_MS = 10000
-- The most decimal digits a fence has (microseconds since 1970 until the year 2286): a longer value is no fence.
local FENCE_DIGITS = 16
