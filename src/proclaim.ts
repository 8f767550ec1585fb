import { checkLease } from "./_acquire.ts";
import { ClientState } from "./_client.ts";
import { heldCallUntil } from "./_defaults.ts";
import { LeaseGroup } from "./_group.ts";
import { proclaimCall } from "./_protocol.ts";
import { checkCallOptions, checkValue, fail } from "./_validate.ts";
import type { CallOptions, Lease } from "./lease.ts";

/**
 * Publish the leader's value (an address, a shard map, a version): set if, and only if, `lease` still leads with its
 * term, and every observer ({@linkcode observe}) is told. The value belongs to the term: a later leader starts with
 * none until it proclaims its own.
 *
 * @param lease The leadership, from {@linkcode campaign}.
 * @param value A string of at most 65536 characters.
 * @param options `timeoutMs`: how long to wait for Redis (default: the lease's remaining time, at least 250 ms).
 * @returns `true` when proclaimed; `false` when the lease no longer leads (its `signal` then aborts with
 *   {@linkcode LeaseLostError}).
 * @throws {TypeError | RangeError} for an invalid lease or value, before any Redis command.
 *
 * @example
 * ```ts
 * import { campaign, proclaim } from "redlease";
 * const leadership = await campaign(client, "primary");
 * await proclaim(leadership, JSON.stringify({ url: "http://10.0.0.7:8080" }));
 * ```
 */
export async function proclaim(lease: Lease, value: string, options?: CallOptions): Promise<boolean> {
  const op = "proclaim";
  checkLease(op, lease);
  if (lease instanceof LeaseGroup || lease.kind !== "exclusive") {
    fail(op, "lease", "must be a leadership from campaign() (an exclusive lease over one name)", lease);
  }
  checkValue(op, value);
  const timeoutMs = checkCallOptions(op, options);
  const hold = lease.hold;
  if (lease.releasing || lease.endedWith !== undefined || !hold.active) return false;
  const now = performance.now();
  const bound = { until: heldCallUntil(now, hold.deadline, timeoutMs), name: hold.name };
  const client = hold.target;
  if (!(client instanceof ClientState)) fail(op, "lease", "must be on one Redis (not a Redlock group)", lease);
  const ok = await proclaimCall(client, hold.keys, { owner: hold.owner, term: hold.fenceText, value }, bound);
  if (!ok && hold.active) hold.lose("not-held");
  return ok;
}
