// Compile-time checks of the client parameter (RedisLike): every supported client is accepted as users pass it,
// and the usual mistakes do not compile. Never run: `tsc -p tsconfig.test.json` (part of `npm test`) checks it,
// and an `@ts-expect-error` whose line compiles again fails that check (TS2578, unused directive).
import type { Cluster as IORedisCluster, Redis as IORedis } from "ioredis";
import type { GlideClient, GlideClusterClient } from "@valkey/valkey-glide";
import type { createClient, createCluster } from "redis";
import type {
  createClient as createClient5,
  createClientPool as createClientPool5,
  createCluster as createCluster5,
  createSentinel as createSentinel5,
} from "redis5";
import {
  acquire,
  campaign,
  type Driver,
  forceUnlock,
  inspect,
  type NodeRedisClient,
  observe,
  type RedisLike,
  resume,
  withLock,
} from "../mod.ts";
import { bunRedis, type BunRedisClient } from "../src/adapters/bun.ts";
import { upstash } from "../src/adapters/http.ts";
import { glide } from "../src/adapters/glide.ts";
import { ioredis } from "../src/adapters/ioredis.ts";
import { nodeRedis } from "../src/adapters/node_redis.ts";
import { redlock } from "../src/redlock.ts";

declare const v4: ReturnType<typeof createClient>;
declare const v4Cluster: ReturnType<typeof createCluster>;
declare const v5: ReturnType<typeof createClient5>;
declare const v5Cluster: ReturnType<typeof createCluster5>;
declare const v5Sentinel: ReturnType<typeof createSentinel5>;
declare const io: IORedis;
declare const ioCluster: IORedisCluster;
declare const bun: BunRedisClient;
declare const valkey: GlideClient;
declare const valkeyCluster: GlideClusterClient;
declare const driver: Driver;

/** Each supported client, as users pass it today. */
export async function accepted(): Promise<void> {
  // node-redis v4 and v5, passed as they are; the same after `await connect()`, which resolves to the client.
  await acquire(v4, "n");
  await acquire(await v4.connect(), "n");
  await acquire(v4Cluster, "n"); // (a v4 cluster's connect() resolves to nothing: it is awaited on its own)
  await acquire(v5, "n");
  await acquire(await v5.connect(), "n");
  await acquire(v5Cluster, "n");
  await acquire(await v5Cluster.connect(), "n");
  await acquire(v5Sentinel, "n");
  await acquire(await v5Sentinel.connect(), "n");
  // The drivers the adapters return, and a Driver written by hand.
  await acquire(nodeRedis(v4), "n");
  await acquire(nodeRedis(v5Cluster), "n");
  await acquire(nodeRedis(v5Sentinel), "n");
  await acquire(ioredis(io), "n");
  await acquire(ioredis(ioCluster), "n");
  await acquire(bunRedis(bun), "n");
  await acquire(glide(valkey), "n");
  await acquire(glide(valkeyCluster), "n");
  await withLock(redlock([glide(valkey), v5]), "n", () => 1);
  await acquire(upstash({ url: "https://example.com", token: "t" }), "n");
  await acquire(driver, "n");
  // A Redlock group of any of them, mixed.
  await acquire(redlock([v4, v5, ioredis(io)]), "n");
  await withLock(redlock([v5Sentinel, driver, v4Cluster]), "n", () => 1);
  // Every entry point that takes a client takes the same ones.
  await withLock(v5, ["a", "b"], () => 1);
  await resume(v5Cluster, "token");
  await campaign(v5Sentinel, "e");
  observe(v4, "e");
  await inspect(v4Cluster, "n");
  await forceUnlock(ioredis(io), "n");
  const list: RedisLike[] = [v4, v4Cluster, v5, v5Cluster, v5Sentinel, driver];
  const clients: NodeRedisClient[] = [v4, v4Cluster, v5, v5Cluster, v5Sentinel];
  void list;
  void clients;
}

/** The usual mistakes: none of these compile. */
export async function refused(): Promise<void> {
  // A pending connect(): the Promise, not the client.
  // @ts-expect-error connect() returns a Promise of the client: await it
  await acquire(v4.connect(), "n");
  // @ts-expect-error the same with node-redis v5
  await acquire(v5.connect(), "n");
  // @ts-expect-error a v5 cluster's pending connect()
  await withLock(v5Cluster.connect(), "n", () => 1);
  // @ts-expect-error a v5 sentinel's pending connect()
  await campaign(v5Sentinel.connect(), "e");
  // @ts-expect-error not to nodeRedis() either
  nodeRedis(v5.connect());

  // An ioredis client that was not wrapped with ioredis() from redlease/ioredis.
  // @ts-expect-error an ioredis Redis must be wrapped: ioredis(io)
  await acquire(io, "n");
  // @ts-expect-error an ioredis Cluster must be wrapped: ioredis(ioCluster)
  await acquire(ioCluster, "n");
  // @ts-expect-error nodeRedis() does not wrap ioredis
  nodeRedis(io);
  // @ts-expect-error not in a Redlock group either
  redlock([v4, v5, io]);

  // A Bun RedisClient that was not wrapped with bunRedis() from redlease/bun.
  // @ts-expect-error a Bun RedisClient must be wrapped: bunRedis(bun)
  await acquire(bun, "n");

  // A GLIDE client that was not wrapped with glide() from redlease/glide, and what glide() does not take.
  // @ts-expect-error a GlideClient must be wrapped: glide(valkey)
  await acquire(valkey, "n");
  // @ts-expect-error a GlideClusterClient must be wrapped: glide(valkeyCluster)
  await campaign(valkeyCluster, "e");
  // @ts-expect-error a pending GlideClient.createClient(): await it first
  glide(Promise.resolve(valkey));
  // @ts-expect-error glide() does not wrap ioredis
  glide(io);
  // @ts-expect-error nor node-redis
  glide(v5);
  // @ts-expect-error nodeRedis() does not wrap GLIDE
  nodeRedis(valkey);

  // Things that are no client at all.
  // @ts-expect-error a plain object
  await acquire({}, "n");
  // @ts-expect-error an object that only looks a little like a client
  await inspect({ sendCommand: () => Promise.resolve(1) }, "n");
  // @ts-expect-error a URL string
  await acquire("redis://localhost:6379", "n");
  // @ts-expect-error undefined
  await acquire(undefined, "n");
  // @ts-expect-error an array of clients: Redlock takes redlock([...]) from redlease/redlock
  await acquire([v4, v5, driver], "n");
  // @ts-expect-error a plain object is no RedisLike
  const notAClient: RedisLike = { evalScript: () => Promise.resolve(1) };
  void notAClient;
  // A v5 client pool (no subscriber connection for waiters): refused at run time, so refused here too.
  const pool = null as unknown as ReturnType<typeof createClientPool5>;
  // @ts-expect-error a v5 client pool is not supported: pass a client
  await acquire(pool, "n");
}
