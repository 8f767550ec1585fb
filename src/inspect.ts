import { checkClient } from "./_acquire.ts";
import type { RedisLike } from "./_client.ts";
import { stateOf } from "./_client.ts";
import { inspectCall, keysOf } from "./_protocol.ts";
import { checkCallOptions, checkName, checkPrefix } from "./_validate.ts";
import { DEFAULT_CALL_TIMEOUT_MS } from "./force_unlock.ts";
import type { CallOptions, KeyOptions } from "./lease.ts";

/** What {@linkcode inspect} reports about one lease, read atomically. */
export interface LeaseInfo {
  /** The lease name. */
  readonly name: string;
  /** Whether any owner holds it. */
  readonly held: boolean;
  /** Owners and their reentrant hold counts (at most one owner for an exclusive lease). */
  readonly owners: ReadonlyArray<{ readonly owner: string; readonly holds: number }>;
  /** Remaining TTL in ms while held, else 0. */
  readonly remainingMs: number;
  /** The latest fence handed out for this name, or 0 when Redis keeps no record of one. */
  readonly fence: number;
  /** Queued waiters (entries of clients that died are counted until a release skips them). */
  readonly waiters: number;
}

/**
 * Read the state of the lease `name` in one round trip, without changing it.
 *
 * @param client A connected node-redis v4 client.
 * @param name The lease name.
 * @param options `prefix`, if the lease was acquired with one; `timeoutMs`, how long to wait for Redis
 *   (default 5000; then it rejects with {@linkcode RedisTimeoutError}).
 *
 * @example
 * ```ts
 * import { inspect } from "redlease";
 * const info = await inspect(client, "cron:cleanup");
 * if (info.held) console.log(`${info.owners[0].owner} holds it for ${info.remainingMs} ms`);
 * ```
 */
export async function inspect(
  client: RedisLike,
  name: string,
  options?: KeyOptions & CallOptions,
): Promise<LeaseInfo> {
  const op = "inspect lease";
  checkClient(op, client);
  checkName(op, name);
  const prefix = checkPrefix(op, options);
  const timeoutMs = checkCallOptions(op, options) ?? DEFAULT_CALL_TIMEOUT_MS;
  const until = performance.now() + timeoutMs;
  const r = await inspectCall(stateOf(client), keysOf(prefix, name), { until, name });
  const held = r.owners.length > 0;
  return { name, held, owners: r.owners, remainingMs: held ? Math.max(0, r.pttl) : 0, fence: r.fence, waiters: r.waiters };
}
