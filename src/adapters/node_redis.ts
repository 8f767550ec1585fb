/**
 * Adapter for node-redis v4 and v5 clients: standalone (`createClient`), cluster (`createCluster`, with sharded
 * pub/sub for waiters) and sentinel (v5 `createSentinel`). The core recognises these clients by shape and wraps
 * them automatically; use `nodeRedis()` to build the {@linkcode Driver} explicitly (for instance to pass it to
 * code that accepts only drivers).
 *
 * @example
 * ```ts
 * import { createCluster } from "redis";
 * import { acquire } from "redlease";
 * import { nodeRedis } from "redlease/node-redis";
 *
 * const cluster = await createCluster({ rootNodes: [{ url: "redis://10.0.0.1:7000" }] }).connect();
 * const lease = await acquire(nodeRedis(cluster), "orders:42");
 * ```
 *
 * @module
 */
import { isNodeRedis, nodeRedisDriver } from "../_node_redis.ts";
import type { NodeRedisClient } from "../_client.ts";
import type { Driver } from "../driver.ts";

/**
 * Wrap a connected node-redis v4/v5 client (standalone, cluster or sentinel) as a {@linkcode Driver}.
 *
 * @param client The connected node-redis client (a pending `connect()`, or an ioredis client, does not compile).
 * @returns A driver; waiters of a standalone client share one extra subscriber connection, closed with `client`.
 * @throws {TypeError} when `client` is not a node-redis client (a Promise: await it first).
 *
 * @example
 * ```ts
 * import { createClient } from "redis";
 * import { nodeRedis } from "redlease/node-redis";
 * const driver = nodeRedis(await createClient().connect());
 * ```
 */
export function nodeRedis(client: NodeRedisClient): Driver {
  if (!isNodeRedis(client)) {
    const promise = typeof (client as { then?: unknown } | null)?.then === "function";
    const why = promise ? "is a Promise: await it first" : "must be a node-redis client: current value is not one";
    throw new TypeError(`Cannot wrap client as 'client' ${why}`);
  }
  return nodeRedisDriver(client);
}

export type { NodeRedisClient } from "../_client.ts";
export type { Driver } from "../driver.ts";
