import { checkClient } from "./_acquire.ts";
import type { RedisLike } from "./_client.ts";
import { stateOf } from "./_client.ts";
import { keysOf } from "./_hold.ts";
import { inspect as INSPECT } from "./_scripts.ts";
import { checkName, checkPrefix } from "./_validate.ts";
import type { KeyOptions } from "./lease.ts";

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
 * @param options `prefix`, if the lease was acquired with one.
 *
 * @example
 * ```ts
 * import { inspect } from "redlease";
 * const info = await inspect(client, "cron:cleanup");
 * if (info.held) console.log(`${info.owners[0].owner} holds it for ${info.remainingMs} ms`);
 * ```
 */
export async function inspect(client: RedisLike, name: string, options?: KeyOptions): Promise<LeaseInfo> {
  const op = "inspect lease";
  checkClient(op, client);
  checkName(op, name);
  const prefix = checkPrefix(op, options);
  const r = await stateOf(client).run(INSPECT, keysOf(prefix, name), []) as Array<string | number>;
  const owners: Array<{ owner: string; holds: number }> = [];
  for (let i = 3; i < r.length; i += 2) owners.push({ owner: String(r[i]), holds: Number(r[i + 1]) });
  const held = owners.length > 0;
  return {
    name,
    held,
    owners,
    remainingMs: held ? Math.max(0, Number(r[1])) : 0,
    fence: Number(r[0]),
    waiters: Number(r[2]),
  };
}
