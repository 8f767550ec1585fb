/**
 * Watch any lease (exclusive, shared, permits, an election's): `redlease/watch`, an entry point of its own so that
 * code that does not import it carries none of it.
 *
 * @example
 * ```ts
 * import { watch } from "redlease/watch";
 * for await (const change of watch(client, "cron:cleanup", { signal: AbortSignal.timeout(60_000) })) {
 *   console.log(change.type, change.info.owners.map((h) => h.label ?? h.owner));
 * }
 * ```
 *
 * @module
 */
import { checkClient, type RedisLike, stateOf } from "./_client.ts";
import { FENCE_RETAIN_MS } from "./_defaults.ts";
import { follow } from "./_follow.ts";
import { type LeaseHolder, type LeaseInfo, leaseInfo } from "./_info.ts";
import { electionChannelOf, inspectCall, keysOf, type Snapshot, watchChannelOf } from "./_protocol.ts";
import { checkFollowOptions, checkName, checkPrefix } from "./_validate.ts";
import type { Driver } from "./driver.ts";
import type { KeyOptions } from "./lease.ts";

export type { LeaseHolder, LeaseInfo };
export type { NodeRedisClient, RedisLike } from "./_client.ts";
export type { Driver };
export type { KeyOptions, LeaseKind } from "./lease.ts";

/** Options of {@linkcode watch}. */
export interface WatchOptions extends KeyOptions {
  /**
   * Ends the watch: the iteration finishes (without an error) once it aborts.
   * @default {undefined}
   */
  readonly signal?: AbortSignal;
  /**
   * How often the state is read at the latest, ms (integer from 10 to 3600000). Without pub/sub (the HTTP driver)
   * this is the polling period: every change is seen at most this late. With pub/sub, grants, releases and
   * force-unlocks are told by message at once, expiries are read when the TTL read last runs out, a waiter joining
   * or leaving the queue is told by the server's keyspace notifications where the operator enabled them
   * (`notify-keyspace-events` with `K` and `z`; not on a Cluster), and this read catches what nothing tells (the
   * queue's changes elsewhere, an extension).
   * @default {2000 with pub/sub, 1000 without}
   */
  readonly pollMs?: number;
}

/** A change of a watched lease, as {@linkcode watch} yields it; `info` is the state after it. */
export type LeaseChange =
  /** The state when the watch began (the first item, and only then). */
  | { readonly type: "state"; readonly info: LeaseInfo }
  /**
   * A hold appeared (`granted`), went before its TTL ran out (`released`: a release or a force-unlock), or was
   * still there when its TTL ran out (`expired`: its holder never released it, or released it in the last
   * moments of its TTL, which a reader cannot tell apart).
   */
  | {
    readonly type: "granted" | "released" | "expired";
    readonly holder: LeaseHolder;
    readonly info: LeaseInfo;
  }
  /** The number of queued waiters changed from `was` to `info.waiters`. */
  | { readonly type: "queue"; readonly was: number; readonly info: LeaseInfo };

/** The last state a watch reported, and when it read it (performance.now() clock). */
interface Seen {
  readonly info: LeaseInfo;
  readonly at: number;
}

/** How long the watch key outlives a watcher's last read: three heartbeats and a second. */
const keyMs = (heartbeat: number) => heartbeat * 3 + 1_000;

/**
 * Watch the lease `name`, of any kind: an async iterable of its changes — its state first (`type: "state"`), then
 * each grant, release, expiry and change of the queue's length, in order, each with the state after it. Readers of
 * a lease that nobody watches pay nothing: while a watcher lives, the lease's scripts tell its grants and releases
 * on its watch channel, which they know from a key the watcher keeps (counted in an `EXISTS` the scripts make
 * anyway: no command more for anyone, watched or not). A force-unlock is told on the channel it publishes on for
 * elections; the queue's changes by keyspace notifications where the server sends them (`notify-keyspace-events`
 * with `Kz`, never set by the watcher; not on a Cluster), else at the heartbeat. Expiry is seen from the TTL the
 * watcher read: it reads the state again when it runs out. On a driver without pub/sub (HTTP) it polls every
 * `pollMs`. After the subscriber connection comes back from a drop it reads the state again, so a change made
 * meanwhile is reported then.
 *
 * What it can miss, and why: each change is found by reading the state, so a hold granted and released between two
 * reads (within one round trip after its message) is not reported; nor is a waiter that joins and leaves the queue
 * between two reads. Breaking out of the loop, or aborting `signal`, ends the watch and its subscription; timers
 * never keep the process alive.
 *
 * @param client A connected node-redis client or a {@linkcode Driver}.
 * @param name The lease name.
 * @param options See {@linkcode WatchOptions}.
 * @throws {TypeError | RangeError} at once (before any Redis command) for invalid arguments; during iteration, a
 *   Redis error, {@linkcode RedisUnavailableError} or {@linkcode RedisTimeoutError} (5 s per read) ends it with
 *   that error.
 *
 * @example Print who holds the nightly job's lease, as it changes
 * ```ts
 * import { watch } from "redlease/watch";
 * for await (const c of watch(client, "cron:nightly", { signal: AbortSignal.timeout(60_000) })) {
 *   if (c.type === "state") console.log(c.info.held ? `held by ${c.info.owners[0].owner}` : "free");
 *   else if (c.type === "queue") console.log(`${c.info.waiters} waiting (was ${c.was})`);
 *   else console.log(`${c.type}: ${c.holder.label ?? c.holder.owner} (fence ${c.info.fence})`);
 * }
 * ```
 */
