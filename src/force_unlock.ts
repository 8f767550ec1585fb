import { checkClient, type RedisLike, stateOf } from "./_client.ts";
import { forceUnlockCall, keysOf } from "./_protocol.ts";
import { checkCallOptions, checkName, checkPrefix, KEY_CALL_KEYS } from "./_validate.ts";
import type { CallOptions, KeyOptions } from "./lease.ts";
import { DEFAULT_CALL_TIMEOUT_MS } from "./_defaults.ts";

// (Exported from the package since forceUnlock() came with it: it stays, defined with the other defaults.)
export { DEFAULT_CALL_TIMEOUT_MS } from "./_defaults.ts";

/**
 * Remove every hold of every owner of the lease `name` — an operator's tool for a stuck lease. The fence record
 * is kept, so the next holder's token is still higher. If clients are waiting, the first live one is handed
 * the lease. Watchdog holders find out at their next renewal (within a third of `watchdogMs`), fixed-lease holders
 * at their next `extend()` or their local deadline; their `signal` then aborts with {@linkcode LeaseLostError}.
 *
 * @param client A connected node-redis client or a {@linkcode Driver}.
 * @param name The lease name.
 * @param options `prefix`, if the lease was acquired with one; `timeoutMs`, how long to wait for Redis
 *   (default 5000; then it rejects with {@linkcode RedisTimeoutError}). An unreachable Redis rejects with
 *   {@linkcode RedisUnavailableError}, its `cause` the client's error.
 * @returns `true` if the lease was held.
 *
 * @example
 * ```ts
 * import { forceUnlock } from "redlease";
 * if (await forceUnlock(client, "cron:cleanup")) console.log("removed a stuck lease");
 * ```
 */
export async function forceUnlock(
  client: RedisLike,
  name: string,
  options?: KeyOptions & CallOptions,
): Promise<boolean> {
  const op = "force-unlock lease";
  checkClient(op, client);
  checkName(op, name);
  const prefix = checkPrefix(op, options);
  const timeoutMs = checkCallOptions(op, options, KEY_CALL_KEYS) ?? DEFAULT_CALL_TIMEOUT_MS;
  const until = performance.now() + timeoutMs;
  return await forceUnlockCall(stateOf(client), keysOf(prefix, name), { until, name }) !== "not-held";
}
