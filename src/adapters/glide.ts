/**
 * Adapter for [Valkey GLIDE](https://github.com/valkey-io/valkey-glide) 2 clients (`@valkey/valkey-glide`):
 * `GlideClient` (standalone) and `GlideClusterClient`. GLIDE is not imported: the client is recognised by shape, so
 * redlease keeps no runtime dependency on it.
 *
 * - Scripts run as `EVALSHA` through `customCommand` (measured as cheap as GLIDE's `invokeScript`, and it leaves
 *   NOSCRIPT recovery to redlease: one `EVAL` instead of `SCRIPT LOAD` and `EVALSHA` again). GLIDE words Redis's
 *   errors its own way (`An error was signalled by the server: - NoScriptError: …`, `WRONGTYPE: …`); the adapter
 *   gives them back Redis's wording (`NOSCRIPT …`, `WRONGTYPE …`), so NOSCRIPT recovery and every typed error work as
 *   with the other clients.
 * - Waiters are woken by pub/sub on GLIDE 2.3 and later, which subscribes at run time: `SUBSCRIBE` on a
 *   `GlideClient`, sharded `SSUBSCRIBE` on a `GlideClusterClient` (GLIDE routes it to the slot's shard and subscribes
 *   again after a reconnect or a slot move). A `GlideClient`'s waiters subscribe on a second client of the same
 *   class and settings that the adapter makes at the first wait and closes with `client.close()` (see
 *   subscriberOf()); a cluster client's, on its own connections. The adapter reads those messages with
 *   `getPubSubMessage()`, and while there are waiters it asks the subscribing connection's `CLIENT ID` and INFO's
 *   `run_id` once a second (of every primary on a cluster): a new one means that GLIDE replaced the connection, and
 *   the waiters re-check (a message may have been lost meanwhile).
 *   Waiters poll instead (jittered, bounded by the holder's TTL) on GLIDE 2.0–2.2, on a RESP2 client, and on a
 *   client created with a `pubsubSubscriptions` callback (GLIDE hands every message to that callback).
 * - On a cluster, during a failover, GLIDE fails calls that never ran: with a `MOVED` or `ASK` (it can stop following
 *   redirections before every node knows the promoted replica), or for want of a connection to the dead master
 *   (`ConnectionNotFoundForRoute`). The adapter says so (`unsent`), and redlease sends them again while their caller
 *   waits, as after `CLUSTERDOWN`.
 * - GLIDE's `requestTimeout` (250 ms unless set) bounds each call as well as redlease's own bounds: a call it times
 *   out fails as an outage (`RedisUnavailableError`). `WAIT` (the `replicas` option) is a blocking command to GLIDE,
 *   which waits for its own timeout plus a margin; redlease bounds it by the caller's deadline.
 *
 * @example
 * ```ts
 * import { GlideClient } from "@valkey/valkey-glide";
 * import { withLock } from "redlease";
 * import { glide } from "redlease/glide";
 *
 * const client = await GlideClient.createClient({ addresses: [{ host: "localhost", port: 6379 }] });
 * await withLock(glide(client), "invoice:42", async (signal, lease) => {
 *   await chargeCustomer({ fence: lease.fence, signal });
 * });
 * ```
 *
 * @module
 */
import type { Driver } from "../driver.ts";
import { type Channels, listen, unlisten } from "./_channels.ts";
import { unrefTimeout } from "../_timers.ts";

/** A pub/sub message as GLIDE delivers it (strings, or buffers with the `Bytes` decoder). */
export interface GlidePubSubMessage {
  /** The channel the message came on. */
  readonly channel: unknown;
  /** The message's payload. */
  readonly message: unknown;
}

/** What this adapter uses of a GLIDE 2 `GlideClient` (standalone). */
export interface GlideStandaloneClient {
  /** Any command: `EVALSHA`, `EVAL`, `SCRIPT LOAD`, `WAIT`, `INFO`, `CLIENT ID`. */
  customCommand(args: string[], options?: { decoder?: number }): Promise<unknown>;
  /** The next pub/sub message (GLIDE ≥ 2.3 subscribes at run time). */
  getPubSubMessage(): Promise<GlidePubSubMessage>;
  /** `SUBSCRIBE` at run time, waiting up to `timeoutMs` for the confirmation (GLIDE ≥ 2.3). */
  subscribe?(channels: Iterable<string>, timeoutMs: number): Promise<void>;
  /** `UNSUBSCRIBE` at run time (GLIDE ≥ 2.3). */
  unsubscribe?(channels: Iterable<string> | null, timeoutMs: number): Promise<void>;
  /** Close the client. */
  close(errorMessage?: string): void;
}

