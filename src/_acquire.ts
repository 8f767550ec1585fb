// acquire() after validation, and the argument checks shared by the public entry points.
import { type ClientState, isClient, type RedisLike, stateOf } from "./_client.ts";
import { drift, FENCE_RETAIN_MS, grant, keysOf, LeaseImpl, releaseHandle } from "./_hold.ts";
import { acquire as ACQUIRE, extend as EXTEND, release as RELEASE } from "./_scripts.ts";
import { nap, unrefTimeout } from "./_timers.ts";
import { fail, type Resolved } from "./_validate.ts";
import { LeaseLostError, LockTimeoutError, ReplicationError } from "./errors.ts";
import type { Lease } from "./lease.ts";
import { acquireRedlock } from "./_redlock.ts";

/** The longest a waiter sleeps before re-checking (and re-queueing itself), ms. */
const WAIT_SLICE_MS = 10_000;
/** An idle wait queue expires after this long; every waiter refreshes it on each check. */
const QUEUE_TTL_MS = 3 * WAIT_SLICE_MS;

/** The owner string of a Lease handle from this library. */
export function ownerOf(lease: Lease): string | undefined {
  return lease instanceof LeaseImpl ? lease.owner : undefined;
}

export function checkClient(op: string, client: unknown): asserts client is RedisLike {
  if (isClient(client)) return;
  const c = client as { evalsha?: unknown; call?: unknown; send?: unknown };
  const hint = typeof c?.evalsha === "function" && typeof c?.call === "function"
    ? " (wrap an ioredis client with ioredis() from redlease/ioredis)"
    : typeof c?.send === "function"
    ? " (wrap a Bun RedisClient with bunRedis() from redlease/bun)"
    : "";
  fail(op, "client", `must be a node-redis client or a redlease Driver${hint}`, client);
}

/** A client, or (Redlock) an odd number of at least 3 clients of independent masters. */
export function checkClients(op: string, client: unknown): asserts client is RedisLike | readonly RedisLike[] {
  if (!Array.isArray(client)) return checkClient(op, client);
  if (client.length < 3 || client.length % 2 === 0) {
    fail(op, "client", "must be one client or an odd number (3, 5, 7, ...) of clients for Redlock", client, RangeError);
  }
  for (const c of client) checkClient(op, c);
  if (new Set(client).size !== client.length) fail(op, "client", "must not repeat a client", client, RangeError);
}

/** acquire() on one client or, for an array, by Redlock. */
export function acquireAny(client: RedisLike | readonly RedisLike[], o: Resolved): Promise<LeaseImpl> {
  if (!Array.isArray(client)) return acquireResolved(client as RedisLike, o);
  if (o.replicas > 0) fail("acquire lease", "replicas", "cannot be combined with Redlock (a client array)", o.replicas);
  return acquireRedlock(client, o, o.nodeTimeoutMs, o.retryDelayMs);
}

/** acquire() after validation. */
export async function acquireResolved(client: RedisLike, o: Resolved): Promise<LeaseImpl> {
  const st = stateOf(client);
  const [key, queue] = keysOf(o.prefix, o.name);
  const owner = o.owner ?? crypto.randomUUID();
  const ms = String(o.ms);
  const start = performance.now();
  let lease: LeaseImpl;
  let wrote = true; // whether our own connection wrote the grant (else a releaser's handoff did)
  if (o.waitMs > 0 && st.listening && st.subscribed(`${key}:w:${st.id}`)) {
    // This client waited for this name moments ago: it is contended, so queue at once (one round trip).
    const w = await waitQueued(st, o, key, queue, owner, start, -1);
    lease = w.lease;
    wrote = w.wrote;
    if (o.replicas > 0) await confirmReplicated(lease, o, wrote);
    return lease;
  }
  let r: number;
  try {
    r = await st.run(ACQUIRE, [key, queue], [owner, ms, "", "", ""]) as number;
  } catch (e) {
    // The reply may be lost after Redis granted it (connection dropped): an owner generated for this call is
    // ours alone, so release whatever it may hold instead of leaving a phantom holder for a whole lease.
    if (o.owner === undefined) {
      st.run(RELEASE, [key, queue], [owner, String(FENCE_RETAIN_MS), st.publish, "", "", ""]).catch(() => {});
    }
    throw e;
  }
  if (r > 0) {
    lease = grant(st, key, o.name, owner, r, o, start);
  } else {
    if (o.waitMs === 0) throw new LockTimeoutError(o.name, -1 - r, performance.now() - start);
    o.signal?.throwIfAborted();
    const w = st.canListen
      ? await waitQueued(st, o, key, queue, owner, start, -1 - r)
      : await waitPolling(st, o, key, queue, owner, start, -1 - r);
    lease = w.lease;
    wrote = w.wrote;
  }
  if (o.replicas > 0) await confirmReplicated(lease, o, wrote);
  return lease;
}

/**
 * With `replicas`, a grant counts only once that many replicas acknowledged it (WAIT on the connection that
 * wrote it, right after the write); otherwise undo it and fail.
 */
