import { acquireResolved, ownerOf } from "./_acquire.ts";
import { checkClient, type RedisLike, stateOf } from "./_client.ts";
import { releaseHandle } from "./_hold.ts";
import { isExclusive, keysOf, proclaimCall } from "./_protocol.ts";
import { ACQUIRE_KEYS, checkKeys, checkValue, fail, resolveAcquire } from "./_validate.ts";
import { LockTimeoutError } from "./errors.ts";
import type { AcquireOptions, Lease } from "./lease.ts";
import { DEFAULT_CALL_TIMEOUT_MS, DEFAULT_ELECTION_WATCHDOG_MS } from "./_defaults.ts";

/** Options of {@linkcode campaign}: those of `acquire` (an exclusive lease), a value to proclaim at once. */
export interface CampaignOptions extends Omit<AcquireOptions, "shared" | "permits" | "weight"> {
  /**
   * Proclaimed as soon as this candidate is elected (see {@linkcode proclaim}): observers see the new leader and its
   * value in one change. A string of at most 65536 characters.
   * @default {undefined}
   * @example
   * ```ts
   * const leadership = await campaign(client, "scheduler", { value: `http://${host}:8080` });
   * ```
   */
  readonly value?: string;
  /**
   * How long to campaign before giving up with {@linkcode LockTimeoutError}.
   * @default {Infinity: until elected, or until `signal` aborts}
   */
  readonly waitMs?: number;
  /**
   * Watchdog mode (no `leaseMs`): the leadership's TTL, renewed every third of it while it leads. Shorter than a
   * lock's (30 s) so that elections fail over in seconds: a leader that dies (SIGKILL, a lost host) is replaced within
   * this time, and one that cannot renew for about two thirds of it (a pause, a partition) loses the leadership, its
   * `signal` aborting before another candidate can be elected. Integer from 30 to 2147483647.
   * @default {8000 (renewed every 2.7 s)}
   * @example A leader whose pauses may last longer: slower failover, fewer lost terms
   * ```ts
   * const leadership = await campaign(client, "compactor", { watchdogMs: 30_000 });
   * ```
   */
  readonly watchdogMs?: number;
}

/** The keys of CampaignOptions (`shared`, `permits` and `weight` too: refused with a message of their own). */
const CAMPAIGN_KEYS = [...ACQUIRE_KEYS, "value"];

/**
 * Campaign to lead the election `name`: resolves once this candidate is elected, with a leadership lease whose
 * `fence` is the term (strictly greater than every earlier term of this election). Candidates wait first come,
 * first served, and the leader's resignation (`release`) or death (its lease's TTL) hands leadership to the next
 * live candidate. The leadership is an exclusive lease like any other — fenced, renewed by its watchdog (or a fixed
 * lease), its `signal` aborting the moment it is lost — so there are never two leaders with live terms. Its watchdog
 * TTL is 8 s by default (not a lock's 30 s): a leader that dies is replaced within 8 s.
 *
 * Observers ({@linkcode observe}) are told of every new term, value and resignation.
 *
 * @param client A connected node-redis client or a {@linkcode Driver} (not a Redlock group).
 * @param name The election's name (a lease name: do not use it for a lock as well).
 * @param options See {@linkcode CampaignOptions}; `waitMs` defaults to `Infinity`, `watchdogMs` to 8000.
 * @returns The leadership {@linkcode Lease}; resign with `release(lease)`.
 * @throws as {@linkcode acquire}; and a Redis error from proclaiming `value` (the leadership is released first).
 *
 * @example A singleton scheduler: one process at a time runs the jobs, fenced by its term
 * ```ts
 * import { campaign, release } from "redlease";
 * const leadership = await campaign(client, "scheduler");
 * try {
 *   await runScheduler({ term: leadership.fence, signal: leadership.signal });
 * } finally {
 *   await release(leadership); // resign: the next candidate is elected at once
 * }
 * ```
 */
export async function campaign(client: RedisLike, name: string, options?: CampaignOptions): Promise<Lease> {
  const op = "campaign";
  checkClient(op, client);
  if (typeof options === "object" && options !== null) checkKeys(op, options, CAMPAIGN_KEYS);
  const { value, ...rest } = options ?? {};
  if (value !== undefined) checkValue(op, value);
  // An election's own default watchdog TTL, unless a fixed lease (or another TTL) is asked for.
  const watchdogMs = rest.leaseMs === undefined ? rest.watchdogMs ?? DEFAULT_ELECTION_WATCHDOG_MS : rest.watchdogMs;
  // (`waitMs: undefined` is no waitMs: Infinity, not acquire's default.)
  let opts = resolveAcquire(op, name, { ...rest, waitMs: rest.waitMs ?? Infinity, watchdogMs }, ownerOf);
  if (!isExclusive(opts.kind)) fail(op, "options", "cannot ask for a shared lease or permits", options);
  opts = { ...opts, leader: true };
  const state = stateOf(client);
  const keys = keysOf(opts.prefix, name);
  const until = performance.now() + opts.waitMs;
  for (;;) {
    const lease = await acquireResolved(client, opts);
    const hold = lease.hold;
    // Observers hear of the end of this term (resigned or lost) from this process too; a release waits for it.
    hold.addEndHook(() =>
      proclaimCall(state, keys, {}, { until: performance.now() + DEFAULT_CALL_TIMEOUT_MS, name }).catch(() => {})
    );
    // Elected: the signal no longer applies (as for acquire, it cancels the wait, not a held lease).
    let proclaimed: boolean;
    try {
      proclaimed = await proclaimCall(state, keys, { owner: hold.owner, term: hold.fenceText, value }, {
        until: performance.now() + DEFAULT_CALL_TIMEOUT_MS,
        name,
      });
    } catch (e) {
      if (value !== undefined) {
        await releaseHandle(lease).catch(() => {});
        throw e;
      }
      // Only the announcement failed: observers still learn of the term when they next read (their timers).
      return lease;
    }
    if (proclaimed) return lease;
    // Lost between the grant and the proclamation (expired, force-unlocked): not elected after all. Campaign on.
    hold.lose("not-held");
    const left = until - performance.now();
    if (left <= 0) throw new LockTimeoutError(name, -1, opts.waitMs);
    opts.signal?.throwIfAborted();
    opts = { ...opts, waitMs: left === Infinity ? Infinity : Math.ceil(left) };
  }
}
