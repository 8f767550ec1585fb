// acquire() after validation, and the argument checks shared by the public entry points. The flow reads one way:
// attempt (one script call, bounded) → grant (a hold with its local deadline) or wait (queued, woken by one
// message, re-checking on a heartbeat) → grant. A call whose outcome is unknown is undone by its attempt id.
import { acquiredEvent, failedEvent } from "./_events.ts";
import type { LeaseEventHandler } from "./events.ts";
import { emit, log } from "./_log.ts";
import { checkClient, type ClientState, type RedisLike, stateOf } from "./_client.ts";
import { bounded } from "./_connection.ts";
import { ABORT_CLEANUP_MS, ACQUIRE_GRACE_MS, PAUSE_GRACE_MS, QUEUE_TTL_MS, RELISTEN_AFTER_MS } from "./_defaults.ts";
import { LeaseGroup } from "./_group.ts";
import { drift, grant, type Granted, LeaseImpl, releaseHandle } from "./_hold.ts";
import {
  acquireCall,
  type Acquired,
  asUnavailable,
  attemptId,
  eventKind,
  extendCall,
  isExclusive,
  keysOf,
  newOwner,
  ownerFor,
  permitsOf,
  type QueueEntry,
  type ReleaseArgs,
  releaseCall,
} from "./_protocol.ts";
import { nap, schedule, unrefTimeout } from "./_timers.ts";
import type { LeaseKeys, Resolved } from "./_types.ts";
import { checkNames, fail, resolveAcquire } from "./_validate.ts";
import { Waiter } from "./_waiter.ts";

import {
  LeaseKindError,
  LeaseLostError,
  LockTimeoutError,
  RedisTimeoutError,
  RedisUnavailableError,
  ReplicationError,
} from "./errors.ts";
import type { AcquireOptions, Lease } from "./lease.ts";

/** The owner string of a Lease handle from this library. */
export function ownerOf(lease: Lease): string | undefined {
  return lease instanceof LeaseImpl || lease instanceof LeaseGroup ? lease.owner : undefined;
}

/**
 * How the `redlease/redlock` entry plugs in: a Redlock group (from `redlock()`) carries its acquire under this
 * symbol, so that the core bundle has no Redlock code and still takes a group wherever it takes a client.
 */
export const REDLOCK: unique symbol = Symbol.for("redlease.redlock");
/** And its acquire of several names, under this one. */
export const REDLOCK_NAMES: unique symbol = Symbol.for("redlease.redlock.names");

/** Independent masters to acquire by Redlock: made by `redlock()` from `redlease/redlock`. */
export interface Redlock {
  /** The clients of the masters, in the order given. */
  readonly clients: readonly RedisLike[];
  /** @ignore */
  readonly [REDLOCK]: (opts: Resolved) => Promise<LeaseImpl>;
  /** @ignore */
  readonly [REDLOCK_NAMES]: (names: readonly string[], opts: Resolved) => Promise<LeaseGroup>;
}

export function isRedlock(c: unknown): c is Redlock {
  return typeof (c as Redlock | undefined)?.[REDLOCK] === "function";
}

/** A client, or a Redlock group. */
export function checkClients(op: string, client: unknown): asserts client is RedisLike | Redlock {
  if (isRedlock(client)) return;
  if (Array.isArray(client)) {
    fail(op, "client", "must be one client; for Redlock, pass redlock([...clients]) from redlease/redlock", client);
  }
  checkClient(op, client);
}

export function checkLease(op: string, lease: unknown): asserts lease is LeaseImpl | LeaseGroup {
  if (!(lease instanceof LeaseImpl) && !(lease instanceof LeaseGroup)) {
    fail(op, "lease", "must be a Lease returned by acquire()", lease);
  }
}

/**
 * acquire() of several names. With a Redlock group, exclusive only (refused before any command otherwise): each
 * master takes every name in one script call, which takes exclusive leases only.
 */
