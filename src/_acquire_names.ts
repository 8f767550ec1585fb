// acquire() over several names: one lease over all of them, all or nothing. Uncontended on one server, one script
// takes them all at once (or none). Otherwise they are taken one by one in name order, each through the lease
// engine (queued, woken by its release), so that two such acquires of overlapping names never deadlock: both wait
// for the lowest name they share first. Any failure gives back what was taken.
import { ABORT_CLEANUP_MS, ACQUIRE_GRACE_MS, stateOf } from "./_client.ts";
import { nap } from "./_timers.ts";
import { acquireResolved } from "./_acquire.ts";
import type { RedisLike } from "./_client.ts";
import { LeaseGroup } from "./_group.ts";
import { drift, grant, type LeaseImpl, releaseHandle } from "./_hold.ts";
import { acquireAllCall, attemptId, keysOf, ownerFor, releaseCall } from "./_protocol.ts";
import type { Resolved } from "./_validate.ts";
import { LockTimeoutError, RedisTimeoutError } from "./errors.ts";

/** acquire(client, names, o) after validation: `o.name` is the first name; `names` are distinct. */
export async function acquireNames(client: RedisLike, names: readonly string[], o: Resolved): Promise<LeaseGroup> {
  const st = stateOf(client);
  const start = performance.now();
  const keys = names.map((n) => keysOf(o.prefix, n));
  // One owner for every name (the caller's, scoped, or a new id), so that a re-entry re-enters each of them.
  const owner = ownerFor(st, keys[0], o);
  const one = { ...o, owner, exactOwner: true };
  if (o.kind === "x" && names.length > 1 && st.publish === "PUBLISH" && o.replicas === 0) {
    // One server: try all at once.
    const t0 = performance.now();
    const bound = { until: start + o.waitMs + ACQUIRE_GRACE_MS, signal: o.signal, name: o.name };
    const attempt = attemptId();
    let r: number[] | number;
    try {
      r = await acquireAllCall(st, keys, { kind: "x", owner, ms: o.ms, attempt }, bound);
    } catch (e) {
      // Unknown outcome: give back whatever this attempt took, name by name (briefly waited for).
      const undo = Promise.all(keys.map((k) => undoOn(client, k, owner, attempt, o)));
      await Promise.race([undo, nap(ABORT_CLEANUP_MS * 4, undefined)]);
      if (o.signal?.aborted) throw o.signal.reason;
      throw e instanceof RedisTimeoutError ? new LockTimeoutError(o.name, -1, performance.now() - start, { cause: e }) : e;
    }
    if (Array.isArray(r)) {
      const deadline = t0 + o.ms - drift(o.ms);
      const parts = r.map((fence, i) =>
        grant(st, { kind: "x", keys: keys[i], name: names[i], owner, fence, deadline }, o)
      );
      if (parts.every((p) => p !== undefined)) return new LeaseGroup(parts as LeaseImpl[]);
      // The reply came after the lease ran out: give it back, and take them one by one below.
      await Promise.all(parts.map((p) => p && releaseHandle(p).catch(() => false)));
    }
  }
  // One by one, in name order (the order every caller uses), each bounded by what is left of the wait.
  const order = names.map((_n, i) => i).sort((i, j) => (names[i] < names[j] ? -1 : names[i] > names[j] ? 1 : 0));
  const parts: LeaseImpl[] = new Array(names.length);
  try {
    for (const i of order) {
      const left = o.waitMs === Infinity ? Infinity : Math.max(0, Math.round(start + o.waitMs - performance.now()));
      parts[i] = await acquireResolved(client, { ...one, name: names[i], waitMs: left });
    }
  } catch (e) {
    await Promise.all(parts.map((p) => p && releaseHandle(p).catch(() => false)));
    throw e;
  }
  return new LeaseGroup(parts);
}

/** Give back what attempt `attempt` may have taken of one name (a call whose reply was lost). */
async function undoOn(client: RedisLike, keys: ReturnType<typeof keysOf>, owner: string, attempt: string, o: Resolved) {
  await releaseCall(stateOf(client), keys, { kind: "x", owner, attempt }, { until: performance.now() + o.ms, name: o.name })
    .catch(() => {});
}