async function confirmReplicated(lease: LeaseImpl, o: Resolved, wrote: boolean): Promise<void> {
  const hold = lease.hold;
  let acked: number;
  try {
    // A handoff was written by the releaser's connection: write once more on ours so WAIT covers the grant.
    const st = hold.target as ClientState;
    if (!wrote && await st.run(EXTEND, [hold.key], [hold.owner, String(hold.ms), String(hold.fence)]) !== 1) {
      throw new LeaseLostError(o.name, "not-held");
    }
    acked = await st.waitReplicas(hold.key, o.replicas, o.replicaTimeoutMs);
  } catch (e) {
    await releaseHandle(lease).catch(() => {});
    throw e;
  }
  if (acked < o.replicas) {
    await releaseHandle(lease).catch(() => {});
    throw new ReplicationError(o.name, acked, o.replicas);
  }
}

interface Waited {
  readonly lease: LeaseImpl;
  readonly wrote: boolean;
}

/** Wait in the FIFO queue for a handoff, listening before queueing so that a handoff cannot be missed. */
async function waitQueued(
  st: ClientState,
  o: Resolved,
  key: string,
  queue: string,
  owner: string,
  start: number,
  pttl: number,
): Promise<Waited> {
  const ms = String(o.ms);
  const wid = crypto.randomUUID().replaceAll("-", "");
  const entry = `${st.id}|${wid}|${ms}|${owner}`;
  let granted: number | undefined;
  let wake: (() => void) | undefined;
  let orphaned: (() => void) | undefined;
  const channel = `${key}:w:${st.id}`;
  const listening = st.listen(channel, wid, (fence) => {
    if (orphaned) return orphaned();
    granted = fence;
    wake?.();
  });
  // Subscribing can hang while the subscriber connection reconnects: bound it by the wait and the signal.
  let subscribed = false;
  await nap(Math.max(0, start + o.waitMs - performance.now()), o.signal, (w) => {
    if (w) {
      const settled = () => {
        subscribed = true;
        w();
      };
      listening.then(settled, settled);
    }
  });
  if (!subscribed) {
    listening.then((leave) => leave(), () => {});
    o.signal?.throwIfAborted();
    throw new LockTimeoutError(o.name, pttl, performance.now() - start);
  }
  const leave = await listening;
  const cancel = async () => {
    const r = await st.run(RELEASE, [key, queue], [owner, String(FENCE_RETAIN_MS), st.publish, wid, entry, ""]);
    // An owner generated for this call is ours alone: if an attempt whose reply we lost took the lease, drop it.
    if (r === 0 && o.owner === undefined) await st.run(RELEASE, [key, queue], [owner, String(FENCE_RETAIN_MS), st.publish, "", "", ""]);
  };
  const deadline = start + o.waitMs;
  const firstQueued = performance.now();
  try {
    for (;;) {
      o.signal?.throwIfAborted();
      let t0 = performance.now();
      let wrote = false;
      if (granted === undefined) {
        const res = await st.run(ACQUIRE, [key, queue], [owner, ms, wid, entry, String(QUEUE_TTL_MS)]) as number;
        if (res > 0) granted ??= res;
        else pttl = -1 - res;
      }
      if (granted !== undefined) {
        // Handed over at some moment after we first queued: measure the lease from then, conservatively, and
        // renew at once if that leaves less than half of it.
        t0 = firstQueued;
        if (t0 + o.ms - drift(o.ms) - performance.now() < o.ms / 2) {
          t0 = performance.now();
          if (await st.run(EXTEND, [key], [owner, ms, String(granted)]) !== 1) {
            granted = undefined; // lost before we could use it: keep waiting
            continue;
          }
          wrote = true;
        }
        // Keep the subscription while we hold what we waited for: we are likely to wait here again.
        const unref = st.retain(channel);
        leave();
        const lease = grant(st, key, o.name, owner, granted, o, t0);
        lease.hold.onEnd.push(unref);
        return { lease, wrote };
      }
      const left = deadline - performance.now();
      if (left <= 0) throw new LockTimeoutError(o.name, pttl, performance.now() - start);
      await nap(Math.min(pttl < 0 ? WAIT_SLICE_MS : pttl + 1, left, WAIT_SLICE_MS), o.signal, (w) => (wake = w));
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

/** Without pub/sub (e.g. HTTP): retry with jittered exponential backoff, every sleep bounded by the holder's TTL. */
async function waitPolling(
  st: ClientState,
  o: Resolved,
  key: string,
  queue: string,
  owner: string,
  start: number,
  pttl: number,
): Promise<Waited> {
  const deadline = start + o.waitMs;
  for (let backoff = 10;; backoff = Math.min(backoff * 2, 1_000)) {
    const left = deadline - performance.now();
    if (left <= 0) throw new LockTimeoutError(o.name, pttl, performance.now() - start);
    await nap(Math.min(pttl < 0 ? backoff : pttl + 1, left, backoff * (0.5 + Math.random())), o.signal);
    o.signal?.throwIfAborted();
    const t0 = performance.now();
    const r = await st.run(ACQUIRE, [key, queue], [owner, String(o.ms), "", "", ""]) as number;
    if (r > 0) return { lease: grant(st, key, o.name, owner, r, o, t0), wrote: true };
    pttl = -1 - r;
  }
}

export function checkLease(op: string, lease: unknown): asserts lease is LeaseImpl {
  if (!(lease instanceof LeaseImpl)) fail(op, "lease", "must be a Lease returned by acquire()", lease);
}
