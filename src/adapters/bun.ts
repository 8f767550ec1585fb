/**
 * Adapter for Bun's built-in Redis client (`new Bun.RedisClient(url)`, or the default `redis` export of `"bun"`).
 * Commands go through `client.send()`; waiters are woken by pub/sub on one extra connection made with
 * `client.duplicate()` when the first waiter subscribes, resubscribed when Bun reconnects it, and closed when the
 * last waiter leaves (an open subscriber connection keeps a Bun process alive). The `replicas` option works (`WAIT`
 * on `client`'s connection).
 *
 * @example
 * ```ts
 * import { RedisClient } from "bun";
 * import { withLock } from "redlease";
 * import { bunRedis } from "redlease/bun";
 *
 * const redis = bunRedis(new RedisClient("redis://localhost:6379"));
 * await withLock(redis, "invoice:42", async (signal, lease) => {
 *   await chargeCustomer({ fence: lease.fence, signal });
 * });
 * ```
 *
 * @module
 */
import type { Driver } from "../driver.ts";
import { type Channels, listen, unlisten } from "./_channels.ts";

/** What this adapter uses of a Bun `RedisClient`. */
export interface BunRedisClient {
  /** Send any command; integer replies resolve to numbers, Redis errors reject with Redis's message. */
  send(command: string, args: string[]): Promise<unknown>;
  /** A new connected client with the same options: the waiters' subscriber connection. */
  duplicate(): Promise<BunRedisClient>;
  /** `SUBSCRIBE` a channel (on the subscriber connection). */
  subscribe(channel: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  /** `UNSUBSCRIBE` a channel, dropping its listeners. */
  unsubscribe(channel: string): Promise<unknown>;
  /** Close the connection. */
  close(): void;
}

const drivers = new WeakMap<object, Driver>();

/**
 * Wrap a Bun `RedisClient` as a {@linkcode Driver}.
 *
 * Call it once per client and pass the driver to every redlease call: the same client always yields the same
 * driver, so its waiters share one subscriber connection. Bun already returns integer replies as numbers and
 * rejects with Redis's own error message (`NOSCRIPT …`, `WRONGTYPE …`), so replies are passed through as they are.
 *
 * @param client A Bun `RedisClient` (it connects on its first command).
 * @returns A driver for `client`; the same one on every call with the same client.
 * @throws {TypeError} when `client` is not a Bun `RedisClient`.
 *
 * @example
 * ```ts
 * import { redis } from "bun"; // the client configured by REDIS_URL
 * import { acquire, release } from "redlease";
 * import { bunRedis } from "redlease/bun";
 *
 * const lease = await acquire(bunRedis(redis), "cron:cleanup", { waitMs: 0, leaseMs: 2_000 });
 * await release(lease);
 * ```
 */
export function bunRedis(client: BunRedisClient): Driver {
  const fields = client as unknown as Record<string, unknown>;
  if (
    typeof client !== "object" || client === null || typeof fields.send !== "function" ||
    typeof fields.duplicate !== "function" || typeof fields.subscribe !== "function" ||
    typeof fields.sendCommand === "function"
  ) {
    throw new TypeError("Cannot wrap client as 'client' must be a Bun RedisClient: current value is not one");
  }
  let driver = drivers.get(client);
  if (!driver) drivers.set(client, driver = makeDriver(client));
  return driver;
}

function makeDriver(client: BunRedisClient): Driver {
  const channels: Channels = new Map();
  let sub: Promise<BunRedisClient> | undefined;
  let resubscribed: (() => void) | undefined;
  const subscriber = () =>
    sub ??= client.duplicate().then((conn) => {
      // Bun reconnects a dropped connection and calls `onconnect`, but does not resubscribe its channels: send
      // SUBSCRIBE as a plain command (`subscribe()` would register each channel's callback a second time).
      if ("onconnect" in conn) {
        (conn as { onconnect: unknown }).onconnect = () =>
          conn.send("SUBSCRIBE", [...channels.keys()]).then(() => resubscribed?.(), () => {});
      }
      return conn;
    }, (e) => {
      sub = undefined;
      throw e;
    });
  return {
    evalScript: (sha, keys, args) => client.send("EVALSHA", [sha, String(keys.length), ...keys, ...args]),
    evalSource: (source, keys, args) => client.send("EVAL", [source, String(keys.length), ...keys, ...args]),
    loadScript: async (source) => String(await client.send("SCRIPT", ["LOAD", source])),
    command: (_key, [cmd, ...rest]) => client.send(cmd, rest),
    subscribe: (ch, l) =>
      listen(channels, ch, l, (to) => allowed(client, ch).then(subscriber).then((conn) => conn.subscribe(ch, to))),
    unsubscribe: (ch, l) => {
      const current = sub;
      return unlisten(channels, ch, l, async () => {
        if (!current) return;
        const conn = await current;
        if (channels.has(ch)) return; // subscribed again meanwhile, on this same connection
        // The last channel gone: close the subscriber (it would keep the process alive); the next wait opens one.
        if (channels.size === 0 && sub === current) {
          sub = undefined;
          conn.close();
        } else {
          await conn.unsubscribe(ch);
        }
      });
    },
    onResubscribed: (fn) => void (resubscribed = fn),
  };
}

/**
 * Resolves if `ch` may be subscribed, for a keyspace notification channel (a watcher's, optional): Bun (1.4) answers
 * a SUBSCRIBE the ACL refuses by closing the subscriber connection, with every waiter's channel on it, and never
 * settles the call. An ACL that grants redlease's own channels only (docs/security.md) refuses those, so they are
 * subscribed only once `ACL DRYRUN` says the user may (Redis 7; refused or older: the watcher goes by heartbeat).
 */
async function allowed(client: BunRedisClient, ch: string): Promise<void> {
  if (!ch.startsWith("__keyspace@")) return;
  const user = String(await client.send("ACL", ["WHOAMI"]));
  const verdict = await client.send("ACL", ["DRYRUN", user, "SUBSCRIBE", ch]);
  if (verdict !== "OK") throw new Error(`Cannot subscribe to '${ch}': ${verdict}`);
}

export type { Driver } from "../driver.ts";
