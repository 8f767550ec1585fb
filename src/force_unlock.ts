import { checkClient } from "./_acquire.ts";
import type { RedisLike } from "./_client.ts";
import { stateOf } from "./_client.ts";
import { FENCE_RETAIN_MS, keysOf } from "./_hold.ts";
import { forceUnlock as FORCE_UNLOCK } from "./_scripts.ts";
import { checkName, checkPrefix } from "./_validate.ts";
import type { KeyOptions } from "./lease.ts";

/**
 * Remove every hold of every owner of the lease `name` — an operator's tool for a stuck lease. The fence record
 * is kept, so the next holder's token is still higher. If clients are waiting, the first live one is handed
 * the lease. Watchdog holders find out at their next renewal (within a third of `watchdogMs`), fixed-lease holders
 * at their next `extend()` or their local deadline; their `signal` then aborts with {@linkcode LeaseLostError}.
 *
 * @param client A connected node-redis v4 client.
 * @param name The lease name.
 * @param options `prefix`, if the lease was acquired with one.
 * @returns `true` if the lease was held.
 *
 * @example
 * ```ts
 * import { forceUnlock } from "redlease";
 * if (await forceUnlock(client, "cron:cleanup")) console.log("removed a stuck lease");
 * ```
 */
export async function forceUnlock(client: RedisLike, name: string, options?: KeyOptions): Promise<boolean> {
  const op = "force-unlock lease";
  checkClient(op, client);
  checkName(op, name);
  const prefix = checkPrefix(op, options);
  const st = stateOf(client);
  const r = await st.run(FORCE_UNLOCK, keysOf(prefix, name), [String(FENCE_RETAIN_MS), st.publish]);
  return r !== 0;
}