export function resolveNames(
  op: string,
  client: RedisLike | Redlock,
  names: readonly unknown[],
  options: unknown,
): Resolved {
  checkNames(op, names);
  const opts = resolveAcquire(op, names[0], options as AcquireOptions | undefined, ownerOf);
  if (isRedlock(client)) {
    checkRedlock(op, opts);
    if (!isExclusive(opts.kind)) {
      fail(op, "shared", "cannot be combined with several names on Redlock (they are taken exclusively)", true);
    }
  }
  return opts;
}

/** acquire() on one client, or by Redlock for a group. */
export function acquireAny(client: RedisLike | Redlock, opts: Resolved): Promise<LeaseImpl> {
  if (!isRedlock(client)) return acquireResolved(client, opts);
  checkRedlock("acquire lease", opts);
  return client[REDLOCK](opts);
}

/** The options Redlock refuses: `replicas` and `permits`. */
function checkRedlock(op: string, opts: Resolved): void {
  if (opts.replicas > 0) fail(op, "replicas", "cannot be combined with Redlock", opts.replicas);
  if (permitsOf(opts.kind) !== undefined) {
    // Quorums of permits do not bound the holders: with 3 masters and 2 permits, holders on masters {1, 2}, {2, 3}
    // and {1, 3} each have a majority while no master has more than 2.
    fail(
      op,
      "permits",
      "cannot be combined with Redlock: a majority per permit does not bound the holders",
      permitsOf(opts.kind),
    );
  }
}

/** One acquire call: what it talks to, who it is for, and its bounds. */
class Attempt {
  // (The fields the constructor sets are declared only: see Hold.)
  declare readonly state: ClientState;
  declare readonly opts: Resolved;
  declare readonly keys: LeaseKeys;
  readonly start = performance.now();
  /** When waiting ends; every command is bounded by this plus ACQUIRE_GRACE_MS. */
  declare readonly deadline: number;
  declare readonly bound: { until: number; signal: AbortSignal | undefined; name: string };
  // Written only by its own methods (public to read: a getter each would cost bytes in the core bundle).
  /** Who it acquires for: a generated owner is new with every restart(). */
  declare owner: string;
  /** Names its calls and its undo: new with every restart(). */
  id = attemptId();
  /** Whether it waited (a `queued` event was told). */
  queued = false;
  /** Whether undo() has been sent since the last call. */
  #undone = false;
  /** Set when a grant came too late to use: why a wait that then runs out is an outage (Redis is too slow to use). */
  #late: Error | undefined;
  /** Resolves (true) once the undo of the latest late grant has run in Redis; undefined after restart(). */
  #lateUndone: Promise<boolean> | undefined;

  constructor(client: RedisLike, opts: Resolved) {
    this.state = stateOf(client);
    this.opts = opts;
    this.keys = keysOf(opts.prefix, opts.name);
    this.owner = ownerFor(this.state, this.keys, opts);
    this.deadline = this.start + opts.waitMs;
    this.bound = { until: this.deadline + ACQUIRE_GRACE_MS, signal: opts.signal, name: opts.name };
  }

  /** Tell the event handler, if any, that this acquire waits (once per call); `retryMs` as Redis said. */
  wait(retryMs: number): void {
    const ev = this.state.events;
    if (!ev || this.queued) return;
    this.queued = true;
    emit(ev, {
      type: "queued",
      name: this.opts.name,
      kind: eventKind(this.opts.kind, this.opts.leader),
      owner: this.owner,
      retryMs,
    });
  }

  /**
   * One script call. When it fails, its outcome is unknown: the caller abandons the attempt. When it says that the
   * lease is held, that (not a late grant) is the reason a wait that then runs out gives: the caller says heldElsewhere().
   */
  call(entry?: QueueEntry): Promise<Acquired> {
    this.#undone = false;
    const opts = this.opts;
    const args = {
      kind: opts.kind,
      owner: this.owner,
      ms: opts.ms,
      attempt: this.id,
      entry,
      lockDelayMs: opts.lockDelayMs,
    };
    const reply = acquireCall(this.state, this.keys, args, this.bound);
    const ev = this.state.events;
    return ev ? this.#telling(reply, ev) : reply;
  }