/** A route to the primary that serves a key's slot, as GLIDE's `customCommand` takes it on a cluster. */
export interface GlideSlotKeyRoute {
  /** Route by the slot of `key`, to its primary. */
  readonly type: "primarySlotKey";
  /** The key whose slot picks the node. */
  readonly key: string;
}

/** What this adapter uses of a GLIDE 2 `GlideClusterClient`. */
export interface GlideClusterClientLike {
  /** Any command, routed by its keys (`EVALSHA`, `EVAL`) or by `route` (`WAIT`, `INFO`). */
  customCommand(args: string[], options?: { route?: GlideSlotKeyRoute | "allPrimaries"; decoder?: number }): Promise<
    unknown
  >;
  /** (Only cluster clients have it: how the adapter tells them apart.) */
  invokeScriptWithRoute(...args: never[]): Promise<unknown>;
  /** The next pub/sub message. */
  getPubSubMessage(): Promise<GlidePubSubMessage>;
  /** Sharded `SSUBSCRIBE` at run time, on the shard of each channel (GLIDE ≥ 2.3). */
  ssubscribe?(channels: Iterable<string>, timeoutMs: number): Promise<void>;
  /** `SUNSUBSCRIBE` at run time (GLIDE ≥ 2.3). */
  sunsubscribe?(channels: Iterable<string> | null, timeoutMs: number): Promise<void>;
  /** Close the client. */
  close(errorMessage?: string): void;
}

/** A GLIDE client: standalone or cluster. */
export type GlideClientLike = GlideStandaloneClient | GlideClusterClientLike;

/** GLIDE's `Decoder.String`: replies as strings whatever the client's `defaultDecoder`. */
const STRINGS = { decoder: 1 } as const;
/** How long a SUBSCRIBE waits for its confirmation (redlease bounds the wait by the caller's deadline too). */
const SUBSCRIBE_MS = 5_000;
/** How often a client with waiters checks whether its connection was replaced (see resubscriptions()). */
const PROBE_MS = 1_000;

/** redis-rs's names for the error kinds it parses, back to the codes Redis sent. */
const CODES: Record<string, string> = {
  NoScriptError: "NOSCRIPT",
  ResponseError: "ERR",
  ExecAbortError: "EXECABORT",
  BusyLoadingError: "LOADING",
  TryAgain: "TRYAGAIN",
  ClusterDown: "CLUSTERDOWN",
  CrossSlot: "CROSSSLOT",
  MasterDown: "MASTERDOWN",
  ReadOnly: "READONLY",
  NotBusy: "NOTBUSY",
  PermissionDenied: "NOPERM",
  Moved: "MOVED",
  Ask: "ASK",
};

/**
 * Redis's wording of an error reply that GLIDE reworded, or `undefined` for an error that is not a reply (a timeout, a
 * closed or lost connection): `An error was signalled by the server: - NoScriptError: No matching script.` is
 * `NOSCRIPT No matching script.`, `WRONGTYPE: Operation…` is `WRONGTYPE Operation…`.
 */
export function redisWording(message: string): string | undefined {
  const kind = /^An error was signalled by the server: - (\w+): ([^]*)$/.exec(message);
  if (kind) return `${CODES[kind[1]] ?? kind[1]} ${kind[2]}`;
  const code = /^([A-Z][A-Z_]+): ([^]*)$/.exec(message);
  return code ? `${code[1]} ${code[2]}` : undefined;
}

/** Rethrow `e` with an error reply in Redis's wording (as calls() does). */
function reworded(e: unknown): never {
  const wording = e instanceof Error ? redisWording(e.message) : undefined;
  if (wording !== undefined) (e as Error).message = wording;
  throw e;
}

const drivers = new WeakMap<object, Driver>();

function has(value: unknown, ...names: string[]): boolean {
  return typeof value === "object" && value !== null &&
    names.every((name) => typeof (value as Record<string, unknown>)[name] === "function");
}

