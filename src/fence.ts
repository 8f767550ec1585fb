/**
 * Fenced writes to Redis: the resource refuses a stale writer in the same round trip as the write. Each write is
 * one script that compares the writer's fence (`lease.fence`) with a high-water mark kept next to the resource,
 * `<key>:fence`, and writes only when the fence is not lower than the highest that wrote there before; a lower one
 * rejects with {@linkcode StaleFenceError} and nothing is written. The mark outlives the resource by `retainMs`
 * (24 hours by default) and then expires. Kept out of the core entry, so that code that does not fence its writes
 * does not carry it.
 *
 * On a Redis Cluster the resource key must have a hash tag (`{sale}:stock`), which its mark keeps, and the keys of
 * {@linkcode fencedEval} must share it.
 *
 * Fenced writes to PostgreSQL, through your own query function (`pg`, postgres.js, PGlite; none is a dependency):
 * {@linkcode fencedSqlUpdate}, one `UPDATE` guarded by a fence column on its rows, and
 * {@linkcode fencedSqlTransaction}, several statements guarded by a per-resource fence row ({@linkcode FENCE_TABLE_SQL}).
 *
 * @example Sell one item of a flash sale: a holder whose lease passed to another is refused
 * ```ts
 * import { createClient } from "redis";
 * import { withLock } from "redlease";
 * import { fencedIncrBy } from "redlease/fence";
 *
 * const client = await createClient().connect();
 * const left = await withLock(client, "sale", (_signal, lease) =>
 *   fencedIncrBy(client, lease, "{sale}:stock", -1, { floor: 0 }));
 * console.log(left === undefined ? "sold out" : `${left} left`);
 * ```
 *
 * @module
 */
export * from "./fenced_del.ts";
export * from "./fenced_eval.ts";
export * from "./fenced_hset.ts";
export * from "./fenced_incr_by.ts";
export * from "./fenced_set.ts";
export * from "./fenced_sql.ts";
export { DEFAULT_RETAIN_MS, type FenceOptions, type FenceSource, markOf } from "./_fence.ts";
// The types and errors its signatures name, so that this entry documents them on its own.
export { isStaleFenceError, RedleaseError, StaleFenceError } from "./errors.ts";
export type { NodeRedisClient, RedisLike } from "./_client.ts";
export type { Driver } from "./driver.ts";
export type { Lease, LeaseKind } from "./lease.ts";