  /** `reply`, telling `ev` of a grant it passed on. (Its own method: its closure would cost every call a context.) */
  #telling(reply: Promise<Acquired>, ev: LeaseEventHandler): Promise<Acquired> {
    return reply.then((got) => (got.passedOn && this.passedOn(ev), got));
  }

  passedOn(ev: LeaseEventHandler): void {
    emit(ev, { type: "passed-on", name: this.opts.name, kind: eventKind(this.opts.kind, this.opts.leader) });
  }

  /** Redis said the lease is held by someone: that, not a late grant, is why a wait that then runs out fails. */
  heldElsewhere(): void {
    this.#late = undefined;
  }

  /**
   * Give up this attempt because of `e`: send its undo and wait for it briefly (so that a healthy Redis has
   * dropped the queue entry when acquire rejects), then return the error to reject with.
   */
  async abandon(e: unknown, entry?: QueueEntry): Promise<unknown> {
    const failure = this.failure(e);
    if (!this.#undone) {
      const left = this.opts.signal?.aborted ? ABORT_CLEANUP_MS : this.bound.until - performance.now();
      await Promise.race([this.undo(entry), nap(Math.max(0, Math.min(left, ABORT_CLEANUP_MS * 4)), undefined)]);
    }
    return failure;
  }

  /** A grant from `reply` to a call sent at `t0`; undefined (and undone) when it is already past its deadline. */
  fromReply(reply: { fence: number; fenceText?: string }, t0: number): LeaseImpl | undefined {
    const ms = this.opts.ms;
    const lease = grant(
      this.state,
      this.granted(reply.fence, t0 + ms - drift(ms), undefined, reply.fenceText),
      this.opts,
    );
    if (lease) return lease;
    this.#late = new Error(`the lease was granted, but its reply came after the lease ran out (${ms} ms)`);
    this.#lateUndone = new Promise<boolean>((undone) => void this.undo(undefined, () => undone(true)));
    return undefined;
  }

  /**
   * Start over as a new attempt after a late grant: a retry must never be mistaken for — or re-enter onto — the
   * grant being undone. Requests may overtake one another: over HTTP, and on one connection too, where an undo whose
   * EVALSHA meets NOSCRIPT (a failover, a restart, a flush) is re-sent as EVAL after the commands sent meanwhile.
   * The undo names the old attempt, so it cannot free what the new one is granted; a generated owner is new too, so
   * the new attempt cannot re-enter the old grant either (see afterUndo()).
   */
  async restart(): Promise<void> {
    const opts = this.opts, undone = this.#lateUndone;
    if (undone) {
      this.#lateUndone = undefined;
      if (!await afterUndo(undone, opts, this.deadline)) throw this.slow();
    }
    this.id = attemptId();
    if (opts.owner === undefined) this.owner = newOwner(opts);
  }

  granted(fence: number, deadline: number, claimAt?: number, fenceText?: string): Granted {
    return {
      kind: this.opts.kind,
      keys: this.keys,
      name: this.opts.name,
      owner: this.owner,
      fence,
      fenceText,
      deadline,
      claimAt,
    };
  }

  /**
   * Give back whatever this attempt took (its queue entry, and the hold it was granted if any) once Redis
   * answers: retried on errors until its grant would have lapsed by TTL anyway. Settles at the first answer
   * (done, or failed and retried in the background); callers wait for it only briefly, if at all. `ran` is called
   * once Redis has run it (at whichever try).
   */
  undo(entry?: QueueEntry, ran?: () => void): Promise<void> {
    this.#undone = true;
    // This attempt's, even if retried after a restart.
    const args = { kind: this.opts.kind, owner: this.owner, attempt: this.id, entry };
    // Tried until the grant would have lapsed by TTL, or as long as this call waits, whichever is longer (a new attempt
    // of a fixed owner waits for it: see afterUndo).
    const ms = Math.max(this.opts.ms, this.bound.until - performance.now());
    return giveBack(this.state, this.keys, args, ms, this.opts.name, 0, ran);
  }

  /**
   * The error to reject with: the signal's reason; for an outage (no answer within the bound, or no connection) a
   * RedisUnavailableError, whatever Redis answered before (see asUnavailable); else as is.
   */
  failure(e: unknown): unknown {
    const { signal, name } = this.opts;
    if (signal?.aborted) return signal.reason;
    if (e instanceof LeaseKindError && e.lockName === "") return new LeaseKindError(name, e.why, e.found);
    return asUnavailable(e, name, this.state.lastError());
  }

  /**
   * The wait ran out: a LockTimeoutError when Redis last answered that the lease is held (`retryMs`: for how long);
   * when it last granted it too late to use, Redis is too slow to hold a lease: a RedisUnavailableError.
   */
  timeout(retryMs: number): LockTimeoutError | RedisUnavailableError {
    return this.#late ? this.slow() : new LockTimeoutError(this.opts.name, retryMs, this.waited());
  }

  /** Redis answered too late to use (a grant that came after the lease ran out, or its undo not in time). */
  slow(): RedisUnavailableError {
    const name = this.opts.name, late = this.#late;
    return new RedisUnavailableError(
      name,
      `Redis is too slow for lease '${name}': ${late?.message ?? "no answer in time"}`,
      {
        cause: late ?? this.state.lastError(),
      },
    );
  }

  waited(): number {
    return performance.now() - this.start;
  }
}