/**
 * Wrap a connected GLIDE 2 client (`GlideClient` or `GlideClusterClient` from `@valkey/valkey-glide`) as a
 * {@linkcode Driver}.
 *
 * Call it once per client and pass the driver to every redlease call: the same client always yields the same driver.
 * A `GlideClient`'s waiters subscribe on a second connection: a client of the same class and settings, made at the
 * first wait and closed by `client.close()` (the adapter wraps that method), so that no subscription shares a
 * connection with the scripts (GLIDE 2.5.2 can give a subscription's confirmation to a command in flight as its reply
 * after a reconnect). A `GlideClusterClient`'s subscribe on its own connections (see docs/clients.md for what that
 * leaves open).
 *
 * @param client A connected `GlideClient` or `GlideClusterClient` (the awaited `createClient()`).
 * @returns A driver for `client`; the same one on every call with the same client.
 * @throws {TypeError} when `client` is not a GLIDE client (a pending `createClient()`: await it first).
 *
 * @example Standalone, with `replicas`
 * ```ts
 * import { GlideClient } from "@valkey/valkey-glide";
 * import { acquire, release } from "redlease";
 * import { glide } from "redlease/glide";
 *
 * const client = await GlideClient.createClient({ addresses: [{ host: "10.0.0.5", port: 6379 }] });
 * const lease = await acquire(glide(client), "reports:daily", { replicas: 1 });
 * await release(lease);
 * ```
 *
 * @example Cluster: waiters are woken by sharded pub/sub
 * ```ts
 * import { GlideClusterClient } from "@valkey/valkey-glide";
 * import { acquire } from "redlease";
 * import { glide } from "redlease/glide";
 *
 * const cluster = await GlideClusterClient.createClient({ addresses: [{ host: "10.0.0.1", port: 7000 }] });
 * const lease = await acquire(glide(cluster), "orders:42", { waitMs: 5_000 });
 * ```
 */
export function glide(client: GlideClientLike): Driver {
  if (!has(client, "customCommand", "getPubSubMessage", "close")) {
    const promise = typeof (client as { then?: unknown } | null)?.then === "function";
    const why = promise
      ? "is a Promise: await createClient() first"
      : "must be a GLIDE client (GlideClient or GlideClusterClient): current value is not one";
    throw new TypeError(`Cannot wrap client as 'client' ${why}`);
  }
  let driver = drivers.get(client);
  if (!driver) {
    driver = has(client, "invokeScriptWithRoute")
      ? clusterDriver(client as GlideClusterClientLike)
      : standaloneDriver(client as GlideStandaloneClient);
    drivers.set(client, driver);
  }
  return driver;
}

/** GLIDE's settings for `client`, where it keeps them (read, never changed). */
function configOf(client: object): { protocol?: unknown; pubsubSubscriptions?: { callback?: unknown } } {
  return (client as { config?: object }).config ?? {};
}

/**
 * Whether the adapter can take the client's pub/sub messages: GLIDE 2.3 or later (it subscribes at run time), RESP3
 * (GLIDE's default; `ProtocolVersion.RESP2` is 1), and no `pubsubSubscriptions` callback (which would get them all).
 */
function canSubscribe(client: object, ...methods: string[]): boolean {
  const config = configOf(client);
  return has(client, ...methods) && config.protocol !== 1 && typeof config.pubsubSubscriptions?.callback !== "function";
}

/**
 * The calls of a driver, over `send`: replies as GLIDE gives them (integers as numbers, bulk strings as strings),
 * error replies in Redis's wording, and the last failure that was no reply (a timeout, a lost connection) kept for
 * `lastError` until a call succeeds again.
 */
function calls(send: (args: string[], key: string) => Promise<unknown>) {
  let last: unknown;
  const ok = (value: unknown) => {
    last = undefined;
    return value;
  };
  const failed = (e: unknown): never => {
    const wording = e instanceof Error ? redisWording(e.message) : undefined;
    if (wording === undefined) last = e;
    else (e as Error).message = wording;
    throw e;
  };
  const call = (args: string[], key: string) => send(args, key).then(ok, failed);
  const driver: Driver = {
    evalScript: (sha, keys, args) => call(["EVALSHA", sha, String(keys.length), ...keys, ...args], keys[0]),
    evalSource: (source, keys, args) => call(["EVAL", source, String(keys.length), ...keys, ...args], keys[0]),
    loadScript: async (source, key) => String(await call(["SCRIPT", "LOAD", source], key)),
    command: (key, args) => call([...args], key),
    lastError: () => last,
  };
  return { driver, call };
}

