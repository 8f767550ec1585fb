// acquire() over several names: one lease over all of them, all or nothing. Uncontended on one server, one script
// takes them all at once (or none). Otherwise they are taken one by one in name order, each through the lease
// engine (queued, woken by its release), so that two such acquires of overlapping names never deadlock: both wait
// for the lowest name they share first. Any failure gives back what was taken (retried until it would have lapsed
// anyway), without holding up the caller beyond its bounds.
import { type ClientState, type RedisLike, stateOf } from "./_client.ts";
import { ABORT_CLEANUP_MS, ACQUIRE_GRACE_MS } from "./_defaults.ts";
import { acquireResolved, afterUndo, giveBack, isRedlock, type Redlock, REDLOCK_NAMES } from "./_acquire.ts";
import { acquiredEvent, failedEvent } from "./_events.ts";
import { LeaseGroup } from "./_group.ts";
import { drift, grant, type LeaseImpl, releaseHandle } from "./_hold.ts";
import {
  acquireAllCall,
  asUnavailable,
  attemptId,
  eventKind,
  holdId,
  isExclusive,
  keysOf,
  newOwner,
  ownerFor,
  type ReleaseArgs,
} from "./_protocol.ts";
import { nap } from "./_timers.ts";
import type { LeaseKeys, Resolved } from "./_types.ts";
import { LockTimeoutError, RedisTimeoutError, RedisUnavailableError } from "./errors.ts";

/** acquire(client, names, opts) on one client, or by Redlock for a group (see acquireRedlockNames). */
export function acquireNamesAny(
  client: RedisLike | Redlock,
  names: readonly string[],
  opts: Resolved,
): Promise<LeaseGroup> {
  return isRedlock(client) ? client[REDLOCK_NAMES](names, opts) : acquireNames(client, names, opts);
}

/** acquire(client, names, opts) after validation: `opts.name` is the first name; `names` are distinct. */
export async function acquireNames(client: RedisLike, names: readonly string[], opts: Resolved): Promise<LeaseGroup> {
  const call = new NamesCall(client, names, opts);
  if (isExclusive(opts.kind) && names.length > 1 && call.state.publish === "PUBLISH" && opts.replicas === 0) {
    // One server: try all at once.
    const group = await acquireAtOnce(call);
    if (group) return group;
  }
  return await acquireOneByOne(client, call);
}

/** One acquire of several names: its bounds, its owner, and how it fails. */
class NamesCall {
  readonly state: ClientState;
  readonly names: readonly string[];
  readonly opts: Resolved;
  readonly keys: readonly LeaseKeys[];
  readonly start = performance.now();
  /** When waiting ends. */
  readonly until: number;
  /** The owner for every name: a generated one is new after a late all-at-once grant (see acquireAtOnce). */
  owner: string;

  constructor(client: RedisLike, names: readonly string[], opts: Resolved) {
    this.state = stateOf(client);
    this.names = names;
    this.opts = opts;
    this.keys = names.map((n) => keysOf(opts.prefix, n));
    this.until = this.start + opts.waitMs;
    this.owner = ownerOfNames(this.state, this.keys, opts);
  }

  /** Wait briefly for give-backs (a healthy Redis has them done when acquire rejects), within the caller's bounds. */
  settle(p: Promise<unknown>, aborted = ABORT_CLEANUP_MS): Promise<unknown> {
    const left = this.opts.signal?.aborted
      ? aborted
      : Math.min(this.until + ACQUIRE_GRACE_MS - performance.now(), ABORT_CLEANUP_MS * 4);
    return Promise.race([p, nap(Math.max(0, left), undefined)]);
  }

  /** `e`, told to the event handler if any (the one-by-one path's acquires tell their own failures). */
  failed(e: unknown): unknown {
    const ev = this.state.events;
    if (ev) {
      const name = e instanceof LockTimeoutError ? e.lockName : this.opts.name;
      failedEvent(ev, name, eventKind(this.opts.kind, false), e, this.opts.signal, this.start);
    }
    return e;
  }

  timeout(name = this.opts.name, remainingMs = -1): LockTimeoutError {
    return new LockTimeoutError(name, remainingMs, performance.now() - this.start);
  }
}

/**
 * Every name in one script call: the group, or undefined when the names are to be taken one by one (held, or the
 * reply came after the lease ran out: then undone first, and a generated owner is new).
 */