/**
 * Send the release (or undo) `args` until Redis answers: errors are retried with backoff until `ms` from now (when
 * the hold would have lapsed by TTL anyway); a timeout is not (the command is still queued in the client, and runs
 * when Redis is back, or is lost). Settles at the first answer or failure; `delayMs` postpones the first send; `ran`
 * is called once Redis has run it (at whichever try).
 */
export function giveBack(
  state: ClientState,
  keys: LeaseKeys,
  args: ReleaseArgs,
  ms: number,
  name: string,
  delayMs = 0,
  ran?: () => void,
): Promise<void> {
  const until = performance.now() + ms;
  return new Promise<void>((settled) => {
    const send = (backoff: number): void =>
      void releaseCall(state, keys, args, { until, name }).then(() => {
        ran?.();
        settled();
      }, (e) => {
        settled();
        if (!(e instanceof RedisTimeoutError) && performance.now() + backoff < until) {
          unrefTimeout(() => send(Math.min(backoff * 2, 1_000)), backoff);
        } else {
          log(
            state.logger,
            "warn",
            `redlease: lease '${name}' was not surely given back (${String(e)}); at worst it lapses by its TTL`,
            { name, error: e },
          );
        }
      });
    if (delayMs > 0) unrefTimeout(() => send(delayMs), delayMs);
    else send(50);
  });
}

/**
 * Wait, before a new attempt, for the undo of a late grant (`undone` resolves true once it has run in Redis), since
 * the undo may run after the new attempt's first call. A generated owner is new per attempt, so that undo cannot
 * touch the new attempt's hold: it waits only briefly (up to 1 s: the lease is likely free once the undo has run). A
 * fixed owner's new attempt would re-enter the grant being undone (holds count by owner, and the grant may live on
 * as a re-entry of a live hold), and the undo would then drop nothing: it waits until the undo has run, and false
 * (the caller fails with LockTimeoutError) when the wait ends at `deadline` first. An abort rejects with its reason.
 */
export async function afterUndo(undone: Promise<boolean>, opts: Resolved, deadline: number): Promise<boolean> {
  const fixed = opts.owner !== undefined;
  const until = fixed ? deadline : Math.min(deadline, performance.now() + 1_000);
  const ran = await within(undone, until - performance.now(), opts.signal);
  opts.signal?.throwIfAborted();
  return ran || !fixed;
}

/**
 * Whether `p` resolves true within `ms` (false when the time runs out or `signal` aborts first); the timer is cleared
 * as soon as `p` settles.
 */
function within(p: Promise<boolean>, ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  let end: (() => void) | undefined;
  const timeUp = nap(Math.max(0, ms), signal, (wake) => (end = wake)).then(() => false);
  return Promise.race([p.then((v) => (end?.(), v)), timeUp]);
}