export function watch(client: RedisLike, name: string, options?: WatchOptions): AsyncIterableIterator<LeaseChange> {
  const op = "watch lease";
  checkClient(op, client);
  checkName(op, name);
  const prefix = checkPrefix(op, options);
  const { signal, pollMs } = checkFollowOptions(op, options);
  const keys = keysOf(prefix, name), state = stateOf(client);
  let beat = 0;
  // Owners whose release a message told since the last read ("r<owner>"): what went is told from what expired.
  const released = new Set<string>();
  return follow<Snapshot, Seen, LeaseChange>(state, name, signal, {
    channel: watchChannelOf(keys),
    told: (message) => void (message[0] === "r" && released.add(message.slice(1))),
    // A force-unlock is told on the election channel (it publishes there anyway); a waiter joining or leaving the
    // queue, by the server's keyspace notifications, where it sends them (see keyspaceOf).
    more: async () => {
      const db = await keyspaceOf(state.driver, keys.hash);
      const out: Array<readonly [string, (message: string) => boolean]> = [[electionChannelOf(keys), () => true]];
      // (Not the queue's TTL set again by a waiter's every check: its length did not change.)
      if (db !== undefined) out.push([`__keyspace@${db}__:${keys.queue}`, (m) => m !== "expire"]);
      return out;
    },
    heartbeat: (subscribed) => (beat = pollMs ?? (subscribed ? 2_000 : 1_000)),
    // Only a subscribed watcher keeps the watch key: without a subscriber, messages would be sent for nobody.
    read: (bound, subscribed) => inspectCall(state, keys, bound, subscribed ? keyMs(beat) : undefined),
    step(snapshot, last, at) {
      const info = leaseInfo(name, snapshot);
      const out = last ? changes(last, info, at, released) : [{ type: "state" as const, info }];
      released.clear();
      // Read again when the first hold's TTL (or lock delay) runs out: an expiry is seen then.
      const left = [...info.owners, ...info.delayed].map((h) => h.remainingMs);
      return { out, last: { info, at }, ms: Math.min(...left) + 5 };
    },
  });
}

/**
 * The database index for the keyspace notification channels of the client's keys (`__keyspace@<db>__:<key>`), from
 * `CLIENT INFO` (Redis 6.2 and later), or undefined where they cannot be heard: on a Cluster (notifications are
 * published on the node of the key only, not as sharded messages, and a cluster client subscribes on any node), or
 * when the command is refused (an older server, an ACL). Whether the server sends them (`notify-keyspace-events`)
 * is the operator's to set: a watcher never changes the server's configuration, and hears nothing where it is off.
 */
async function keyspaceOf(driver: Driver, key: string): Promise<string | undefined> {
  if (driver.sharded || !driver.command) return undefined;
  try {
    return /(?:^|\s)db=(\d+)/.exec(String(await driver.command(key, ["CLIENT", "INFO"])))?.[1];
  } catch {
    return undefined;
  }
}

/** Who holds how: an exclusive holder with its fence (a new grant to the same owner is a new hold). */
const holdKey = (h: LeaseHolder, info: LeaseInfo) =>
  `${h.kind}\n${h.owner}\n${h.kind === "exclusive" ? info.fence : ""}`;

/**
 * The changes from `last` to `info`, read at `at` (`released`: the owners whose release a message told meanwhile):
 * holds gone, holds new, then the queue's length.
 */
function changes(last: Seen, info: LeaseInfo, at: number, released: ReadonlySet<string>): LeaseChange[] {
  const out: LeaseChange[] = [];
  const before = new Map(last.info.owners.map((h) => [holdKey(h, last.info), h]));
  const now = new Map(info.owners.map((h) => [holdKey(h, info), h]));
  const delayed = new Set(info.delayed.map((h) => `${h.kind}\n${h.owner}`));
  for (const [key, holder] of before) {
    if (now.has(key)) continue;
    out.push({ type: gone(holder, last, info, at, released, delayed), holder, info });
  }
  for (const [key, holder] of now) if (!before.has(key)) out.push({ type: "granted", holder, info });
  if (info.waiters !== last.info.waiters) out.push({ type: "queue", was: last.info.waiters, info });
  return out;
}

/**
 * How `holder`, in `last` and not in `info`, went. Expired: it is in its lock delay now, or nothing of the lease is
 * left although a release within 10 s would have kept its fence (expired holds take their record with them). Released: a message told
 * so, or an exclusive lease is free with the same fence kept. Else (another holds it now, or held it meanwhile, and the
 * message was lost to a subscriber reset or never sent: HTTP) by time: expired if its TTL as last read has run out.
 */
function gone(
  holder: LeaseHolder,
  last: Seen,
  info: LeaseInfo,
  at: number,
  released: ReadonlySet<string>,
  delayed: ReadonlySet<string>,
): "released" | "expired" {
  if (delayed.has(`${holder.kind}\n${holder.owner}`)) return "expired";
  if (released.has(holder.owner)) return "released";
  if (!info.held && info.delayed.length === 0) {
    // (A release keeps the fence FENCE_RETAIN_MS: no record left within that time of the last read, it expired;
    // later, no record tells nothing.)
    if (info.fence === 0 && performance.now() - last.at < FENCE_RETAIN_MS) return "expired";
    // (Not for a shared hold or a permit: another holder's release may have left the fence, with this hold expired.)
    if (info.fence === last.info.fence && holder.kind === "exclusive") return "released";
  }
  return at - last.at >= holder.remainingMs ? "expired" : "released";
}
