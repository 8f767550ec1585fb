import { acquireResolved, ownerOf } from "./_acquire.ts";
import { checkClient, type RedisLike, stateOf } from "./_client.ts";
import { ACQUIRE_GRACE_MS, DEFAULT_CALL_TIMEOUT_MS } from "./_defaults.ts";
import { emit } from "./_log.ts";
import { drift, grant, type LeaseImpl, releaseHandle } from "./_hold.ts";
import { asUnavailable, extendCall, holdId, keysOf, parseToken, type TokenHold } from "./_protocol.ts";
import type { Resolved } from "./_types.ts";
import { checkCallOptions, fail, resolveAcquire } from "./_validate.ts";
import { LeaseLostError, LockTimeoutError, ReplicationError } from "./errors.ts";
import type { AcquireOptions, CallOptions, Lease } from "./lease.ts";
import type { LeaseEventHandler } from "./events.ts";

/** Options of {@linkcode resume}: how the new process keeps the hold, and how long to wait for Redis. */
export interface ResumeOptions
  extends Pick<AcquireOptions, "leaseMs" | "watchdogMs" | "signal" | "replicas" | "replicaTimeoutMs">, CallOptions {}

/** The keys of ResumeOptions. */
const RESUME_KEYS = ["leaseMs", "watchdogMs", "signal", "replicas", "replicaTimeoutMs", "timeoutMs"];

/**
 * Take over a hold that another process acquired, from its `lease.token`: returns a handle on the same hold (the
 * same owner and fence, not a new acquisition), now renewed by this process, in watchdog mode unless `leaseMs` is
 * given. One round trip: it renews the hold (only ever lengthening its TTL) if, and only if, that owner still holds
 * it with that fence. Releasing the handle releases the hold, as the acquiring process would have.
 *
 * The hold is shared, not copied: while the acquiring process keeps its own handle, both renew the same hold, and
 * whichever releases first releases it (the other's next renewal then finds it gone, and its signal aborts). So the
 * process that hands a lease over passes the token and leaves the lease alone; it does not release it.
 *
 * Within the client that holds it already, `resume` re-enters the hold instead (one more hold, as `acquire` with
 * `owner: lease` does), so that every handle there is released once.
 *
 * @param client A connected node-redis client (v4 or v5: standalone, cluster or sentinel) or a {@linkcode Driver}:
 *   a client of the Redis the lease is on. Not a Redlock group: a Redlock lease has no token.
 * @param token A `lease.token`.
 * @param options See {@linkcode ResumeOptions}; `timeoutMs` bounds the call (default 5000).
 * @returns The held {@linkcode Lease}, with the token's name, owner and fence.
 * @throws {LeaseLostError} with `why` "not-held" when that owner no longer holds the lease with that fence
 *   (released, expired, force-unlocked, or taken by another owner since).
 * @throws {TypeError | RangeError} for a string that is not a lease token or invalid options, before any Redis
 *   command.
 * @throws {RedisTimeoutError} when Redis did not answer within `timeoutMs` (its `cause`: the Redis client's last
 *   error, if any), {@linkcode RedisUnavailableError} when it could not be reached; `signal.reason` when `signal`
 *   aborts first.
 * @throws {ReplicationError} with `replicas`, when too few replicas acknowledged the renewal.
 *
 * @example An HTTP handler acquires; a job worker finishes the job under the same lease
 * ```ts
 * import { acquire, release, resume } from "redlease";
 *
 * // in the handler (its process may exit: the worker takes the lease over before its TTL runs out)
 * const lease = await acquire(client, `export:${id}`, { waitMs: 0 });
 * await jobs.push({ id, token: lease.token });
 *
 * // in the worker
 * const job = await jobs.pop();
 * const held = await resume(client, job.token);
 * try {
 *   await runExport(job.id, { fence: held.fence, signal: held.signal });
 * } finally {
 *   await release(held);
 * }
 * ```
 */