/**
 * Run `op`s one after another: each starts once the one before has settled. GLIDE carries a client's commands and its
 * subscriptions on one connection; with two subscription changes in flight at once, GLIDE 2.5.2 gave the confirmation
 * of one to another command as its reply, and each reply after it to the command after its own (an ECHO answered
 * with the ECHO before it: a script's reply could have gone to another lease's call). One at a time, it never did
 * (tests/glide_pubsub_replies.test.ts). A waiter queued behind another's subscription is late by one round trip.
 * Not covered: GLIDE's own SUBSCRIBEs of every channel at once after a reconnect still mix replies up for a moment
 * (scripts/glide_reconnect_replies.ts; docs/clients.md).
 */
function oneAtATime(): <T>(op: () => Promise<T>) => Promise<T> {
  let last: Promise<unknown> = Promise.resolve();
  return (op) => {
    const run = last.then(op, op);
    last = run.catch(() => {});
    return run;
  };
}

/** A GLIDE client's class, as far as the adapter uses it: its static `createClient`. */
interface GlideClientClass<C> {
  createClient(config: object): Promise<C>;
}

/**
 * The connection the waiters subscribe on: a second client of `client`'s class with its settings (GLIDE keeps them
 * as `config`), made at the first subscription and closed when `client.close()` is called (GLIDE has no event for
 * it, so the adapter wraps that method of the client). GLIDE carries a client's commands and its subscriptions on
 * one connection; after a dropped connection GLIDE 2.5.2 subscribes every channel again at once and hands those
 * confirmations to the commands in flight as their replies, each later reply to the command after its own
 * (scripts/glide_reconnect_replies.ts). On a connection of their own, the waiters' subscriptions meet no command of
 * redlease's but their own and the probe's `CLIENT ID`, where a stray confirmation at worst makes waiters re-check.
 * Where the class or the settings cannot be found, or the second client cannot be made, the client's own connection,
 * as before.
 */
function subscriberOf<C extends GlideClientLike>(client: C): () => Promise<C> {
  const made = (client as { constructor?: Partial<GlideClientClass<C>> }).constructor;
  const config = configOf(client);
  if (typeof made?.createClient !== "function" || typeof config !== "object" || !("addresses" in config)) {
    return () => Promise.resolve(client);
  }
  let sub: Promise<C> | undefined;
  let closed = false;
  const close = client.close;
  const shut = () => {
    closed = true;
    sub?.then((s) => s !== client && s.close(), () => {});
    sub = undefined;
  };
  client.close = function (this: C, ...args: [string?]) {
    shut();
    return close.apply(this, args);
  };
  return () => {
    // A client closed without the wrapper (before glide() wrapped it, or through the prototype): GLIDE says so in
    // `isClosed`; no subscriber is made for it, and one made already is closed (every unsubscribe comes here), or it
    // would keep the process alive.
    if (!closed && (client as { isClosed?: unknown }).isClosed === true) shut();
    if (closed) return Promise.reject(new Error("The GLIDE client was closed"));
    // (Without the client's own `pubsubSubscriptions`: the subscriber has only the waiters' channels.) A subscriber
    // that cannot be made while the client's own connection answers (the server refuses a connection more: its
    // `maxclients` reached) would fail every wait as an outage: the client's own connection then, for good, as
    // before (the read loop and the subscriptions stay on one connection).
    sub ??= made.createClient!({ ...config, pubsubSubscriptions: undefined }).then((c) => {
      if (!closed && (client as { isClosed?: unknown }).isClosed !== true) return c;
      c.close();
      throw new Error("The GLIDE client was closed");
    }, (e: unknown) => {
      if (closed) throw e;
      return client;
    });
    return sub;
  };
}

/**
 * Waiter channels over the subscriber connection: a listener set per channel (see _channels.ts), fed by one loop
 * of `getPubSubMessage()` that runs while any channel is subscribed or being subscribed, and ends when the client
 * closes.
 */