/** acquire() after validation. */
export function acquireResolved(client: RedisLike, opts: Resolved): Promise<LeaseImpl> {
  const attempt = new Attempt(client, opts);
  // This client waited for this name moments ago: it is contended, so queue at once (one round trip).
  if (queues(attempt) && attempt.state.subscribed(attempt.keys)) return finish(attempt, waitQueued(attempt, -1));
  // The uncontended path: a plain try, whose reply grants the lease in the same step (no async frame: its state and
  // promises would cost every acquire, and live across the round trip). Anything else goes on in finish().
  return attempt.call().then((reply) => {
    let lease: LeaseImpl | undefined;
    try {
      lease = reply.fence === undefined ? undefined : attempt.fromReply(reply, attempt.start);
    } catch (e) {
      throw failed(attempt, e);
    }
    if (!lease) return finish(attempt, waitAfterTry(attempt, reply));
    return opts.replicas > 0 ? finish(attempt, { lease, wrote: true }) : acquiredBy(attempt, lease, true);
  }, (e) => abandoned(attempt, e));
}

/** Whether the attempt waits in the queue (else it fails at once, or polls). */
function queues(attempt: Attempt): boolean {
  return attempt.opts.waitMs > 0 && attempt.state.canListen;
}

/** After the plain try or the wait (`waiting`): the replicas' confirmation when asked for, then the lease or failure. */
async function finish(attempt: Attempt, waiting: Waited | Promise<Waited>): Promise<LeaseImpl> {
  let waited: Waited;
  try {
    waited = await waiting;
    if (attempt.opts.replicas > 0) await confirmReplicated(attempt, waited.lease, waited.wrote);
  } catch (e) {
    throw failed(attempt, e);
  }
  return acquiredBy(attempt, waited.lease, waited.wrote);
}

/** The plain try's call failed with `e`: undo it, and fail. */
async function abandoned(attempt: Attempt, e: unknown): Promise<never> {
  throw failed(attempt, await attempt.abandon(e));
}

/** After a plain try that did not grant the lease (`reply`): a timeout at once without a wait, else the wait. */
async function waitAfterTry(attempt: Attempt, reply: Acquired): Promise<Waited> {
  const opts = attempt.opts;
  if (opts.waitMs === 0) throw attempt.timeout(reply.retryMs ?? 0);
  opts.signal?.throwIfAborted();
  // A late grant, being undone: never re-checked under the same attempt (see restart()).
  if (reply.fence !== undefined) await attempt.restart();
  const retryMs = reply.retryMs ?? 0;
  return queues(attempt) ? await waitQueued(attempt, retryMs) : await waitPolling(attempt, retryMs);
}

/** The acquire took `lease` (written by its own call, or handed over): told to the event handler, if any. */
function acquiredBy(attempt: Attempt, lease: LeaseImpl, wrote: boolean): LeaseImpl {
  const ev = attempt.state.events;
  if (ev) acquiredEvent(ev, lease, attempt.start, attempt.queued, !wrote);
  return lease;
}

/** The acquire fails with `e`: told to the event handler, if any; returns `e`. */
function failed(attempt: Attempt, e: unknown): unknown {
  const ev = attempt.state.events, opts = attempt.opts;
  if (ev) failedEvent(ev, opts.name, eventKind(opts.kind, opts.leader), e, opts.signal, attempt.start);
  return e;
}

interface Waited {
  readonly lease: LeaseImpl;
  /** Whether our own connection wrote the grant (else a releaser's handoff did). */
  readonly wrote: boolean;
}

/**
 * With `replicas`, a grant counts only once that many replicas acknowledged it (WAIT on the connection that
 * wrote it, right after the write); otherwise undo it and fail.
 */
