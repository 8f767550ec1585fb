// A Hold is one (target, name, owner) that this process holds, however many reentrant Lease handles share it.
// It owns its clock and its one timer (the next renewal, or the local deadline) and every change of its state:
// granted, re-entered, renewed, extended, lost, released, a handle attached or dropped, an end hook added, a handler
// told. Its state is private: others call its methods (and read its getters), never write its fields.
import type { Bound, Kind, LeaseKeys, Logger } from "./_types.ts";
import type { HoldEventBase, LeaseEventHandler } from "./events.ts";
import { emit, log } from "./_log.ts";
import { heldCallUntil } from "./_defaults.ts";
import { eventKind, holdId, kindName, tokenOf } from "./_protocol.ts";
import { type LeaseLossReason, LeaseLostError, RedisTimeoutError } from "./errors.ts";
import type { Lease, LeaseKind } from "./lease.ts";
import { cancel, type Due, schedule } from "./_timers.ts";
import { Ending } from "./_ending.ts";

/** Redlock's clock-drift allowance: 1 % of the lease plus 2 ms. */
export function drift(ms: number): number {
  return Math.floor(ms * 0.01) + 2;
}

/** The time source of a hold: performance.now() and the shared unref'd timer, or a fake one in tests. */
export interface Clock {
  now(): number;
  set(fn: () => void, ms: number): unknown;
  clear(timer: unknown): void;
}

export const realClock: Clock = {
  now: () => performance.now(),
  set: (fn, ms) => schedule(performance.now() + ms, fn),
  clear: (d) => cancel(d as Due),
};

/** Where a hold lives: one Redis (a ClientState) or a Redlock group of independent masters. */
export interface Target {
  /** This process's holds there, one per (key, owner). */
  readonly holds: Map<string, Hold>;
  /**
   * Renew the hold's TTL to `ms` if its owner still holds it (only lengthening it, unless `exact`): true; false
   * when it is not held. Rejects when that cannot be known within `bound` or is not enough (unreachable, too
   * few replicas acknowledged, no quorum).
   */
  renew(hold: Hold, ms: number, bound: Bound, exact?: boolean): Promise<boolean>;
  /** Release one hold of the owner; true when it was held. */
  release(hold: Hold, bound: Bound): Promise<boolean>;
  /** Whether a hold here can be named by a token and resumed elsewhere (one Redis: yes; a Redlock group: no). */
  readonly resumable: boolean;
  /** Where messages about holds here go (see configure()). */
  readonly logger: Logger | null;
  /** The last error the Redis client reported about its connection, if it tells (one Redis: see Driver.lastError). */
  lastError?(): unknown;
  /** Who hears of what happens to holds here (see configure()), if anyone. */
  readonly events: LeaseEventHandler | undefined;
}

/**
 * A target's map of holds. It keeps one entry that is never a hold (under "", which no holdId() is): V8 shrinks a
 * Map that empties and grows it again on the next insert, two reallocations on every acquire + release of a client
 * that holds nothing else.
 */
export function holdMap(): Map<string, Hold> {
  return new Map([["", undefined as unknown as Hold]]);
}

/** What a grant needs to know of the acquire options. */
export interface GrantOptions {
  readonly ms: number;
  readonly watchdog: boolean;
  readonly replicas: number;
  readonly replicaTimeoutMs: number;
  /** A leadership (campaign): events say so. */
  readonly leader?: boolean;
}

/** One grant from Redis, as the acquire path learned it. */
export interface Granted {
  readonly kind: Kind;
  readonly keys: LeaseKeys;
  readonly name: string;
  readonly owner: string;
  readonly fence: number;
  /** The fence's decimal text, where the reply gave it so. */
  readonly fenceText?: string;
  /** Conservative local deadline of the grant (performance.now() clock). */
  readonly deadline: number;
  /** A handed-over grant not claimed yet: claim it (renew) at this time unless it has ended by then. */
  readonly claimAt?: number;
}

/** The handles of a hold that has none yet (shared, never written: see Hold#attach). */
const NO_HANDLES: LeaseImpl[] = [];