function pubsub(
  connection: () => Promise<GlideStandaloneClient | GlideClusterClientLike>,
  subscribeNow: (channel: string) => Promise<void>,
  unsubscribeNow: (channel: string) => Promise<void>,
): Pick<Driver, "subscribe" | "unsubscribe"> & { channels: Channels } {
  const inTurn = oneAtATime();
  // GLIDE keeps wanting a channel whose SUBSCRIBE timed out (a stopped server, a channel the ACL refuses), and
  // subscribes once the server answers; listen() forgets the channel, so it is unsubscribed, in the same turn (and
  // awaited: one change at a time), before the next change: while GLIDE still wants it, a later SUBSCRIBE waits for
  // it too and times out with it (a waiter queued behind a refused channel failed after 10 s).
  const subscribe = (ch: string) =>
    inTurn(() =>
      subscribeNow(ch).catch(async (e: unknown) => {
        await unsubscribeNow(ch).catch(() => {});
        throw e;
      })
    );
  const unsubscribe = (ch: string) => inTurn(() => unsubscribeNow(ch));
  const channels: Channels = new Map();
  let reading = false;
  const read = async () => {
    while (channels.size > 0) {
      let m: GlidePubSubMessage;
      try {
        m = await (await connection()).getPubSubMessage();
      } catch {
        break; // closed, or no subscriber connection (a waiter subscribing later starts again)
      }
      channels.get(String(m.channel))?.to(String(m.message));
    }
    reading = false;
  };
  return {
    channels,
    subscribe: (ch, l) => {
      const subscribed = listen(channels, ch, l, () => subscribe(ch));
      if (!reading) {
        reading = true;
        void read();
      }
      return subscribed;
    },
    unsubscribe: (ch, l) => unlisten(channels, ch, l, () => unsubscribe(ch)),
  };
}

/**
 * GLIDE reconnects after a drop and subscribes again by itself, telling no one: while waiters listen, `identity` (the
 * `CLIENT ID` of the client's connection, or of each primary's on a cluster, and the run_id: see identity()) is asked
 * every PROBE_MS, and a new one means that messages may have been lost meanwhile, so the hooks run and the waiters
 * re-check. (A user without `CLIENT ID` in its ACL: no probe, waiters re-check at their heartbeat.)
 */
function resubscriptions(identity: () => Promise<string>, channels: Channels) {
  const hooks = new Set<() => void>();
  let id: string | undefined;
  let probing = false;
  const probe = () => {
    if (channels.size === 0) {
      probing = false;
      id = undefined;
      return;
    }
    identity().then((now) => {
      if (id !== undefined && now !== id) { for (const fn of hooks) fn(); }
      id = now;
      unrefTimeout(probe, PROBE_MS);
    }, (e: unknown) => {
      if (e instanceof Error && /^NOPERM/.test(e.message)) probing = false;
      else unrefTimeout(probe, PROBE_MS);
    });
  };
  return {
    start: () => {
      if (probing || hooks.size === 0) return;
      probing = true;
      probe();
    },
    onResubscribed: (hook: () => void) => void hooks.add(hook),
  };
}

/**
 * Keyspace notification channels (a watcher's, optional: it then reads the queue at its heartbeat) are not
 * subscribed on GLIDE. GLIDE keeps sending a SUBSCRIBE the ACL refuses (docs/security.md's ACL grants redlease's own
 * channels only) until its timeout, so a subscription there would need asking `ACL DRYRUN` first; and a CI run
 * (27 Nov) saw GLIDE hand that check's `ACL WHOAMI` an object for its reply while the watch's subscriptions were being
 * made: the reply mix-up of subscription changes in flight together that oneAtATime() now prevents. Keyspace
 * subscriptions on GLIDE, with that check, are left for later; none is sent.
 */
const KEYSPACE = /^__keyspace@/;

function standaloneDriver(client: GlideStandaloneClient): Driver {
  const { driver, call } = calls((args) => client.customCommand(args, STRINGS));
  if (!canSubscribe(client, "subscribe", "unsubscribe")) return driver;
  const connection = subscriberOf(client);
  const { channels, subscribe, unsubscribe } = pubsub(
    connection,
    (ch) => connection().then((c) => c.subscribe!([ch], SUBSCRIBE_MS)),
    (ch) => connection().then((c) => c.unsubscribe!([ch], SUBSCRIBE_MS)),
  );
  // (The subscriber connection's id: GLIDE replaces that one after a drop.)
  const id = () => connection().then((c) => c.customCommand(["CLIENT", "ID"], STRINGS)).then(String, reworded);
  const probe = resubscriptions(identity(call, id), channels);
  driver.subscribe = (ch, l) =>
    KEYSPACE.test(ch)
      ? Promise.reject(new Error(`redlease/glide does not subscribe keyspace channels ('${ch}')`))
      : subscribe!(ch, l).then(probe.start);
  driver.unsubscribe = unsubscribe;
  driver.onResubscribed = probe.onResubscribed;
  return driver;
}

