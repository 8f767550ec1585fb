// Every default and fixed time of the client side, in one place (the scripts' own are in lua/). Imports nothing.

/** How long a call without a lease to bound it (forceUnlock, inspect, resume, a fenced write, an election's read) waits for Redis by default, ms. */
export const DEFAULT_CALL_TIMEOUT_MS = 5_000;

/** The least time release() and extend() (and a leader's proclaim) wait for Redis, even when the lease has less left, ms. */
export const MIN_CALL_MS = 250;

/**
 * What a single command may take beyond `waitMs`, so that `waitMs: 0` still gets an answer over a slow link:
 * `acquire` settles by `waitMs` plus this at the latest.
 */
export const ACQUIRE_GRACE_MS = 250;

/**
 * What a call whose bound passed while the process was busy (a GC pause, a synchronous parse) still gets for its
 * reply once the process is back, beyond the time it was late (see bounded()): its command may have gone out only
 * then. A round trip to a Redis that is up, kept short because a timer that merely fires a little late (Deno's
 * often do by 1-2 ms) costs this too, ms.
 */
export const PAUSE_GRACE_MS = 25;

/** How long a waiter queued again unheard waits for a late grant message before it subscribes again, ms. */
export const RELISTEN_AFTER_MS = 50;

/** How long an aborted acquire waits for its undo (normally one fast round trip) before it rejects, ms. */
export const ABORT_CLEANUP_MS = 50;

// How long the grant record (the last fence) outlives a final release, and how long an idle wait queue lives (every
// waiter refreshes it whenever it checks), ms: numbers the scripts share, defined in lua/_constants.lua and
// generated into src/_scripts.ts.
export { FENCE_RETAIN_MS, QUEUE_TTL_MS } from "./_scripts.ts";

/** The key prefix of a lease acquired without `prefix`. */
export const DEFAULT_PREFIX = "redlease";
/** The TTL a watchdog keeps renewing when neither `leaseMs` nor `watchdogMs` is given, ms. */
export const DEFAULT_WATCHDOG_MS = 30_000;
/**
 * The TTL a leader's watchdog keeps renewing when `campaign` gets neither `leaseMs` nor `watchdogMs`, ms: renewed every
 * third of it (2,666 ms), so a leader that dies is replaced within it (8 s), and a leader that cannot renew (paused,
 * partitioned) steps down at its local deadline, 82 ms (the drift margin) before Redis can elect another.
 */
export const DEFAULT_ELECTION_WATCHDOG_MS = 8_000;
/** How long acquire() waits for a held lease by default, ms. */
export const DEFAULT_WAIT_MS = 10_000;
/** How long a waiter handed the lease has to claim it by default, ms. */
export const DEFAULT_CLAIM_MS = 1_000;
/** How long `WAIT` waits for replicas by default, ms. */
export const DEFAULT_REPLICA_TIMEOUT_MS = 1_000;
/** The mean pause between two Redlock attempts by default, ms (each is jittered by ±50%). */
export const DEFAULT_RETRY_DELAY_MS = 100;

/** Redlock's per-node timeout by default for a lease of `ms`: 1/200 of it, from 5 to 50 ms, and no more than `ms`. */
export function defaultNodeTimeoutMs(ms: number): number {
  return Math.min(ms, Math.max(5, Math.min(50, Math.floor(ms / 200))));
}

/**
 * When a call on a held lease (release, extend, a leader's proclaim) stops waiting for Redis, on the
 * performance.now() clock: `timeoutMs` after `now` if given, else at the lease's local `deadline`, but no sooner than
 * MIN_CALL_MS after `now`.
 */
export function heldCallUntil(now: number, deadline: number, timeoutMs: number | undefined): number {
  return now + (timeoutMs ?? Math.max(MIN_CALL_MS, deadline - now));
}