export function resume(client: RedisLike, token: string, options?: ResumeOptions): Promise<Lease> {
  try {
    checkClient("resume lease", client);
    const held = parseToken(token);
    if (!held) fail("resume lease", "token", "must be a lease.token", token);
    const timeoutMs = checkCallOptions("resume lease", options, RESUME_KEYS) ?? DEFAULT_CALL_TIMEOUT_MS;
    const given = options ?? {};
    const opts = resolveAcquire("resume lease", held.name, {
      leaseMs: given.leaseMs,
      watchdogMs: given.watchdogMs,
      signal: given.signal,
      replicas: given.replicas,
      replicaTimeoutMs: given.replicaTimeoutMs,
      waitMs: 0,
    }, ownerOf);
    return resumeResolved(client, { ...opts, owner: held.owner, exactOwner: true, kind: held.kind }, held, timeoutMs);
  } catch (e) {
    return Promise.reject(e);
  }
}

async function resumeResolved(
  client: RedisLike,
  opts: Resolved,
  held: TokenHold,
  timeoutMs: number,
): Promise<LeaseImpl> {
  const state = stateOf(client);
  const mine = state.holds.get(holdId(held.keys, held.owner, held.kind));
  if (mine?.active && mine.fence === held.fence) return await reenter(client, opts, held);
  const t0 = performance.now();
  const bound = { until: t0 + Math.max(timeoutMs, ACQUIRE_GRACE_MS), signal: opts.signal, name: opts.name };
  let renewed: boolean | { fence: number };
  try {
    const args = { kind: held.kind, owner: held.owner, ms: opts.ms, fence: held.fenceText };
    renewed = await extendCall(state, held.keys, args, bound);
  } catch (e) {
    if (opts.signal?.aborted) throw opts.signal.reason;
    throw asUnavailable(e, opts.name, state.lastError());
  }
  if (renewed !== true) throw new LeaseLostError(opts.name, "not-held");
  const { kind, keys, owner, fence, fenceText } = held;
  const lease = grant(state, {
    kind,
    keys,
    name: opts.name,
    owner,
    fence,
    fenceText,
    deadline: t0 + opts.ms - drift(opts.ms),
  }, opts);
  // The reply came after the TTL it set ran out: the hold may be gone by now (this process never had it).
  if (!lease) throw new LeaseLostError(opts.name, "expired");
  if (opts.replicas > 0) {
    let acked: number;
    try {
      acked = await state.waitReplicas(keys.hash, opts.replicas, opts.replicaTimeoutMs, bound);
    } catch (e) {
      lease.hold.drop(lease); // without releasing it: the hold is the other process's too
      throw e;
    }
    if (acked < opts.replicas) {
      lease.hold.drop(lease);
      throw new ReplicationError(opts.name, acked, opts.replicas);
    }
  }
  const ev = state.events;
  if (ev) tellResumed(ev, lease, t0);
  return lease;
}

/**
 * Resume a hold that this client holds already: re-enter it (one more hold in Redis) rather than hand out a second
 * handle on one hold. Redis may have dropped the hold without this client knowing yet: a re-entry that finds it
 * gone (busy, or a new grant with another fence) is not this hold, so it is given back and the hold reported lost.
 */
async function reenter(client: RedisLike, opts: Resolved, held: TokenHold): Promise<LeaseImpl> {
  const prefix = held.keys.hash.slice(0, held.keys.hash.length - keysOf("", opts.name).hash.length);
  const again = await acquireResolved(client, { ...opts, prefix, waitMs: 0 }).catch((e: unknown) => {
    throw e instanceof LockTimeoutError ? new LeaseLostError(opts.name, "not-held") : e;
  });
  if (again.fence === held.fence) return again;
  await releaseHandle(again).catch(() => {});
  throw new LeaseLostError(opts.name, "not-held");
}

/** Tell `handler` that `lease` was resumed at `t0`, unless it was told of its hold already. */
function tellResumed(handler: LeaseEventHandler, lease: LeaseImpl, t0: number): void {
  const hold = lease.hold;
  // A hold told of already (a concurrent resume of the same token joined it): its start is not told twice.
  if (hold.tell(handler, lease, t0)) return;
  emit(handler, { type: "resumed", ...hold.event() });
  // Lost while replicas were awaited: its end is told now, once.
  if (hold.lost) hold.tellLost(handler);
}
