import { checkLease } from "./_acquire.ts";
import { releaseHandle } from "./_hold.ts";
import type { Lease } from "./lease.ts";

/**
 * Release one hold of a lease. On the owner's last hold the lease is freed, or handed straight to the first
 * waiting client; a reentrant owner keeps the lease until its hold count reaches zero.
 *
 * Never throws because the lease is gone: it resolves `false` when the lease was no longer held (expired,
 * force-unlocked, or released already — a second release of the same handle is `false`), so it is safe in
 * `finally`. It rejects only for a Redis error; the lease then expires on its own within its TTL, since its
 * watchdog has stopped. `lease.signal` aborts with an `AbortError` DOMException.
 *
 * @param lease A lease from {@linkcode acquire}.
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
export async function release(lease: Lease): Promise<boolean> {
  checkLease("release lease", lease);
  if (lease.releasing) {
    await lease.releasing.catch(() => {});
    return false;
  }
  return await releaseHandle(lease);
}