function clusterDriver(cluster: GlideClusterClientLike): Driver {
  // EVALSHA and EVAL are routed by their first key; WAIT and INFO go to the primary of the lease's slot (WAIT counts
  // the writes of that connection, the one EVALSHA used: GLIDE keeps one connection per node).
  const { driver, call } = calls((args, key) =>
    args[0] === "EVALSHA" || args[0] === "EVAL"
      ? cluster.customCommand(args, STRINGS)
      : args[0] === "SCRIPT"
      ? cluster.customCommand(args, { route: "allPrimaries", ...STRINGS }).then(firstOf)
      : args[0] === "CLIENT" || key === "" // CLIENT ID, and the probe's INFO (see identity())
      ? cluster.customCommand(args, { route: "allPrimaries", ...STRINGS })
      : cluster.customCommand(args, { route: { type: "primarySlotKey", key }, ...STRINGS })
  );
  // Scripts call SPUBLISH: slot-local, instead of PUBLISH, which the cluster bus copies to every node.
  const sharded: Driver = { ...driver, sharded: true, unsent };
  if (!canSubscribe(cluster, "ssubscribe", "sunsubscribe")) return sharded;
  // (The cluster client's own connections, not a second client: GLIDE moves a sharded subscription to the node
  // that serves its slot as it learns the slot map, which a client that sends commands learns at once, an idle one
  // seconds later: after a failover a second client's waiters missed the handoff message (4.8 s, their heartbeat,
  // against 1 ms; tests/cluster_failover.node.test.ts). So GLIDE's resubscription after a reconnect can still give
  // a call another's reply on a cluster client: docs/clients.md.)
  const connection = () => Promise.resolve(cluster);
  const { channels, subscribe, unsubscribe } = pubsub(
    connection,
    (ch) => connection().then((c) => c.ssubscribe!([ch], SUBSCRIBE_MS)),
    (ch) => connection().then((c) => c.sunsubscribe!([ch], SUBSCRIBE_MS)),
  );
  // The connection of every primary, where the shards' subscriptions are: one id per address, in address order.
  const ids = () => call(["CLIENT", "ID"], "").then(idsByAddress);
  const probe = resubscriptions(identity(call, ids), channels);
  return {
    ...sharded,
    subscribe: (ch, l) => subscribe!(ch, l).then(probe.start),
    unsubscribe,
    onResubscribed: probe.onResubscribed,
  };
}

/**
 * Whether a cluster call surely never ran, so that redlease sends it again while its caller waits: GLIDE had no
 * connection to the slot's node to send it on (a master that died: `ConnectionNotFoundForRoute`), or Redis answered
 * it with a redirection that GLIDE gave back (`MOVED`, `ASK`, in Redis's wording: see calls()), as GLIDE does during
 * a failover before every node knows the promoted replica.
 */
function unsent(e: unknown): boolean {
  return e instanceof Error && (/^(MOVED|ASK) /.test(e.message) || /\bConnectionNotFoundForRoute\b/.test(e.message));
}

/**
 * What the probe compares: the connection's `CLIENT ID` (`ids`) and the server's `run_id`. A restarted server numbers
 * its clients from 1 again, so the connection GLIDE makes to it often gets the id the old one had; its run_id is new.
 * (INFO refused: the ids alone.)
 */
function identity(call: (args: string[], key: string) => Promise<unknown>, ids: () => Promise<string>) {
  const runIds = (info: unknown) => (JSON.stringify(info).match(/run_id:\w+/g) ?? []).sort().join();
  return () => Promise.all([ids(), call(["INFO", "server"], "").then(runIds, () => "")]).then((both) => both.join(" "));
}

/**
 * A reply of every primary as one string that changes when any of them does: GLIDE gives it as `[{ key: address,
 * value }]` (or, from older versions, `{ [address]: value }`).
 */
function idsByAddress(reply: unknown): string {
  if (typeof reply !== "object" || reply === null) return String(reply);
  const pairs = Array.isArray(reply)
    ? reply.map((e: { key?: unknown; value?: unknown }) => [String(e?.key), String(e?.value)])
    : Object.entries(reply).map(([k, v]) => [k, String(v)]);
  return pairs.sort(([x], [y]) => (x < y ? -1 : 1)).map(([k, v]) => `${k}=${v}`).join(",");
}

/**
 * One node's reply of a command sent to several (`SCRIPT LOAD` on every primary: the same SHA1 from each), from
 * `[{ key: address, value }]` (or `{ [address]: value }`).
 */
function firstOf(reply: unknown): unknown {
  if (Array.isArray(reply)) return (reply[0] as { value?: unknown } | undefined)?.value;
  return typeof reply === "object" && reply !== null ? Object.values(reply)[0] : reply;
}

export type { Driver } from "../driver.ts";
