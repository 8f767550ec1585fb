import { heldCallUntil } from "./_defaults.ts";
import { checkCallOptions, checkLeaseMs } from "./_validate.ts";
import type { CallOptions, Lease } from "./lease.ts";
import { checkLease } from "./_acquire.ts";
import { LeaseGroup } from "./_group.ts";

/**
 * Reset a held lease's TTL to `leaseMs`, if this owner still holds it. Affects every reentrant hold of the same
 * owner (they share one key). In watchdog mode the next renewal sets the TTL back to `watchdogMs`.
 *
 * @param lease A lease from {@linkcode acquire}; over several names, each name's hold is extended (`true` when all were).
 * @param leaseMs The new TTL in ms, integer from 1 to 2147483647. Defaults to the lease's own `leaseMs` (or
 *   `watchdogMs` in watchdog mode).
 * @param options `timeoutMs`: how long to wait for Redis; by default the lease's remaining time, at least 250 ms.
 * @returns `false` when the lease was no longer held (released, lost, expired or force-unlocked); the lease is
 *   then lost and its signal aborts with {@linkcode LeaseLostError}.
 * @throws {TypeError | RangeError} for an invalid `lease` or `leaseMs`, before any Redis command; a Redis error
 *   is passed through.
 * @throws {RedisTimeoutError} when Redis did not answer within `timeoutMs` (the deadline is not moved), and
 *   {@linkcode RedisUnavailableError} when it could not be reached; `cause`: the Redis client's error.
 * @throws {ReplicationError} with the `replicas` option, when too few replicas acknowledged the new TTL (the
 *   primary has it; the local deadline is not moved).
 *
 * @example Extend a fixed lease before a long step
 * ```ts
 * import { acquire, extend } from "redlease";
 * const lease = await acquire(client, "export", { leaseMs: 10_000 });
 * if (!(await extend(lease, 60_000))) throw new Error("lease lost");
 * ```
 */
export async function extend(lease: Lease, leaseMs?: number, options?: CallOptions): Promise<boolean> {
  checkLease("extend lease", lease);
  if (lease instanceof LeaseGroup) {
    // Every name's hold (checked first, so that a bad argument sends nothing): true when every one was extended.
    if (leaseMs !== undefined) checkLeaseMs("extend lease", leaseMs);
    checkCallOptions("extend lease", options);
    if (lease.releasing || lease.endedWith !== undefined) return false;
    return (await Promise.all(lease.parts.map((p) => extend(p, leaseMs, options)))).every(Boolean);
  }
  const hold = lease.hold;
  const ms = leaseMs === undefined ? hold.ms : checkLeaseMs("extend lease", leaseMs);
  const timeoutMs = checkCallOptions("extend lease", options);
  if (lease.releasing || lease.endedWith !== undefined || !hold.active) return false;
  const t0 = performance.now();
  const until = heldCallUntil(t0, hold.deadline, timeoutMs);
  let held: boolean;
  try {
    held = await hold.target.renew(hold, ms, { until, name: hold.name, signal: hold.ending }, true);
  } catch (e) {
    if (!hold.active) return false; // released (or lost) meanwhile: see Hold#ending
    throw e;
  }
  if (!hold.active) return false;
  if (!held) {
    hold.lose("not-held");
    return false;
  }
  hold.extended(t0, ms);
  return true;
}