/** One hold of this process on one target: see the top of this file. */
export class Hold {
  // What the hold is: fixed at the grant. (Declared, and set by the constructor only: a field declared without
  // `declare` would be defined as undefined first, on every grant.)
  /** Where it lives. */
  declare readonly target: Target;
  /** Its key in `target.holds` (see holdId()). */
  declare readonly id: string;
  declare readonly clock: Clock;
  /** Exclusive, shared or a permit (the scripts that renew and release it depend on it). */
  declare readonly kind: Kind;
  declare readonly keys: LeaseKeys;
  declare readonly name: string;
  declare readonly owner: string;
  declare readonly fence: number;
  /** Renewals count only once this many replicas acknowledged them (0: no WAIT). */
  declare readonly replicas: number;
  declare readonly replicaTimeoutMs: number;
  /** A leadership (campaign). */
  declare readonly leader: boolean;

  // Its state: changed only by the methods below.
  /** The live Lease handles on this hold (nearly always just one). */
  #handles: LeaseImpl[] = NO_HANDLES;
  #lost = false;
  /** Why it was lost (set by lose()). */
  #lostWith: LeaseLostError | undefined;
  #timer: unknown;
  #renewing = false;
  /** When the renewal in flight was sent (clock.now() time). */
  #sentAt = 0;
  /** The last renewal's failure, until a renewal succeeds: the cause of a loss as "unreachable". */
  #failure: unknown;
  /** Conservative local deadline, clock.now() time. */
  #deadline: number;
  /** TTL set on renewal (watchdog) or the fixed lease. */
  #ms: number;
  #watchdog: boolean;
  /** When to claim a handed-over grant; undefined once claimed (or never handed over). */
  #claimAt: number | undefined;
  #fenceText: string | undefined;
  /** When this process got the hold (clock.now()); -1 until an event handler needs it. */
  #since: number;
  /**
   * The event handler told of a handle on it (see tell()): only it hears of the hold's renewals and end (a handler
   * registered in its place was not told of the start, and hears nothing of it).
   */
  #told: LeaseEventHandler | undefined;
  /**
   * Run when this process's hold ends (final release or loss), after the release command; made on first use. A
   * final release settles once what they return has settled (an election's announcement of its end, say).
   */
  #endHooks: Array<() => unknown> | undefined;
  /** Aborted when the hold stops here (see `ending`); made on first use. */
  #ending: AbortController | undefined;

  constructor(target: Target, id: string, got: Granted, opts: GrantOptions, clock: Clock = realClock) {
    this.target = target;
    this.id = id;
    this.clock = clock;
    this.kind = got.kind;
    this.keys = got.keys;
    this.name = got.name;
    this.owner = got.owner;
    this.fence = got.fence;
    this.#fenceText = got.fenceText;
    this.#deadline = got.deadline;
    this.#claimAt = got.claimAt;
    this.#ms = opts.ms;
    this.#watchdog = opts.watchdog;
    this.replicas = opts.replicas;
    this.replicaTimeoutMs = opts.replicaTimeoutMs;
    this.leader = opts.leader === true;
    // (Read only for an event handler: a hold without one costs no clock read.)
    this.#since = target.events ? clock.now() : -1;
  }

  /** The fence in decimal, as scripts take it (converting a 16-digit number each release is a measurable cost). */
  get fenceText(): string {
    return this.#fenceText ??= String(this.fence);
  }
  /** Conservative local deadline, performance.now() clock. */
  get deadline(): number {
    return this.#deadline;
  }
  /** TTL set on renewal (watchdog) or the fixed lease. */
  get ms(): number {
    return this.#ms;
  }
  get watchdog(): boolean {
    return this.#watchdog;
  }
  /** Whether this is a handed-over grant that has not been claimed yet. */
  get claiming(): boolean {
    return this.#claimAt !== undefined;
  }
  get active(): boolean {
    return !this.#lost && this.#handles.length > 0;
  }
  get lost(): boolean {
    return this.#lost;
  }
  /** The event handler told of a handle on it, if any (see tell()). */
  get told(): LeaseEventHandler | undefined {
    return this.#told;
  }

  /** What every event about this hold says (built only for a handler). */
  event(): HoldEventBase {
    return { name: this.name, kind: eventKind(this.kind, this.leader), owner: this.owner, fence: this.fence };
  }

  /**
   * A reentrant grant to the same owner (same fence): the script only ever lengthens the TTL (PEXPIRE GT). A
   * handed-over grant joining the hold keeps its claim due.
   */
  reenter(deadline: number, opts: GrantOptions, claimAt?: number): void {
    this.#deadline = Math.max(this.#deadline, deadline);
    if (claimAt !== undefined) this.#claimAt = Math.min(this.#claimAt ?? claimAt, claimAt);
    if (opts.watchdog) {
      // Watchdog holds keep the key alive for the longest period any of them asked for.
      this.#ms = this.#watchdog ? Math.max(this.#ms, opts.ms) : opts.ms;
      this.#watchdog = true;
    }
  }