async function confirmReplicated(attempt: Attempt, lease: LeaseImpl, wrote: boolean): Promise<void> {
  const { state, keys, opts } = attempt;
  let acked: number;
  try {
    // A handoff was written by the releaser's connection: write once more on ours so WAIT covers the grant.
    const t0 = performance.now();
    if (!wrote) {
      const args = { kind: opts.kind, owner: attempt.owner, ms: opts.ms, fence: lease.hold.fence };
      if (await extendCall(state, keys, args, attempt.bound) !== true) throw new LeaseLostError(opts.name, "not-held");
      lease.hold.renewed(t0, opts.ms);
    }
    acked = await state.waitReplicas(keys.hash, opts.replicas, opts.replicaTimeoutMs, attempt.bound);
  } catch (e) {
    // Not awaited: the undo queues behind the WAIT on the same connection (Redis runs a connection's commands in
    // order), and a caller whose signal aborted or whose wait ran out is answered now; the undo, bounded by the
    // lease's time, runs once the WAIT ends.
    void releaseHandle(lease).catch(() => {});
    throw attempt.failure(e);
  }
  if (acked < opts.replicas) {
    await releaseHandle(lease).catch(() => {});
    throw new ReplicationError(opts.name, acked, opts.replicas);
  }
}

/**
 * Wait in the FIFO queue, listening before queueing so that a handoff cannot be missed. A handoff message is
 * taken up at once (no round trip) when its claim window leaves enough time; the hold then claims it in the
 * background unless it is released first. Between messages the waiter re-checks on a heartbeat of `claimMs`,
 * which also passes on a grant that its waiter never claimed.
 */
async function waitQueued(attempt: Attempt, retryMs: number): Promise<Waited> {
  for (;;) {
    const waited = await waitAsAttempt(attempt, retryMs);
    if (waited) return waited;
    // A grant came too late to use, and its undo names this attempt. That undo may run after a re-check sent
    // meanwhile (an undo re-sent after NOSCRIPT runs after it): a re-check by the same attempt would claim the grant
    // being undone, and return a lease that the undo then frees. So wait for the undo (briefly), and go on as a new
    // attempt, which it cannot free. (The grant took this waiter's entry out of the queue: a new one loses no place.)
    await attempt.restart();
    attempt.opts.signal?.throwIfAborted();
  }
}

/** What the scripts keep of an attempt that waits in the queue. */
function entryOf(attempt: Attempt): QueueEntry {
  const opts = attempt.opts;
  return {
    clientId: attempt.state.id,
    attempt: attempt.id,
    ms: opts.ms,
    claimMs: opts.claimMs,
    lockDelayMs: opts.lockDelayMs,
    kind: opts.kind,
    owner: attempt.owner,
  };
}

/**
 * Listen on the attempt's waiter channel: how to stop listening, at once when this client listens there already (no
 * promise on the contended path), else once subscribed within the wait's bound.
 */
function listen(attempt: Attempt, onMessage: Waiter["onMessage"]): (() => void) | Promise<() => void> {
  const listening = attempt.state.listen(attempt.keys, attempt.id, onMessage);
  return typeof listening === "function" ? listening : subscribing(attempt, listening);
}

/**
 * The subscription under way, bounded as every call of the attempt is (the wait plus ACQUIRE_GRACE_MS): one that is
 * not up by then is an outage, as an unanswered call is, even though Redis said "held" just before (a subscription up
 * after the deadline goes on to one last check, whose "held" is a LockTimeoutError). (Its own function: its closures
 * cost listen() nothing.)
 */
function subscribing(attempt: Attempt, listening: Promise<() => void>): Promise<() => void> {
  return bounded(listening, attempt.bound).catch((e: unknown) => {
    listening.then((leave) => leave(), () => {});
    throw attempt.failure(e);
  });
}

/** The wait is over with `lease`: stop listening, but keep the subscription while the lease is held. */
function took(attempt: Attempt, waiter: Waiter, leave: () => void, lease: LeaseImpl, wrote: boolean): Waited {
  waiter.end();
  // Keep the subscription while we hold what we waited for: we are likely to wait here again.
  const unref = attempt.state.retain(attempt.keys);
  leave();
  lease.hold.addEndHook(unref);
  return { lease, wrote };
}