async function acquireAtOnce(call: NamesCall): Promise<LeaseGroup | undefined> {
  const { state, keys, names, opts } = call;
  const t0 = performance.now();
  const bound = { until: call.until + ACQUIRE_GRACE_MS, signal: opts.signal, name: opts.name };
  const attempt = attemptId();
  const args = { kind: "x", owner: call.owner, attempt } as const;
  // (`ran` is told once each name's undo has run in Redis.)
  const undo = (ran?: () => void) => Promise.all(keys.map((k) => giveBack(state, k, args, opts.ms, opts.name, 0, ran)));
  let reply: number[] | number;
  try {
    const callArgs = { kind: "x", owner: call.owner, ms: opts.ms, attempt, lockDelayMs: opts.lockDelayMs } as const;
    reply = await acquireAllCall(state, keys, callArgs, bound);
  } catch (e) {
    // Unknown outcome: give back whatever this attempt took, name by name.
    await call.settle(undo());
    throw call.failed(
      opts.signal?.aborted ? opts.signal.reason : asUnavailable(e, opts.name, state.lastError()),
    );
  }
  if (!Array.isArray(reply)) {
    if (opts.waitMs === 0) throw call.failed(call.timeout(names[reply - 1]));
    return undefined;
  }
  const deadline = t0 + opts.ms - drift(opts.ms);
  const parts = reply.map((fence, i) =>
    grant(state, { kind: "x", keys: keys[i], name: names[i], owner: call.owner, fence, deadline }, opts)
  );
  if (parts.every((p) => p !== undefined)) {
    const ev = state.events;
    if (ev) { for (const p of parts as LeaseImpl[]) acquiredEvent(ev, p, call.start, false, false); }
    return new LeaseGroup(parts as LeaseImpl[]);
  }
  // The reply came after the lease ran out. Each handle is dropped without a release of its own: the undo gives
  // back exactly what this attempt took.
  for (const p of parts) p?.hold.drop(p);
  await undoLate(call, undo);
  return undefined;
}

/**
 * Undo an all-at-once attempt whose reply came after the lease ran out (the holds it took, re-entries included)
 * before the names are taken one by one, which would otherwise re-enter them. The undo may run after the names are
 * taken (an undo re-sent after NOSCRIPT runs after the commands sent meanwhile): wait for it as a single name's new
 * attempt does (see afterUndo), and go on with a new generated owner. `undo` gives back every name, telling `ran`
 * of each once it has run in Redis.
 */
async function undoLate(call: NamesCall, undo: (ran: () => void) => Promise<unknown>): Promise<void> {
  const opts = call.opts;
  let left = call.keys.length;
  const ran = new Promise<boolean>((all) => void undo(() => void (--left === 0 && all(true))));
  let ok: boolean;
  try {
    ok = await afterUndo(ran, opts, call.until);
  } catch (e) {
    throw call.failed(e);
  }
  if (!ok) {
    // Redis granted too late to use, and did not run the undo before the wait ran out: too slow, not contention.
    const why = `Redis is too slow for lease '${opts.name}': its grant came after the lease ran out`;
    throw call.failed(new RedisUnavailableError(opts.name, why, { cause: call.state.lastError() }));
  }
  if (opts.owner === undefined) call.owner = newOwner(opts);
}

/**
 * One by one, in name order (the order every caller uses), each bounded by what is left of the wait. A name lost
 * while a later one was awaited (its fixed lease ran out, or Redis dropped it) starts the round over.
 */
async function acquireOneByOne(client: RedisLike, call: NamesCall): Promise<LeaseGroup> {
  const { names, opts, state } = call;
  const order = names.map((_n, i) => i).sort((i, j) => (names[i] < names[j] ? -1 : names[i] > names[j] ? 1 : 0));
  const one = { ...opts, owner: call.owner, exactOwner: true };
  for (;;) {
    const parts: LeaseImpl[] = new Array(names.length);
    try {
      for (const i of order) {
        const left = opts.waitMs === Infinity ? Infinity : Math.max(0, Math.round(call.until - performance.now()));
        parts[i] = await acquireResolved(client, { ...one, name: names[i], waitMs: left });
      }
    } catch (e) {
      // (After an abort the name that failed has waited for its own undo already: no more waiting here.)
      await call.settle(Promise.all(parts.map((p) => p && giveBackPart(state, p))), 0);
      // The name's own wait began when the names before it were taken: waitedMs is the whole call's.
      throw e instanceof LockTimeoutError ? call.timeout(e.lockName, e.remainingMs) : e;
    }
    if (parts.every((p) => p.endedWith === undefined)) return new LeaseGroup(parts);
    await call.settle(Promise.all(parts.map((p) => giveBackPart(state, p))));
    if (opts.signal?.aborted) throw call.failed(opts.signal.reason);
    if (performance.now() >= call.until) throw call.failed(call.timeout());
  }
}

/**
 * The owner for every name: the caller's string kept exactly when any of the names has a live hold of it here
 * (a `lease.owner` passed back), else scoped; a Lease's owner exactly; or one new id for all. `target` is a client
 * or a Redlock group.
 */
export function ownerOfNames(
  target: Parameters<typeof ownerFor>[0],
  keys: readonly LeaseKeys[],
  opts: Resolved,
): string {
  if (opts.owner === undefined) return newOwner(opts);
  const given = opts.owner;
  if (keys.some((k) => target.holds.get(holdId(k, given, opts.kind))?.active)) return given;
  return ownerFor(target, keys[0], opts);
}

/** Release a part taken by a failed acquire; a failed release is retried as giveBack() does. */
function giveBackPart(state: ClientState, part: LeaseImpl): Promise<unknown> {
  const hold = part.hold;
  const args: ReleaseArgs = { kind: hold.kind, owner: hold.owner, fence: hold.fenceText };
  const left = Math.max(0, hold.deadline - performance.now());
  return releaseHandle(part).catch((e) => {
    if (!(e instanceof RedisTimeoutError)) return giveBack(state, hold.keys, args, left, hold.name, 100);
  });
}
