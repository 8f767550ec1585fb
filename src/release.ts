import { checkLease } from "./_acquire.ts";
import type { CallOptions, Lease } from "./lease.ts";
import { checkCallOptions } from "./_validate.ts";

/**
 * Release one hold of a lease. On the owner's last hold the lease is freed, or handed straight to the first
 * waiting client; a reentrant owner keeps the lease until its hold count reaches zero.
 *
 * Never throws because the lease is gone: it resolves `false` when the lease was no longer held (expired,
 * force-unlocked, or released already — a second release of the same handle is `false`), so it is safe in
 * `finally`. It rejects only for a Redis error or outage ({@linkcode RedisUnavailableError}, its `cause` the client's
 * error); the lease then expires on its own within its TTL, since its
 * watchdog has stopped. `lease.signal` aborts with an `AbortError` DOMException.
 *
 * It settles within `timeoutMs`: by default the lease's remaining time, and at least 250 ms, so a `release` in
 * `finally` never hangs past the lease's own expiry when Redis does not answer; it then rejects with
 * {@linkcode RedisTimeoutError} and the lease expires by its TTL.
 *
 * @param lease A lease from {@linkcode acquire}.
 * @param options `timeoutMs`: how long to wait for Redis.
 * @returns `true` when this call released a hold that Redis still had.
 *
 * @example
 * ```ts
 * import { acquire, release } from "redlease";
 * const lease = await acquire(client, "inventory:sku-1");
 * try {
 *   await restock(lease.fence);
 * } finally {
 *   await release(lease);
 * }
 * ```
 */
export function release(lease: Lease, options?: CallOptions): Promise<boolean> {
  try {
    checkLease("release lease", lease);
    const timeoutMs = checkCallOptions("release lease", options);
    // Released already: false, once that release has settled (either way).
    if (lease.releasing) return lease.releasing.then(() => false, () => false);
    return lease.release(timeoutMs);
  } catch (e) {
    return Promise.reject(e);
  }
}
