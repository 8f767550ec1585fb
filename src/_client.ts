// A client as redlease keeps it: its connection (_connection.ts) and the holds it renews and releases there (the
// Target of one Redis), with its logger and event handler (see configure()).
import type { Bound } from "./_types.ts";
import type { LeaseEventHandler } from "./events.ts";
import { emit } from "./_log.ts";
import { Connection } from "./_connection.ts";
import { type Hold, holdMap, type Target } from "./_hold.ts";
import { extendCall, releaseHeld } from "./_protocol.ts";
import { ReplicationError } from "./errors.ts";
import { isNodeRedis, nodeRedisDriver } from "./_node_redis.ts";
import { type Driver, isDriver } from "./driver.ts";
import { fail } from "./_validate.ts";

/**
 * A node-redis client as redlease takes it, by shape (node-redis is never imported): a v4 or v5 `createClient`,
 * `createCluster` or v5 `createSentinel` client, connected. A pending `connect()` (a Promise), an ioredis or Bun
 * client (wrap those with their adapter) and plain objects do not match, so passing one fails to compile.
 * Whether the client is connected cannot be told from its type: an unconnected one is refused at run time with a
 * `TypeError` that says to connect it.
 *
 * @example
 * ```ts
 * import { createClient } from "redis";
 * import type { NodeRedisClient } from "redlease";
 *
 * const client: NodeRedisClient = await createClient({ url: "redis://localhost:6379" }).connect();
 * ```
 */
export type NodeRedisClient =
  & {
    /** node-redis's raw command (its parameters differ between a client, a cluster and a sentinel). */
    sendCommand(...args: never[]): Promise<unknown>;
    /** `true` from `connect()` on (while reconnecting too), `false` before it and once closed. */
    readonly isOpen: boolean;
  }
  // A client or cluster (duplicate), or a sentinel (getMasterNode): not a v5 pool, nor a client leased from a
  // sentinel, which cannot subscribe for waiters.
  & ({ duplicate(...args: never[]): unknown } | { getMasterNode(...args: never[]): unknown });

/**
 * A client redlease accepts: a {@linkcode Driver} (what the adapters `ioredis()`, `bunRedis()`, `upstash()` and
 * `nodeRedis()` return), or a node-redis v4/v5 client (standalone, cluster or sentinel), which is wrapped
 * automatically. See {@linkcode NodeRedisClient} for what is refused at compile time.
 *
 * @example
 * ```ts
 * import { createClient } from "redis";
 * import type { RedisLike } from "redlease";
 *
 * const client: RedisLike = await createClient({ url: "redis://localhost:6379" }).connect();
 * ```
 */
export type RedisLike = Driver | NodeRedisClient;

/**
 * A TypeError before any command unless `client` is a Driver or a node-redis client that is open; the message
 * names the usual mistakes: a pending `connect()`, an unconnected or closed client, an unwrapped ioredis, Bun or
 * GLIDE client.
 *
 * @example
 * ```ts
 * checkClient("acquire lease", createClient().connect());
 * // TypeError: Cannot acquire lease as 'client' is a Promise: await it first (…)
 * ```
 */
export function checkClient(
  op: string,
  client: unknown,
  what = "client",
  closedOk = false,
): asserts client is RedisLike {
  // A client used before (it has a state): known to be a Driver or a node-redis client, so only whether it is open.
  if (states.has(client as object) && (client as NodeRedisClient).isOpen !== false) return;
  if (isDriver(client)) return;
  const candidate = client as Record<string, unknown> | null | undefined;
  const is = (...names: string[]) => names.every((name) => typeof candidate?.[name] === "function");
  let why: string;
  if (isNodeRedis(client)) {
    if (candidate!.isOpen !== false || closedOk) return;
    why =
      "is a node-redis client that is not connected: await client.connect() first (a closed client must be connected again)";
  } else if (is("then")) why = "is a Promise: await it first (`await createClient().connect()` resolves to the client)";
  else if (is("evalsha", "call")) why = 'is an ioredis client: wrap it with ioredis(client) from "redlease/ioredis"';
  else if (is("send")) why = 'is a Bun RedisClient: wrap it with bunRedis(client) from "redlease/bun"';
  else if (is("customCommand")) why = 'is a Valkey GLIDE client: wrap it with glide(client) from "redlease/glide"';
  else fail(op, what, "must be a node-redis client or a redlease Driver", client);
  throw new TypeError(`Cannot ${op} as '${what}' ${why}`);
}

const states = new WeakMap<object, ClientState>();

/** The state redlease keeps for `client`, made on its first use. */
export function stateOf(client: RedisLike): ClientState {
  let state = states.get(client);
  if (!state) states.set(client, state = new ClientState(isDriver(client) ? client : nodeRedisDriver(client)));
  return state;
}

/** Tells `events` that `hold` was handed over. (Apart: its closure costs a release without a handler nothing.) */
function handedOver(events: LeaseEventHandler, hold: Hold): () => void {
  return () => emit(events, { type: "handed-over", ...hold.event() });
}

/**
 * A client: its connection, and the holds this process has through it (one watchdog per held name and owner). One
 * object, a connection with holds, because the protocol, the waiters and the holds are all handed the same client.
 */
export class ClientState extends Connection implements Target {
  readonly holds: Map<string, Hold> = holdMap();
  readonly resumable = true;
  /** What owner strings given to this client are scoped by (see scopedOwner). */
  readonly scope: string = this.id;
  /** Who hears of this client's lease events (see configure()). */
  events: LeaseEventHandler | undefined;

  async renew(hold: Hold, ms: number, bound: Bound, exact?: boolean): Promise<boolean> {
    const args = { kind: hold.kind, owner: hold.owner, ms, fence: hold.fenceText, exact };
    if (await extendCall(this, hold.keys, args, bound) !== true) return false;
    if (hold.replicas > 0) {
      const acked = await this.waitReplicas(hold.keys.hash, hold.replicas, hold.replicaTimeoutMs, bound);
      if (acked < hold.replicas) throw new ReplicationError(hold.name, acked, hold.replicas);
    }
    return true;
  }

  release(hold: Hold, bound: Bound): Promise<boolean> {
    const args = { kind: hold.kind, owner: hold.owner, fence: hold.fenceText };
    const events = this.events;
    // With an event handler, a handoff is told as the reply is decoded (no promise more).
    const over = events && hold.told === events ? handedOver(events, hold) : undefined;
    return releaseHeld(this, hold.keys, args, bound, over);
  }
}
