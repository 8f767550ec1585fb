/**
 * Redlock over independent Redis masters: `redlock([a, b, c])` makes a group that `acquire` and `withLock` take
 * in place of a client. A lease is granted when a majority of the masters grant it within its validity, renewed
 * and released on all of them, and it survives the loss of a minority. Kept out of the core entry, so that code
 * for a single Redis (the common case) does not carry it.
 *
 * @example
 * ```ts
 * import { createClient } from "redis";
 * import { acquire, release } from "redlease";
 * import { redlock } from "redlease/redlock";
 *
 * const masters = await Promise.all(
 *   ["redis://a:6379", "redis://b:6379", "redis://c:6379"].map((url) => createClient({ url }).connect()),
 * );
 * const lease = await acquire(redlock(masters), "payments:settle", { waitMs: 2_000 });
 * await release(lease);
 * ```
 *
 * @module
 */
import { REDLOCK, type Redlock, REDLOCK_NAMES } from "./_acquire.ts";
import { checkClient, type RedisLike } from "./_client.ts";
import { acquireRedlock, acquireRedlockNames } from "./_redlock.ts";
import { fail } from "./_validate.ts";

// The types its signature names, so that this entry documents them on its own.
export type { NodeRedisClient, RedisLike } from "./_client.ts";
export type { Driver } from "./driver.ts";
export type { Redlock } from "./_acquire.ts";

/**
 * A Redlock group of an odd number (3, 5, 7, ...) of clients, each of an independent master, to pass to
 * `acquire` or `withLock` instead of a client. The options `nodeTimeoutMs` and `retryDelayMs` of those calls
 * apply to it; `replicas` and `permits` do not. Several names are taken as one set, exclusively: each master takes
 * every name or none in one script call, a majority of masters must grant all of them, and a failed attempt is
 * undone everywhere before a random delay, so overlapping sets never deadlock (see docs/names.md, "On Redlock").
 *
 * @param clients Connected clients (node-redis clients or redlease Drivers), no client twice.
 * @returns The group.
 * @throws {TypeError | RangeError} when `clients` is not an array of 3, 5, 7, ... distinct clients.
 *
 * @example
 * ```ts
 * const group = redlock([a, b, c]);
 * await withLock(group, "payments:settle", async (signal, lease) => settle(lease.fence, signal));
 * // Several names, one lease: each keeps its own fence.
 * await withLock(group, ["account:1", "account:2"], async (signal, lease) => transfer({ fences: lease.fences, signal }));
 * ```
 */
export function redlock(clients: readonly RedisLike[]): Redlock {
  const op = "make a Redlock group";
  if (!Array.isArray(clients)) fail(op, "clients", "must be an array of clients", clients);
  if (clients.length < 3 || clients.length % 2 === 0) {
    fail(op, "clients", "must be an odd number (3, 5, 7, ...) of clients", clients, RangeError);
  }
  // A closed client is a failed node, as Redlock tolerates (a minority of them): it is not refused here.
  for (const c of clients) checkClient(op, c, "clients", true);
  if (new Set(clients).size !== clients.length) fail(op, "clients", "must not repeat a client", clients, RangeError);
  const list = [...clients];
  return {
    clients: list,
    [REDLOCK]: (o) => acquireRedlock(list, o, o.nodeTimeoutMs, o.retryDelayMs),
    [REDLOCK_NAMES]: (names, o) => acquireRedlockNames(list, names, o, o.nodeTimeoutMs, o.retryDelayMs),
  };
}
