import type { RedisLike } from "./_client.ts";
import { acquireAny, checkClients, ownerOf, type Redlock, resolveNames } from "./_acquire.ts";
import { acquireNamesAny } from "./_acquire_names.ts";
import { resolveAcquire } from "./_validate.ts";
import type { AcquireOptions, Lease } from "./lease.ts";

export type { AcquireOptions, CallOptions, KeyOptions, Lease, LeaseKind } from "./lease.ts";
export type { NodeRedisClient, RedisLike } from "./_client.ts";
export type { Redlock } from "./_acquire.ts";
export type { Driver } from "./driver.ts";

/**
 * Acquire the lease `name`, waiting for it if another owner holds it.
 *
 * One round trip when the lease is free (plus one, the script sent in full, the first time a server runs it). When
 * it is held, the caller joins a first-come-first-served queue
 * in Redis and sleeps; the holder's release hands the lease directly to the first live waiter, whose client
 * learns of it by one pub/sub message, so a release wakes exactly one waiter. Every sleep is also bounded by
 * the holder's remaining TTL, so a holder that dies without releasing delays waiters by at most its lease.
 *
 * Without `leaseMs` the lease is kept alive by a watchdog (renewed every `watchdogMs / 3`) until released;
 * `lease.signal` aborts with {@linkcode LeaseLostError} the moment it is known to be lost.
 *
 * @param client A connected node-redis client (v4 or v5: standalone, cluster or sentinel) or a {@linkcode Driver};
 *   or a group of independent masters made by `redlock()` from `redlease/redlock` (see docs/topologies.md, "Redlock").
 * @param name The lease name; any non-empty string up to 1024 characters. Or several names (1 to 64, distinct): one
 *   lease over all of them, all or nothing, never deadlocking against another acquire of overlapping names; each
 *   name keeps its own fence (`lease.fences`), and the loss of any aborts `lease.signal`. On one server an
 *   uncontended acquire takes them all in one script call; contended (or on a Cluster, where names are in
 *   different slots), they are taken one by one in name order, each waiting in its own queue (see
 *   docs/names.md). On a Redlock group (exclusive only), each master takes every name or none in one script call;
 *   the set is granted by a majority of masters that granted all of it within the validity, and otherwise undone
 *   everywhere and retried after a random delay (docs/names.md, "On Redlock").
 * @param options See {@linkcode AcquireOptions}.
 * @returns The held {@linkcode Lease}.
 * @throws {LockTimeoutError} when the lease is held by others and `waitMs` runs out (or with `waitMs: 0`, at once):
 *   only when Redis's last answer said "held".
 * @throws {RedisUnavailableError} when Redis could not be reached (its `cause`: the client's error, e.g. a
 *   connection reset), and {@linkcode RedisTimeoutError} when it did not answer within `waitMs` + 250 ms (its
 *   `cause`: the client's last error, if any) — also when it had answered "held" before: the outage wins. The
 *   command's outcome is unknown, so the attempt is undone (once Redis answers again); retrying the call is safe.
 * @throws {TypeError | RangeError} for invalid arguments (an unknown option key included), before any Redis command.
 * @throws `signal.reason` when `signal` aborts the wait (within 50 ms, whatever the connection does).
 * @throws a Redis error reply (e.g. `NOPERM`) as the client reported it: Redis answered, but refused.
 *
 * @example Hold a lease and release it at the end of the scope
 * ```ts
 * import { createClient } from "redis";
 * import { acquire } from "redlease";
 *
 * const client = await createClient({ url: "redis://localhost:6379" }).connect();
 * {
 *   await using lease = await acquire(client, "reports:daily", { waitMs: 5_000 });
 *   console.log(`holding with fence ${lease.fence}`);
 * }
 * await client.quit();
 * ```
 *
 * @example One lease over two accounts, for a transfer
 * ```ts
 * await using both = await acquire(client, ["account:1", "account:2"]);
 * await transfer({ fences: both.fences, signal: both.signal });
 * ```
 *
 * @example Try once, with a fixed 2 s lease and no renewal
 * ```ts
 * const lease = await acquire(client, "cron:cleanup", { waitMs: 0, leaseMs: 2_000 });
 * ```
 */
export function acquire(
  client: RedisLike | Redlock,
  name: string | readonly string[],
  options?: AcquireOptions,
): Promise<Lease> {
  try {
    checkClients("acquire lease", client);
    if (Array.isArray(name)) {
      return acquireNamesAny(client, name, resolveNames("acquire lease", client, name, options));
    }
    return acquireAny(client, resolveAcquire("acquire lease", name as string, options, ownerOf));
  } catch (e) {
    return Promise.reject(e);
  }
}
