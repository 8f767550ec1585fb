// acquire() over several names: one lease over all of them, all or nothing. Uncontended on one server, one script
// takes them all at once (or none). Otherwise they are taken one by one in name order, each through the lease
// engine (queued, woken by its release), so that two such acquires of overlapping names never deadlock: both wait
// for the lowest name they share first. Any failure gives back what was taken (retried until it would have lapsed
// anyway), without holding up the caller beyond its bounds.
import { ABORT_CLEANUP_MS, ACQUIRE_GRACE_MS, type ClientState, type RedisLike, stateOf } from "./_client.ts";
import { acquireResolved, afterUndo, giveBack } from "./_acquire.ts";
import { acquiredEvent, eventKind, failedEvent } from "./_events.ts";
import { LeaseGroup } from "./_group.ts";
import { drift, grant, type LeaseImpl, releaseHandle } from "./_hold.ts";
import {
  acquireAllCall,
  attemptId,
  holdId,
  keysOf,
  type LeaseKeys,
  newOwner,
  ownerFor,
  type ReleaseArgs,
} from "./_protocol.ts";
import { nap } from "./_timers.ts";
import type { Resolved } from "./_validate.ts";
import { LockTimeoutError, RedisTimeoutError } from "./errors.ts";

/** acquire(client, names, o) after validation: `o.name` is the first name; `names` are distinct. */
export async function acquireNames(client: RedisLike, names: readonly string[], o: Resolved): Promise<LeaseGroup> {
  const st = stateOf(client);
  const start = performance.now();
  const until = start + o.waitMs;
  const keys = names.map((n) => keysOf(o.prefix, n));
  let owner = ownerOfNames(st, keys, o);
  /** Wait briefly for give-backs (a healthy Redis has them done when acquire rejects), within the caller's bounds. */
  const settle = (p: Promise<unknown>, aborted = ABORT_CLEANUP_MS) => {
    const left = o.signal?.aborted
      ? aborted
      : Math.min(until + ACQUIRE_GRACE_MS - performance.now(), ABORT_CLEANUP_MS * 4);
    return Promise.race([p, nap(Math.max(0, left), undefined)]);
  };
  /** `e`, told to the event handler if any (the one-by-one path's acquires tell their own failures). */
  const failed = (e: unknown) => {
    const ev = st.events;
    if (ev) {
      const name = e instanceof LockTimeoutError ? e.lockName : o.name;
      failedEvent(ev, name, eventKind(o.kind, false), e, o.signal, start);
    }
    return e;
  };
  if (o.kind === "x" && names.length > 1 && st.publish === "PUBLISH" && o.replicas === 0) {
    // One server: try all at once.
    const t0 = performance.now();
    const bound = { until: until + ACQUIRE_GRACE_MS, signal: o.signal, name: o.name };
    const attempt = attemptId();
    const args = { kind: "x", owner, attempt } as const;
    // (`ran` is told once each name's undo has run in Redis.)
    const undo = (ran?: () => void) => Promise.all(keys.map((k) => giveBack(st, k, args, o.ms, o.name, 0, ran)));
    let r: number[] | number;
    try {
      r = await acquireAllCall(st, keys, { kind: "x", owner, ms: o.ms, attempt, lockDelayMs: o.lockDelayMs }, bound);
    } catch (e) {
      // Unknown outcome: give back whatever this attempt took, name by name.
      await settle(undo());
      throw failed(
        o.signal?.aborted
          ? o.signal.reason
          : e instanceof RedisTimeoutError
          ? new LockTimeoutError(o.name, -1, performance.now() - start, { cause: e })
          : e,
      );
    }
    if (Array.isArray(r)) {
      const deadline = t0 + o.ms - drift(o.ms);
      const parts = r.map((fence, i) =>
        grant(st, { kind: "x", keys: keys[i], name: names[i], owner, fence, deadline }, o)
      );
      if (parts.every((p) => p !== undefined)) {
        const ev = st.events;
        if (ev) { for (const p of parts as LeaseImpl[]) acquiredEvent(ev, p, start, false, false); }
        return new LeaseGroup(parts as LeaseImpl[]);
      }
      // The reply came after the lease ran out: undo this attempt (the holds it took, re-entries included) before
      // taking the names one by one, which would otherwise re-enter them.
      for (const p of parts) {
        if (!p) continue;
        // Dropped here without a release of its own: the undo below gives back exactly what this attempt took.
        p.hold.drop(p);
      }
      // The undo may run after the names are taken below (an undo re-sent after NOSCRIPT runs after the commands
      // sent meanwhile): wait for it as a single name's new attempt does (see afterUndo), with a new generated owner.
      let left = keys.length;
      const ran = new Promise<boolean>((all) => void undo(() => void (--left === 0 && all(true))));
      let ok: boolean;
      try {
        ok = await afterUndo(ran, o, until);
      } catch (e) {
        throw failed(e);
      }
      if (!ok) throw failed(new LockTimeoutError(o.name, -1, performance.now() - start));
      if (o.owner === undefined) owner = newOwner(o);
    } else if (o.waitMs === 0) {
      throw failed(new LockTimeoutError(names[r - 1], -1, performance.now() - start));
    }
  }
  // One by one, in name order (the order every caller uses), each bounded by what is left of the wait. A name lost
  // while a later one was awaited (its fixed lease ran out, or Redis dropped it) starts the round over.
  const order = names.map((_n, i) => i).sort((i, j) => (names[i] < names[j] ? -1 : names[i] > names[j] ? 1 : 0));
  const one = { ...o, owner, exactOwner: true };
  for (;;) {
    const parts: LeaseImpl[] = new Array(names.length);
    try {
      for (const i of order) {
        const left = o.waitMs === Infinity ? Infinity : Math.max(0, Math.round(until - performance.now()));
        parts[i] = await acquireResolved(client, { ...one, name: names[i], waitMs: left });
      }
    } catch (e) {
      // (After an abort the name that failed has waited for its own undo already: no more waiting here.)
      await settle(Promise.all(parts.map((p) => p && giveBackPart(st, p))), 0);
      throw e;
    }
    if (parts.every((p) => p.endedWith === undefined)) return new LeaseGroup(parts);
    await settle(Promise.all(parts.map((p) => giveBackPart(st, p))));
    if (o.signal?.aborted) throw failed(o.signal.reason);
    if (performance.now() >= until) throw failed(new LockTimeoutError(o.name, -1, performance.now() - start));
  }
}

/**
 * The owner for every name: the caller's string kept exactly when any of the names has a live hold of it here
 * (a `lease.owner` passed back), else scoped; a Lease's owner exactly; or one new id for all.
 */
function ownerOfNames(st: ClientState, keys: readonly LeaseKeys[], o: Resolved): string {
  if (o.owner === undefined) return newOwner(o);
  const given = o.owner;
  if (keys.some((k) => st.holds.get(holdId(k, given, o.kind))?.active)) return given;
  return ownerFor(st, keys[0], o);
}

/** Release a part taken by a failed acquire; a failed release is retried as giveBack() does. */
function giveBackPart(st: ClientState, p: LeaseImpl): Promise<unknown> {
  const h = p.hold;
  const args: ReleaseArgs = { kind: h.kind, owner: h.owner, fence: h.fenceText };
  const left = Math.max(0, h.deadline - performance.now());
  return releaseHandle(p).catch((e) => {
    if (!(e instanceof RedisTimeoutError)) return giveBack(st, h.keys, args, left, h.name, 100);
  });
}
