/**
 * Adapter for [ioredis](https://github.com/redis/ioredis) 5 clients: standalone and Sentinel-backed
 * (`new Redis({ sentinels, name })`, the same API) and Redis Cluster (`new Redis.Cluster(...)`). ioredis is not
 * imported: the client is recognised by shape, so redlease keeps no runtime dependency on it.
 *
 * - Standalone / Sentinel: waiters share one extra connection (`client.duplicate()`, created on the first wait)
 *   that is closed when `client` emits `end`. The `replicas` option works (`WAIT` on `client`'s connection).
 * - Cluster: a script is sent in full to a master the first time a call there answers `NOSCRIPT`. Waiters are
 *   woken by sharded pub/sub only when the cluster was created with `shardedSubscribers: true` (ioredis routes
 *   `SSUBSCRIBE` per shard only then); otherwise they poll with jittered backoff bounded by the holder's TTL.
 *   `replicas` sends `WAIT` to the master that serves the lease's slot, on the connection that wrote it. After a
 *   master fails, ioredis rediscovers the slots by itself; a call it gives up on meanwhile (`Too many Cluster
 *   redirections`) is sent again while its caller waits.
 *
 * @example
 * ```ts
 * import { Redis } from "ioredis";
 * import { withLock } from "redlease";
 * import { ioredis } from "redlease/ioredis";
 *
 * const redis = ioredis(new Redis("redis://localhost:6379"));
 * await withLock(redis, "invoice:42", async (signal, lease) => {
 *   await chargeCustomer({ fence: lease.fence, signal });
 * });
 * ```
 *
 * @module
 */
import type { Driver } from "../driver.ts";
import { type Channels, dispatcher, listen, unlisten } from "./_channels.ts";
import { slotOf } from "./_slot.ts";
import { watchErrors } from "./_watch.ts";

/** An event listener, as ioredis's `EventEmitter` methods take it. */
// deno-lint-ignore no-explicit-any
export type IORedisListener = (...args: any[]) => void;

