import { checkClient, type RedisLike, stateOf } from "./_client.ts";
import { inspectCall, keysOf } from "./_protocol.ts";
import { type LeaseHolder, type LeaseInfo, leaseInfo } from "./_info.ts";
import { checkCallOptions, checkName, checkPrefix, KEY_CALL_KEYS } from "./_validate.ts";
import { DEFAULT_CALL_TIMEOUT_MS } from "./_defaults.ts";
import type { CallOptions, KeyOptions } from "./lease.ts";

export type { LeaseHolder, LeaseInfo };

/**
 * Read the state of the lease `name` in one round trip, without changing it.
 *
 * @param client A connected node-redis v4 client.
 * @param name The lease name.
 * @param options `prefix`, if the lease was acquired with one; `timeoutMs`, how long to wait for Redis
 *   (default 5000; then it rejects with {@linkcode RedisTimeoutError}). An unreachable Redis rejects with
 *   {@linkcode RedisUnavailableError}, its `cause` the client's error.
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
  const timeoutMs = checkCallOptions(op, options, KEY_CALL_KEYS) ?? DEFAULT_CALL_TIMEOUT_MS;
  const until = performance.now() + timeoutMs;
  return leaseInfo(name, await inspectCall(stateOf(client), keysOf(prefix, name), { until, name }));
}
