/**
 * What redlease needs from a Redis client. Pass a `Driver` anywhere a client is expected; node-redis clients
 * (v4 and v5: standalone, cluster, sentinel) are recognised and wrapped automatically, and the adapters under
 * `redlease/ioredis`, `redlease/bun` and `redlease/http` build one for other clients.
 *
 * Scripts are run with `EVALSHA` and sent in full only when Redis answers `NOSCRIPT` (a fresh server, a flush, a
 * restart, a failover): with `evalSource` when the driver has it, which also runs the call (one round trip),
 * else with `loadScript` followed by `evalScript` again.
 *
 * @example A driver over any client that can send raw commands (single node)
 * ```ts
 * import type { Driver } from "redlease";
 * const driver: Driver = {
 *   evalScript: (sha, keys, args) => client.send("EVALSHA", [sha, String(keys.length), ...keys, ...args]),
 *   evalSource: (source, keys, args) => client.send("EVAL", [source, String(keys.length), ...keys, ...args]),
 *   loadScript: (source) => client.send("SCRIPT", ["LOAD", source]),
 * };
 * ```
 */
export interface Driver {
  /**
   * `EVALSHA sha numkeys ...keys ...args` on the node that serves `keys[0]`. Must reject with an error whose
   * message starts with `NOSCRIPT` when the script is not cached there (redlease then sends it in full with
   * `evalSource`, or loads it and retries once). Integer replies must resolve to numbers (or strings of digits), bulk strings to
   * strings (not buffers), arrays to arrays.
   * redlease bounds every call by the caller's deadline and signal whatever the driver does; a driver that sets
   * `abortable` also receives a `signal` that aborts when redlease stops waiting, and should stop its request then.
   */
  evalScript(sha: string, keys: readonly string[], args: readonly string[], signal?: AbortSignal): Promise<unknown>;
  /**
   * `EVAL source numkeys ...keys ...args` on the node that serves `keys[0]`, replying as `evalScript` does. Used
   * only after `evalScript` failed with `NOSCRIPT`, once per script and node while the node keeps its script
   * cache: Redis caches a script run by `EVAL`, so the next `EVALSHA` of it succeeds there. This makes the first
   * call of a script on a server one round trip more than a warm one, and loads nothing the client never runs.
   * Without it, redlease calls `loadScript` and then `evalScript` again (two round trips more than a warm call).
   *
   * @default {undefined}
   * @example
   * ```ts
   * evalSource: (source, keys, args) => client.send("EVAL", [source, String(keys.length), ...keys, ...args]),
   * ```
   */
  evalSource?(source: string, keys: readonly string[], args: readonly string[], signal?: AbortSignal): Promise<unknown>;
  /**
   * `SCRIPT LOAD source` on every node that may serve `key` (every master of a cluster); resolves the SHA1. Used
   * after `NOSCRIPT` only by a driver without `evalSource`.
   */
  loadScript(source: string, key: string, signal?: AbortSignal): Promise<string>;
  /**
   * Send a raw command on the same connection and node that serve `key`, after the commands sent before it —
   * used for `WAIT` after a lease write. Needed only for the `replicas` option.
   */
  command?(key: string, args: readonly string[]): Promise<unknown>;
  /**
   * Subscribe to a channel (`SSUBSCRIBE` when `sharded`), resolving once subscribed. Without `subscribe`, waiters
   * poll with jittered backoff bounded by the holder's remaining TTL.
   */
  subscribe?(channel: string, listener: (message: string) => void): Promise<void>;
  /**
   * Register `fn` to be called each time the subscriber connection is back after a drop (reconnected and
   * re-subscribed): messages sent meanwhile were lost, so waiters re-check at once instead of at their next
   * heartbeat.
   */
  onResubscribed?(fn: () => void): void;
  /** Remove a listener added by `subscribe`, unsubscribing when it was the channel's last. */
  unsubscribe?(channel: string, listener: (message: string) => void): Promise<void>;
  /**
   * Whether a failed call surely never reached Redis (for example it was queued for a cluster node that the client
   * dropped after rediscovering the slots): redlease then sends it again, as long as its caller waits. Calls that
   * Redis refused with `CLUSTERDOWN` or `TRYAGAIN` are sent again without asking.
   */
  unsent?(error: unknown): boolean;
  /**
   * The last error the client reported about its connection (for example the `error` event of a client that is
   * reconnecting), or `undefined` once it is connected again. redlease makes it the `cause` of the
   * {@linkcode RedisTimeoutError} of a call that got no answer, so that an outage says why. The built-in drivers
   * (node-redis, ioredis) watch the client's errors without handling them: a client without an `error` listener
   * still throws them as before.
   *
   * @default {undefined}
   * @example
   * ```ts
   * let last: unknown;
   * client.on("error", (e: unknown) => (last = e));
   * client.on("ready", () => (last = undefined));
   * const driver: Driver = { ...base, lastError: () => last };
   * ```
   */
  lastError?(): unknown;
  /** Whether scripts must notify waiters with `SPUBLISH` (Redis Cluster sharded pub/sub) instead of `PUBLISH`. */
  readonly sharded?: boolean;
  /**
   * Whether `evalScript`, `evalSource` and `loadScript` honour their `signal` argument (for example by aborting a
   * `fetch`).
   */
  readonly abortable?: boolean;
}

/** Whether `c` already is a {@linkcode Driver}. */
export function isDriver(c: unknown): c is Driver {
  return typeof c === "object" && c !== null && typeof (c as Driver).evalScript === "function" &&
    typeof (c as Driver).loadScript === "function";
}