  /** A new handle on this hold (see grant()): its timer is armed for it. */
  attach(lease: LeaseImpl): void {
    // (The first handle makes an array of one: an empty one grown by push() would be made room for 17.)
    if (this.#handles === NO_HANDLES) this.#handles = [lease];
    else this.#handles.push(lease);
    this.#arm();
  }

  /** Take `lease` off this hold; true when it was the last handle. */
  #detach(lease: LeaseImpl): boolean {
    const handles = this.#handles;
    // (Nearly always its only handle: the array is dropped, not emptied, which V8 does by trimming it in the runtime.)
    if (handles.length === 1 && handles[0] === lease) this.#handles = NO_HANDLES;
    else if (handles[handles.length - 1] === lease) handles.pop();
    else {
      const i = handles.indexOf(lease);
      if (i >= 0) handles.splice(i, 1);
    }
    return this.#handles.length === 0;
  }

  /**
   * Drop `lease` without releasing it: its acquire undoes the grant itself, or (resume) the hold is another
   * process's too. The hold stops here with its last handle.
   */
  drop(lease: LeaseImpl): void {
    if (this.#detach(lease)) this.#stop();
  }

  /** Run `hook` when this process's hold ends (see #endHooks). */
  addEndHook(hook: () => unknown): void {
    (this.#endHooks ??= []).push(hook);
  }

  /**
   * `handler` is told of the start of `lease` (acquired, or resumed, at `startedAt`): from now on only it hears of
   * this hold's renewals and end, and of the handle's release. Returns whether it had been told of this hold
   * already (a re-entry, or a resume that joined it): its start is then not new to it.
   */
  tell(handler: LeaseEventHandler, lease: LeaseImpl, startedAt: number): boolean {
    const again = this.#told === handler;
    if (this.#since < 0) this.#since = startedAt;
    this.#told = handler;
    lease.toldBy(handler);
    return again;
  }

  /** Redis reset the TTL to `ms` by a renewal or claim sent at `t0`. */
  renewed(t0: number, ms: number): void {
    this.#claimAt = undefined;
    this.#deadline = Math.max(this.#deadline, t0 + ms - drift(ms));
    this.#arm();
  }

  /** Redis set the TTL to `ms` by an extend() sent at `t0`: the deadline is exactly that, even if earlier. */
  extended(t0: number, ms: number): void {
    this.#claimAt = undefined;
    this.#deadline = t0 + ms - drift(ms);
    if (!this.#watchdog) this.#ms = ms;
    this.#arm();
  }

  /** Arm the one timer: the claim or the next renewal (unless one is in flight), else the deadline. */
  #arm(): void {
    if (this.#timer !== undefined) this.clock.clear(this.#timer);
    this.#timer = undefined;
    if (!this.active) return;
    const now = this.clock.now();
    if ((this.#watchdog || this.#claimAt !== undefined) && !this.#renewing) {
      const ms = this.#ms;
      const at = this.#claimAt ?? Math.min(this.#deadline, this.#deadline - ms + drift(ms) + Math.floor(ms / 3));
      this.#timer = this.clock.set(() => void this.#renew(), at - now);
    } else {
      this.#timer = this.clock.set(() => this.#guard(false), this.#deadline - now);
    }
  }

  /**
   * The deadline guard: lose the hold once its deadline has passed. While a renewal is in flight it first waits one
   * turn of the event loop (`turned`), never more: the renewal's reply may have come while the process was busy
   * past the deadline (timers run before replies are read), and a renewal that succeeded in time keeps the hold.
   */
  #guard(turned: boolean): void {
    this.#timer = undefined;
    if (this.clock.now() < this.#deadline) return this.#arm();
    if (this.#renewing && !turned) {
      this.#timer = this.clock.set(() => this.#guard(true), 1);
      return;
    }
    this.#timedOut();
  }

  /**
   * The deadline passed without a renewal: lost as "unreachable" (a fixed lease: "expired"), with the last renewal's
   * failure as its cause, or else a RedisTimeoutError for the renewal in flight (its own cause: the client's last
   * error, if it reported one).
   */
  #timedOut(): void {
    if (!this.#watchdog) return this.lose("expired", this.#failure);
    const ms = this.#renewing ? this.#deadline - this.#sentAt : 0;
    const lastError = this.target.lastError?.();
    this.lose("unreachable", this.#failure ?? new RedisTimeoutError(this.name, ms, { cause: lastError }));
  }

  async #renew(): Promise<void> {
    this.#timer = undefined;
    if (!this.active) return;
    if (this.clock.now() >= this.#deadline) return this.#timedOut();
    this.#renewing = true;
    this.#arm(); // the deadline guard while the renewal is in flight
    const t0 = this.#sentAt = this.clock.now();
    let held: boolean;
    try {
      held = await this.target.renew(this, this.#ms, { until: this.#deadline, name: this.name, signal: this.ending });
    } catch (e) {
      this.#renewing = false;
      if (this.active) this.#renewFailed(e);
      return;
    }
    this.#renewing = false;
    if (!this.active) return;
    if (!held) return this.lose("not-held");
    this.#failure = undefined;
    this.renewed(t0, this.#ms);
    const ev = this.target.events;
    if (ev && this.#told === ev) emit(ev, { type: "renewed", ...this.event(), ttlMs: this.#ms });
  }

  /** Redis unreachable or erroring: keep trying until the local deadline, then give the lease up. */
  #renewFailed(error: unknown): void {
    this.#failure = error;
    const left = this.#deadline - this.clock.now();
    const ev = this.target.events;
    if (ev && this.#told === ev) {
      emit(ev, { type: "renewal-failed", ...this.event(), error, leftMs: Math.max(0, left) });
    }
    if (left <= 0) return this.lose(this.#watchdog ? "unreachable" : "expired", error);
    if (this.#timer !== undefined) this.clock.clear(this.#timer);
    this.#timer = this.clock.set(() => void this.#renew(), Math.min(left, Math.max(10, Math.floor(this.#ms / 10))));
    // (The message is built only for a debug logger: a retried renewal costs nothing more without one.)
    if (this.target.logger?.debug) {
      log(
        this.target.logger,
        "debug",
        `redlease: renewing lease '${this.name}' failed; retrying for ${Math.round(left)} ms`,
        { name: this.name, error },
      );
    }
  }

  /** Run the end hooks (once); a promise when some of them are still settling. */
  #runEndHooks(): Promise<unknown> | undefined {
    const hooks = this.#endHooks;
    this.#endHooks = undefined;
    const pending = hooks?.map((hook) => hook()).filter((r) => r instanceof Promise);
    return pending?.length ? Promise.all(pending).catch(() => {}) : undefined;
  }

  lose(why: LeaseLossReason, cause?: unknown): void {
    if (this.#lost) return;
    this.#lost = true;
    this.#stop();
    this.#runEndHooks();
    const reason = this.#lostWith = new LeaseLostError(this.name, why, cause === undefined ? undefined : { cause });
    for (const handle of this.#handles.slice()) handle.end(reason); // a copy: a handle's abort listener may release it
    if (this.target.logger?.debug) {
      log(this.target.logger, "debug", `redlease: lease '${this.name}' lost (${why})`, {
        name: this.name,
        why,
        error: cause,
      });
    }
    const ev = this.target.events;
    if (ev && this.#told === ev) this.tellLost(ev);
  }

  /** Tell `ev` that this hold was lost (by lose(), or once it is told of a hold lost before its start was told). */
  tellLost(ev: LeaseEventHandler): void {
    const error = this.#lostWith!;
    emit(ev, { type: "lost", ...this.event(), reason: error.why, error, heldMs: this.clock.now() - this.#since });
  }

  /**
   * Release one handle of this hold (its release(), bounded by `timeoutMs`, by default the lease's remaining time,
   * at least MIN_CALL_MS): the last handle's release ends the hold here.
   */
  release(lease: LeaseImpl, timeoutMs: number | undefined): Promise<boolean> {
    const now = performance.now();
    const until = heldCallUntil(now, this.#deadline, timeoutMs);
    const final = this.#detach(lease);
    // Sent before the hold stops, so that the call's bound takes the shared timer over from the hold's renewal.
    const sent = this.target.release(this, { until, name: this.name });
    if (final) this.#stop();
    const ev = this.target.events;
    // Told of a handle that was told acquired, and of the end of a hold that was (a lost hold told its end already).
    if (ev && (final ? this.#told : lease.told) === ev && !this.#lost) {
      // (One object, not a spread of event(): the release of every lease builds it.)
      emit(ev, {
        type: "released",
        name: this.name,
        kind: eventKind(this.kind, this.leader),
        owner: this.owner,
        fence: this.fence,
        final,
        heldMs: now - this.#since,
      });
    }
    return this.#endHooks ? this.#hooksAfter(sent) : sent;
  }

  /**
   * `sent`, settled once the end hooks have run if the hold has ended by then. (Its own method: its closure would cost
   * every release a context.)
   */
  #hooksAfter(sent: Promise<boolean>): Promise<boolean> {
    return sent.finally(() => this.#handles.length === 0 ? this.#runEndHooks() : undefined);
  }

  /**
   * Aborts when this hold stops here (its final release is sent, it is lost, or its handle is dropped). Calls still in
   * flight for the hold carry it — renewals, extend(), a Redlock master's late grant — so that none of them is sent
   * again afterwards (after NOSCRIPT, or as never sent): a call re-sent then would run after the release. Made on
   * first use: a lease released before its first renewal never needs one.
   */
  get ending(): AbortSignal {
    return (this.#ending ??= new AbortController()).signal;
  }

  #stop(): void {
    this.#ending?.abort();
    if (this.#timer !== undefined) this.clock.clear(this.#timer);
    this.#timer = undefined;
    if (this.target.holds.get(this.id) === this) this.target.holds.delete(this.id);
  }
}

/** A handle on a hold: what acquire() returns for one name. Its signal and release are those of every handle. */
export class LeaseImpl extends Ending implements Lease {
  // (Declared, and set by the constructor only: see Hold.)
  declare readonly hold: Hold;
  declare readonly name: string;
  declare readonly owner: string;
  declare readonly fence: number;
  /** The event handler told it was acquired (see Hold.tell()). */
  #told: LeaseEventHandler | undefined;

  constructor(hold: Hold, name: string, owner: string, fence: number) {
    super();
    this.hold = hold;
    this.name = name;
    this.owner = owner;
    this.fence = fence;
  }

  get names(): readonly string[] {
    return [this.name];
  }
  get fences(): readonly number[] {
    return [this.fence];
  }
  get kind(): LeaseKind {
    return kindName(this.hold.kind);
  }
  /** The event handler told it was acquired, if any: only that one hears of its release. */
  get told(): LeaseEventHandler | undefined {
    return this.#told;
  }
  /** `handler` was told this handle was acquired (by its hold's tell()). */
  toldBy(handler: LeaseEventHandler): void {
    this.#told = handler;
  }
  get expiresAt(): number {
    return this.hold.deadline;
  }
  get token(): string {
    const hold = this.hold;
    if (!hold.target.resumable) {
      throw new TypeError(`Cannot make a token for lease '${this.name}': a Redlock lease cannot be resumed elsewhere`);
    }
    return tokenOf({
      name: hold.name,
      keys: hold.keys,
      owner: hold.owner,
      fence: hold.fence,
      fenceText: hold.fenceText,
      kind: hold.kind,
    });
  }
  get remainingMs(): number {
    return Math.max(0, this.hold.deadline - performance.now());
  }

  /**
   * Release this handle (idempotent): false once released, when lost, or if Redis says so. Bounded by `timeoutMs`,
   * by default the lease's remaining time (at least MIN_CALL_MS).
   */
  release(timeoutMs?: number): Promise<boolean> {
    return this.releasing ?? this.releasedBy(this.hold.release(this, timeoutMs));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}

/**
 * Attach a new handle for a fresh, reentrant or handed-over grant. Returns undefined when the grant is already
 * past its local deadline: it counts as not acquired (the caller undoes it).
 */
export function grant(
  target: Target,
  got: Granted,
  opts: GrantOptions,
  clock: Clock = realClock,
): LeaseImpl | undefined {
  if (got.deadline <= clock.now()) return undefined;
  const id = holdId(got.keys, got.owner, got.kind);
  let hold = target.holds.get(id);
  if (hold && hold.fence !== got.fence) {
    // Redis granted a new lease (new fence): the hold we knew of had been lost without us noticing yet.
    hold.lose("not-held");
    hold = undefined;
  }
  if (!hold) {
    hold = new Hold(target, id, got, opts, clock);
    target.holds.set(id, hold);
  } else {
    hold.reenter(got.deadline, opts, got.claimAt);
  }
  const lease = new LeaseImpl(hold, got.name, got.owner, got.fence);
  hold.attach(lease);
  return lease;
}

/**
 * Implementation of release(): idempotent per handle; false once released, when lost, or if Redis says so.
 * Bounded by `timeoutMs`, by default the lease's remaining time (at least MIN_CALL_MS).
 */
export function releaseHandle(lease: LeaseImpl, timeoutMs?: number): Promise<boolean> {
  return lease.release(timeoutMs);
}