/** One attempt's wait in the queue: the lease, or undefined when a grant came too late to use (it is being undone). */
// Long: one loop, each pass one check and at most one nap; the nap stays in this frame so that a contended acquire
// makes no more promises than it must.
async function waitAsAttempt(attempt: Attempt, retryMs: number): Promise<Waited | undefined> {
  const { state, opts } = attempt;
  const entry = entryOf(attempt);
  const waiter = new Waiter(entry);
  attempt.wait(retryMs);
  const listening = listen(attempt, (m) => waiter.onMessage(m));
  const leave = typeof listening === "function" ? listening : await listening;
  try {
    // Subscribed only after the wait ran out (Redis answers, slowly): its last answer, "held", stands.
    if (listening !== leave && performance.now() >= attempt.deadline) throw attempt.timeout(retryMs);
    for (;;) {
      opts.signal?.throwIfAborted();
      if (waiter.state === "granted") {
        const { fence, deadline, claimAt } = waiter.grant!; // by message
        const lease = grant(state, attempt.granted(fence, deadline, claimAt), opts);
        if (lease) return took(attempt, waiter, leave, lease, false);
        waiter.tooLate();
      }
      const version = waiter.version;
      const t0 = performance.now();
      const reply = await attempt.call(entry);
      if (reply.fence !== undefined) {
        const lease = attempt.fromReply(reply, t0);
        if (lease) return took(attempt, waiter, leave, lease, true);
        waiter.end(); // past its deadline when the reply came: undone, and this attempt is over
        leave();
        return undefined;
      }
      attempt.heldElsewhere();
      // Queued again: its entry was dropped, maybe as dead (its client's subscription is gone): subscribe again.
      // (Decided a moment later, and only once the process has read what came meanwhile: the grant message of the
      // dropped entry may be on its way, or already here and unread behind a busy event loop; see droppedUnheard.)
      if (waiter.queued(reply, t0)) {
        const relisten = () => waiter.droppedUnheard && state.relisten(attempt.keys);
        schedule(performance.now() + RELISTEN_AFTER_MS, relisten, PAUSE_GRACE_MS);
      }
      waiter.takenBack(version);
      retryMs = reply.retryMs;
      const left = attempt.deadline - performance.now();
      if (left <= 0) throw attempt.timeout(retryMs);
      if (waiter.state !== "queued") continue;
      // Sleep until the holder's TTL ends, the heartbeat, or a message (a grant, or a re-check after a resubscribe).
      // The heartbeat is at most a claim window, so that a grant the waiter ahead never claims is passed on within
      // about two of them; it also refreshes the queue's TTL, so it is never longer than a third of it.
      const wakeAt = performance.now() + Math.min(retryMs + 1, left, opts.claimMs, QUEUE_TTL_MS / 3);
      while (waiter.state === "queued" && !opts.signal?.aborted) {
        const ms = Math.min(wakeAt, waiter.recheckAt) - performance.now();
        if (ms <= 0) break;
        await nap(ms, opts.signal, (wake) => waiter.onWake(wake));
      }
      waiter.woke();
    }
  } catch (e) {
    waiter.end();
    leave();
    throw await attempt.abandon(e, entry);
  }
}

/** Without pub/sub (e.g. HTTP): retry with jittered exponential backoff, every sleep bounded by the holder's TTL. */
async function waitPolling(attempt: Attempt, retryMs: number): Promise<Waited> {
  attempt.wait(retryMs);
  for (let backoff = 10;; backoff = Math.min(backoff * 2, 1_000)) {
    const left = attempt.deadline - performance.now();
    if (left <= 0) throw attempt.timeout(retryMs);
    const signal = attempt.opts.signal;
    await nap(Math.min(retryMs < 0 ? backoff : retryMs + 1, left, backoff * (0.5 + Math.random())), signal);
    signal?.throwIfAborted();
    const t0 = performance.now();
    let reply: Acquired;
    try {
      reply = await attempt.call();
    } catch (e) {
      throw await attempt.abandon(e);
    }
    if (reply.fence !== undefined) {
      const lease = attempt.fromReply(reply, t0);
      if (lease) return { lease, wrote: true };
      await attempt.restart();
    } else {
      attempt.heldElsewhere();
      retryMs = reply.retryMs;
    }
  }
}