/** What this adapter uses of an ioredis 5 `Redis` client (standalone or Sentinel-backed). */
export interface IORedisClient {
  /** `EVALSHA sha numkeys ...keys ...args`. */
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** `EVAL source numkeys ...keys ...args` (after NOSCRIPT). */
  eval(source: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** `SCRIPT LOAD source`. */
  script(subcommand: "LOAD", source: string): Promise<unknown>;
  /** Any command (here `WAIT` and `INFO`). */
  call(command: string, ...args: string[]): Promise<unknown>;
  /** A new client with the same options: the waiters' subscriber connection. */
  duplicate(): IORedisClient;
  /** `SUBSCRIBE` (on the subscriber connection). */
  subscribe(...channels: string[]): Promise<unknown>;
  /** `UNSUBSCRIBE` (on the subscriber connection). */
  unsubscribe(...channels: string[]): Promise<unknown>;
  /** Connect a `lazyConnect` client. */
  connect(): Promise<void>;
  /** Close the connection at once. */
  disconnect(): void;
  /** Listen to `message`, `error`, `ready`. */
  on(event: string, listener: IORedisListener): unknown;
  /** Listen once to `end`, `ready`. */
  once(event: string, listener: IORedisListener): unknown;
  /** `wait` (lazyConnect, not connected yet), `connecting`, `ready`, `end`, … */
  readonly status: string;
  /** The client's options; `keyPrefix` is honoured, and `autoResubscribe` tells whether ioredis resubscribes. */
  readonly options: { readonly keyPrefix?: unknown; readonly autoResubscribe?: boolean };
  /** The connection's socket (while `status` is `ready`): held (`cork`) so that scripts go out several at a time. */
  readonly stream?: Partial<IORedisSocket>;
}

/** What this adapter uses of the socket of an ioredis client (a `net.Socket` or `tls.TLSSocket`). */
export interface IORedisSocket {
  /** Hold what is written until `uncork`. */
  cork(): void;
  /** Send what `cork` held. */
  uncork(): void;
}

/** What this adapter uses of an ioredis 5 `Cluster` client. */
export interface IORedisCluster {
  /** `true` for a Cluster. */
  readonly isCluster: boolean;
  /** `EVALSHA`, routed by its first key. */
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** `EVAL`, routed by its first key (after NOSCRIPT: caches the script on that master). */
  eval(source: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  /** `SCRIPT LOAD` on some node (used only before the slot map is known). */
  script(subcommand: "LOAD", source: string): Promise<unknown>;
  /** `SSUBSCRIBE`, routed to the shard of the channel (with `shardedSubscribers: true`). */
  ssubscribe(...channels: string[]): Promise<unknown>;
  /** `SUNSUBSCRIBE`. */
  sunsubscribe(...channels: string[]): Promise<unknown>;
  /** The connections to the masters. */
  nodes(role: "master"): Array<Pick<IORedisClient, "script" | "call" | "options">>;
  /** Listen to `smessage`, `subscribersReady`. */
  on(event: string, listener: IORedisListener): unknown;
  /** slot → node keys ("host:port"), master first. */
  readonly slots: ReadonlyArray<ReadonlyArray<string> | undefined>;
  /** The cluster's options; `keyPrefix` and `shardedSubscribers` are honoured. */
  readonly options: { readonly keyPrefix?: unknown; readonly shardedSubscribers?: boolean };
}

const drivers = new WeakMap<object, Driver>();

function has(value: unknown, ...names: string[]): boolean {
  return typeof value === "object" && value !== null &&
    names.every((name) => typeof (value as Record<string, unknown>)[name] === "function");
}

/**
 * Wrap a connected ioredis 5 client (standalone, Sentinel-backed or Cluster) as a {@linkcode Driver}.
 *
 * Call it once per client and pass the driver to every redlease call: the same client always yields the same
 * driver, so its waiters share one subscriber connection.
 *
 * Replies keep ioredis's types (integers are numbers) and Redis errors keep their message (`NOSCRIPT …`,
 * `WRONGTYPE …`), which is what redlease relies on. A `keyPrefix` configured on the client is honoured: keys
 * and waiter channels both carry it.
 *
 * @param client An ioredis `Redis` (standalone or `{ sentinels, name }`) or `Cluster` instance.
 * @returns A driver for `client`; the same one on every call with the same client.
 * @throws {TypeError} when `client` is not an ioredis client.
 *
 * @example Standalone or Sentinel
 * ```ts
 * import { Redis } from "ioredis";
 * import { acquire, release } from "redlease";
 * import { ioredis } from "redlease/ioredis";
 *
 * const redis = ioredis(new Redis({ sentinels: [{ host: "10.0.0.5", port: 26379 }], name: "mymaster" }));
 * const lease = await acquire(redis, "reports:daily", { replicas: 1 });
 * await release(lease);
 * ```
 *
 * @example Cluster, with sharded pub/sub so that waiters are woken instead of polling
 * ```ts
 * import { Cluster } from "ioredis";
 * import { acquire } from "redlease";
 * import { ioredis } from "redlease/ioredis";
 *
 * const cluster = new Cluster([{ host: "10.0.0.1", port: 7000 }], { shardedSubscribers: true });
 * const lease = await acquire(ioredis(cluster), "orders:42", { waitMs: 5_000 });
 * ```
 */
export function ioredis(client: IORedisClient | IORedisCluster): Driver {
  if (!has(client, "evalsha", "script", "on") || !(has(client, "duplicate", "call") || has(client, "nodes"))) {
    throw new TypeError("Cannot wrap client as 'client' must be an ioredis client: current value is not one");
  }
  let driver = drivers.get(client);
  if (!driver) {
    driver = (client as IORedisCluster).isCluster === true
      ? clusterDriver(client as IORedisCluster)
      : standaloneDriver(client as IORedisClient);
    const lastError = watchErrors(client);
    if (lastError) driver.lastError = lastError;
    drivers.set(client, driver);
  }
  return driver;
}

function keyPrefixOf(client: { readonly options?: { readonly keyPrefix?: unknown } }): string {
  const prefix = client.options?.keyPrefix;
  return typeof prefix === "string" ? prefix : "";
}

/**
 * The channel `ch` as Redis names it for a client whose keys carry `prefix`: in front of a channel of redlease's own
 * (its scripts publish on names built from prefixed keys), or, for a keyspace notification channel
 * (`__keyspace@<db>__:<key>`, which Redis names after the key as stored), in front of the key.
 */
const prefixed = (prefix: string, ch: string) =>
  ch.startsWith("__keyspace@") ? ch.replace(":", `:${prefix}`) : prefix + ch;

const evalArgs = (keys: readonly string[], args: readonly string[]) => [...keys, ...args];

const proc = (globalThis as {
  process?: { nextTick?(fn: () => void): void; on?(event: "exit", fn: () => void): unknown };
}).process;

/** Run `fn` once the current turn's microtasks have run: process.nextTick where there is one (Node, Bun, Deno). */
const afterTurn: (fn: () => void) => void = typeof proc?.nextTick === "function"
  ? (fn) => proc.nextTick!(fn)
  : queueMicrotask;

/**
 * The sends that the end of this turn will make (see batched), made at once should the process exit first: a turn
 * that ends in process.exit() (a `release(lease); process.exit()`), or an "exit" listener, has no later tick, and what
 * a held socket kept would never leave, where a write each had reached Redis. Once exiting, nothing is held any more
 * (an "exit" listener that runs after this one releases too). Deno.exit() runs "unload" listeners instead.
 */
const due = new Set<() => void>();
const scope = globalThis as { addEventListener?(type: "unload", fn: () => void): void };
let exiting = false;
let watchingExit = false;
const onExit = () => {
  exiting = true;
  for (const send of due) send();
};

/**
 * How many scripts go out in one write at most. ioredis writes every command to its socket at once, one write (a
 * system call) each: with many leases taken and released at the same time, most of a call's client CPU (two thirds
 * in a profile) and much of Redis's went to those writes. Held until the turn of the event loop ends (as node-redis
 * does), they would reach Redis only after the client had done all of that turn's work, and Redis would wait for
 * it: 64 loops of acquire and release on one client ran 27 k cycles/s that way, against 43 k with one write each;
 * eight at a time keeps both busy: 58–65 k (`node --import tsx bench/uncontended.ts --entry bundle --libs
 * redlease-io,semaphore --opts watchdog`, 27 Nov; docs/benchmarks.md).
 */
const SCRIPTS_PER_WRITE = 8;

/**
 * What to call before each script: the first of a turn holds the client's socket (`cork`), every
 * SCRIPTS_PER_WRITE held are sent together, and the turn's end sends the rest (`uncork`). Nothing waits past the end
 * of the current turn, and the order of commands on the connection is unchanged. Where the socket cannot be held
 * (not connected: ioredis queues the command itself; a socket without `cork`), a script goes out as before.
 */
function batched(client: IORedisClient): () => void {
  let held: IORedisSocket | undefined;
  let n = 0;
  // (A socket that throws here (closed meanwhile) is let go: ioredis reports the connection's fate to every command
  // it holds, and a throw in the tick callback would end the process.)
  const flush = () => {
    const s = held;
    held = undefined;
    due.delete(flush);
    try {
      s?.uncork();
    } catch { /* see above */ }
  };
  return () => {
    try {
      if (held) {
        if (n === SCRIPTS_PER_WRITE) {
          held.uncork();
          held.cork();
          n = 0;
        }
        n++;
        return;
      }
      const s = client.stream;
      if (exiting || client.status !== "ready" || typeof s?.cork !== "function" || typeof s.uncork !== "function") {
        return;
      }
      if (!watchingExit) {
        watchingExit = true; // (one listener each for every client, added by the first hold)
        if (typeof proc?.on === "function") proc.on("exit", onExit);
        scope.addEventListener?.("unload", onExit);
      }
      s.cork();
      held = s as IORedisSocket;
      n = 1;
      due.add(flush);
      afterTurn(flush);
    } catch { /* see above */ }
  };
}

// Long: one closure per driver method over the same client and subscriber connection; each method is short.
function standaloneDriver(client: IORedisClient): Driver {
  const prefix = keyPrefixOf(client);
  const channels: Channels = new Map();
  let sub: IORedisClient | undefined;
  let connecting: Promise<void> | undefined;
  let resubscribed: (() => void) | undefined;
  // One subscriber connection for all channels, created synchronously so that SUBSCRIBE and UNSUBSCRIBE go out
  // in call order, and closed together with the caller's client so that closing it lets the process exit.
  const subscriber = (): { conn: IORedisClient; ready: Promise<void> } => {
    if (!sub) {
      const conn = sub = client.duplicate();
      // Socket errors while reconnecting land here; ioredis resubscribes, waiters fall back to bounded sleeps.
      conn.on("error", () => {});
      conn.on("message", dispatcher(channels));
      // Every "ready" after the first is a reconnection, after which ioredis has resubscribed (unless told not to).
      if (conn.options?.autoResubscribe !== false) conn.once("ready", () => conn.on("ready", () => resubscribed?.()));
      // A lazyConnect duplicate must be connected; otherwise ioredis queues SUBSCRIBE until it is connected, and
      // fails it after `maxRetriesPerRequest` reconnection attempts (or at once without the offline queue).
      // If connecting fails, the next waiter starts over with a new connection.
      connecting = conn.status === "wait"
        ? conn.connect().catch((e: unknown) => {
          if (sub === conn) {
            sub = undefined;
            channels.clear();
            conn.disconnect();
          }
          throw e;
        })
        : Promise.resolve();
      client.once("end", () => {
        if (sub !== conn) return;
        sub = undefined;
        channels.clear();
        conn.disconnect();
      });
    }
    return { conn: sub, ready: connecting! };
  };
  const hold = batched(client);
  return {
    evalScript: (sha, keys, args) => {
      hold();
      return client.evalsha(sha, keys.length, ...evalArgs(keys, args));
    },
    evalSource: (source, keys, args) => client.eval(source, keys.length, ...evalArgs(keys, args)),
    loadScript: async (source) => String(await client.script("LOAD", source)),
    command: (_key, [cmd, ...rest]) => client.call(cmd, ...rest),
    // ioredis prefixes keys but not SUBSCRIBE channels; scripts publish on channels built from prefixed keys.
    subscribe: (ch, l) => {
      const { conn, ready } = subscriber(), c = prefixed(prefix, ch);
      return listen(channels, c, l, () => ready.then(() => conn.subscribe(c)));
    },
    unsubscribe: (ch, l) => {
      const conn = sub, c = prefixed(prefix, ch);
      return conn ? unlisten(channels, c, l, () => conn.unsubscribe(c)) : Promise.resolve();
    },
    onResubscribed: (fn) => void (resubscribed = fn),
  };
}

/**
 * A Driver's `command` on a cluster. WAIT counts the replicas that acknowledged the writes of *this connection*: it
 * goes to the connection of the master that serves the key's slot, the one EVALSHA used.
 */
function masterCommand(cluster: IORedisCluster, prefix: string): NonNullable<Driver["command"]> {
  return (key, [cmd, ...rest]) => {
    const nodeKey = cluster.slots[slotOf(prefix + key)]?.[0];
    const master = nodeKey === undefined ? undefined : cluster.nodes("master").find((node) => {
      const address = node.options as { host?: string; port?: number };
      return `${address.host}:${address.port}` === nodeKey;
    });
    if (!master) return Promise.reject(new Error(`No master known for the slot of '${key}' (cluster not ready?)`));
    return master.call(cmd, ...rest);
  };
}

function clusterDriver(cluster: IORedisCluster): Driver {
  const prefix = keyPrefixOf(cluster);
  const driver: Driver = {
    // Scripts call SPUBLISH: slot-local, instead of PUBLISH, which the cluster bus copies to every node.
    sharded: true,
    // ioredis routes EVALSHA by its first key and follows MOVED/ASK.
    evalScript: (sha, keys, args) => cluster.evalsha(sha, keys.length, ...evalArgs(keys, args)),
    // After NOSCRIPT, the script in full to the master of keys[0], which caches it: lazily, master by master (a
    // slot moved to a master that has never seen it answers NOSCRIPT once more there).
    evalSource: (source, keys, args) => cluster.eval(source, keys.length, ...evalArgs(keys, args)),
    // (redlease uses evalSource; a driver built on this one without it loads here.) Every master: a slot may move
    // (MOVED/ASK) to a master that has never seen the script. Before the slot map is known there are no nodes yet;
    // load through the cluster then (NOSCRIPT later loads everywhere).
    loadScript: async (source) => {
      const masters = cluster.nodes("master");
      if (masters.length === 0) return String(await cluster.script("LOAD", source));
      const shas = await Promise.all(masters.map((m) => m.script("LOAD", source)));
      return String(shas[0]);
    },
    // ioredis follows redirections and sends a command again after CLUSTERDOWN (while a failed master is not
    // replaced yet) and after a closed connection, up to `maxRedirections` times in all, then fails with this error.
    // What ioredis takes to be safe to send again, redlease sends again too, while its caller waits.
    unsent: (e) => (e as Error)?.message?.startsWith("Too many Cluster redirections."),
    command: masterCommand(cluster, prefix),
  };
  // Without shardedSubscribers, ioredis sends SSUBSCRIBE to one arbitrary node, which answers MOVED for slots it
  // does not serve: waiters poll instead (the core does that when `subscribe` is missing).
  if (cluster.options?.shardedSubscribers === true && has(cluster, "ssubscribe", "sunsubscribe")) {
    const channels: Channels = new Map();
    let listening = false;
    // SSUBSCRIBE channels are keys to ioredis: it adds the key prefix itself, and reports it in 'smessage'.
    driver.subscribe = (ch, l) => {
      if (!listening) {
        listening = true;
        cluster.on("smessage", dispatcher(channels));
      }
      return listen(channels, prefix + ch, l, () => cluster.ssubscribe(ch));
    };
    driver.unsubscribe = (ch, l) => unlisten(channels, prefix + ch, l, () => cluster.sunsubscribe(ch));
    // Emitted once ioredis has replaced the shard subscribers that dropped (or moved) and resubscribed them.
    driver.onResubscribed = (fn) => void cluster.on("subscribersReady", fn);
  }
  return driver;
}

export type { Driver } from "../driver.ts";
