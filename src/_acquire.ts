// acquire() after validation, and the argument checks shared by the public entry points.
import { isClient, type NodeRedisLike, stateOf } from "./_client.ts";
import { drift, FENCE_RETAIN_MS, grant, keysOf, LeaseImpl } from "./_hold.ts";
import { acquire as ACQUIRE, extend as EXTEND, release as RELEASE } from "./_scripts.ts";
import { unrefTimeout } from "./_timers.ts";
import { fail, type Resolved } from "./_validate.ts";
import { LockTimeoutError } from "./errors.ts";
import type { Lease } from "./lease.ts";

/** The longest a waiter sleeps before re-checking (and re-queueing itself), ms. */
const WAIT_SLICE_MS = 10_000;
/** An idle wait queue expires after this long; every waiter refreshes it on each check. */
const QUEUE_TTL_MS = 3 * WAIT_SLICE_MS;

/** The owner string of a Lease handle from this library. */
export function ownerOf(lease: Lease): string | undefined {
  return lease instanceof LeaseImpl ? lease.owner : undefined;
}

export function checkClient(op: string, client: unknown): asserts client is NodeRedisLike {
  if (!isClient(client)) fail(op, "client", "must be a connected node-redis v4 client", client);
}

/** acquire() after validation. */
export async function acquireResolved(client: NodeRedisLike, o: Resolved): Promise<LeaseImpl> {
  const st = stateOf(client);
  const [key, queue] = keysOf(o.prefix, o.name);
  const owner = o.owner ?? crypto.randomUUID();
  const ms = String(o.ms);
  const start = performance.now();
  const r = await st.run(ACQUIRE, [key, queue], [owner, ms, "", "", ""]) as number;
  if (r > 0) return grant(st, key, o.name, owner, r, o.ms, o.watchdog, start);
  if (o.waitMs === 0) throw new LockTimeoutError(o.name, -1 - r, performance.now() - start);
  o.signal?.throwIfAborted();

  // Wait in the queue. Listen before queueing, so a handoff cannot be missed.
  const wid = crypto.randomUUID().replaceAll("-", "");
  const entry = `${st.id}|${wid}|${ms}|${owner}`;
  let granted: number | undefined;
  let wake: (() => void) | undefined;
  let orphaned: (() => void) | undefined;
  const leave = await st.listen(`${key}:w:${st.id}`, wid, (fence) => {
    if (orphaned) return orphaned();
    granted = fence;
    wake?.();
  });
  const cancel = () => st.run(RELEASE, [key, queue], [owner, String(FENCE_RETAIN_MS), "PUBLISH", wid, entry]);
  const deadline = start + o.waitMs;
  const firstQueued = performance.now();
  let pttl = -1 - r;
  try {
    for (;;) {
      o.signal?.throwIfAborted();
      if (granted === undefined) {
        const res = await st.run(ACQUIRE, [key, queue], [owner, ms, wid, entry, String(QUEUE_TTL_MS)]) as number;
        if (res > 0) granted ??= res;
        else pttl = -1 - res;
      }
      if (granted !== undefined) {
        // Handed over at some moment after we first queued: measure the lease from then, conservatively, and
        // renew at once if that leaves less than half of it.
        let t0 = firstQueued;
        if (t0 + o.ms - drift(o.ms) - performance.now() < o.ms / 2) {
          t0 = performance.now();
          if (await st.run(EXTEND, [key], [owner, ms]) !== 1) {
            granted = undefined; // lost before we could use it: keep waiting
            continue;
          }
        }
        leave();
        return grant(st, key, o.name, owner, granted, o.ms, o.watchdog, t0);
      }
      const left = deadline - performance.now();
      if (left <= 0) throw new LockTimeoutError(o.name, pttl, performance.now() - start);
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          o.signal?.removeEventListener("abort", done);
          wake = undefined;
          resolve();
        };
        const timer = unrefTimeout(done, Math.min(pttl < 0 ? WAIT_SLICE_MS : pttl + 1, left, WAIT_SLICE_MS));
        o.signal?.addEventListener("abort", done, { once: true });
        wake = done;
      });
    }
  } catch (e) {
    // Leave the queue; if the lease was handed to us meanwhile, pass it on.
    try {
      await cancel();
      leave();
    } catch {
      // Redis did not answer: our entry may still be queued. Keep listening until the queue would have expired,
      // and pass on a late handoff, so a dead entry never holds the lease for a whole lease period.
      const timer = unrefTimeout(leave, QUEUE_TTL_MS);
      orphaned = () => {
        clearTimeout(timer);
        cancel().catch(() => {}).finally(leave);
      };
    }
    throw e;
  }
}

export function checkLease(op: string, lease: unknown): asserts lease is LeaseImpl {
  if (!(lease instanceof LeaseImpl)) fail(op, "lease", "must be a Lease returned by acquire()", lease);
}
