// A Hold is one (client, name, owner) that this process holds, however many reentrant Lease handles share it.
// It owns the single timer: the next watchdog renewal, or the local deadline.
import { LeaseLostError, type LeaseLossReason } from "./errors.ts";
import type { Lease } from "./lease.ts";
import { type Timer, unrefTimeout } from "./_timers.ts";

/** Redlock's clock-drift allowance: 1 % of the lease plus 2 ms. */
export function drift(ms: number): number {
  return Math.floor(ms * 0.01) + 2;
}

/**
 * The lease's hash and queue keys. The whole name is the hash tag, so all of a lease's keys and channels share a
 * cluster slot; `%` and `}` are percent-encoded so that a name cannot end the tag early (or leave it empty).
 */
export function keysOf(prefix: string, name: string): [hash: string, queue: string] {
  const tag = /[%}]/.test(name) ? name.replace(/[%}]/g, (c) => (c === "%" ? "%25" : "%7D")) : name;
  const hash = `${prefix}:{${tag}}`;
  return [hash, `${hash}:q`];
}

/** Where a hold lives: one Redis (a ClientState) or a Redlock group of independent masters. */
export interface Target {
  /** This process's holds there, one per (key, owner). */
  readonly holds: Map<string, Hold>;
  /**
   * Reset the hold's TTL to `ms` if its owner still holds it: true; false when it is not held. Rejects when
   * that cannot be known or is not enough (Redis unreachable, too few replicas acknowledged, no quorum).
   */
  renew(hold: Hold, ms: number): Promise<boolean>;
  /** Release one hold of the owner; true when it was held. */
  release(hold: Hold): Promise<boolean>;
}

export class Hold {
  readonly handles: Set<LeaseImpl> = new Set();
  lost = false;
  #timer: Timer | undefined;
  #renewing = false;

  constructor(
    readonly target: Target,
    readonly id: string,
    readonly key: string,
    readonly name: string,
    readonly owner: string,
    readonly fence: number,
    /** TTL set on renewal (watchdog) or the fixed lease. */
    public ms: number,
    public watchdog: boolean,
    /** Conservative local deadline, performance.now() clock. */
    public deadline: number,
    /** Renewals count only once this many replicas acknowledged them (0: no WAIT). */
    readonly replicas: number = 0,
    readonly replicaTimeoutMs: number = 0,
  ) {}

  get active(): boolean {
    return !this.lost && this.handles.size > 0;
  }

  /** Arm the one timer: the next renewal in watchdog mode (unless one is in flight), else the deadline. */
  arm(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (!this.active) return;
    const now = performance.now();
    if (this.watchdog && !this.#renewing) {
      const at = Math.min(this.deadline, this.deadline - this.ms + drift(this.ms) + Math.floor(this.ms / 3));
      this.#timer = unrefTimeout(() => void this.#renew(), at - now);
    } else {
      this.#timer = unrefTimeout(() => {
        this.#timer = undefined;
        if (performance.now() >= this.deadline) this.lose(this.watchdog ? "unreachable" : "expired");
        else this.arm();
      }, this.deadline - now);
    }
  }

  async #renew(): Promise<void> {
    this.#timer = undefined;
    if (!this.active) return;
    if (performance.now() >= this.deadline) return this.lose("unreachable");
    this.#renewing = true;
    this.arm(); // the deadline guard while the renewal is in flight
    const t0 = performance.now();
    let r: boolean;
    try {
      r = await this.target.renew(this, this.ms);
    } catch (e) {
      this.#renewing = false;
      if (!this.active) return;
      // Redis unreachable or erroring: keep trying until the local deadline, then give the lease up.
      const left = this.deadline - performance.now();
      if (left <= 0) return this.lose("unreachable", e);
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      this.#timer = unrefTimeout(() => void this.#renew(), Math.min(left, Math.max(10, Math.floor(this.ms / 10))));
      return;
    }
    this.#renewing = false;
    if (!this.active) return;
    if (r) {
      this.deadline = Math.max(this.deadline, t0 + this.ms - drift(this.ms));
      this.arm();
    } else {
      this.lose("not-held");
    }
  }

  /** Run when this process's hold ends (final release or loss), after the release command. */
  readonly onEnd: Array<() => void> = [];

  ended(): void {
    for (const fn of this.onEnd.splice(0)) fn();
  }

  lose(why: LeaseLossReason, cause?: unknown): void {
    if (this.lost) return;
    this.lost = true;
    this.stop();
    this.ended();
    const reason = new LeaseLostError(this.name, why, cause === undefined ? undefined : { cause });
    for (const h of this.handles) h.end(reason);
  }

  stop(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.target.holds.get(this.id) === this) this.target.holds.delete(this.id);
  }
}

/** The abort reason of a released lease: one shared instance, since a DOMException is costly to create. */
let released: DOMException | undefined;

export class LeaseImpl implements Lease {
  // Created on first use of `signal`: most leases are released without anyone listening.
  #controller: AbortController | undefined;
  #ended: unknown;
  /** Set once release() has started for this handle. */
  releasing: Promise<boolean> | undefined;

  constructor(readonly hold: Hold, readonly name: string, readonly owner: string, readonly fence: number) {}

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#ended !== undefined) this.#controller.abort(this.#ended);
    }
    return this.#controller.signal;
  }

  /** End this handle: abort its signal with `reason` (first call wins). */
  end(reason: unknown): void {
    if (this.#ended !== undefined) return;
    this.#ended = reason;
    this.#controller?.abort(reason);
  }

  /** Whether the handle has ended, and why (undefined while live). */
  get endedWith(): unknown {
    return this.#ended;
  }
  get expiresAt(): number {
    return this.hold.deadline;
  }
  get remainingMs(): number {
    return Math.max(0, this.hold.deadline - performance.now());
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await releaseHandle(this);
  }
}

/** What a grant needs to know of the acquire options. */
export interface GrantOptions {
  readonly ms: number;
  readonly watchdog: boolean;
  readonly replicas: number;
  readonly replicaTimeoutMs: number;
}

/** Attach a new handle for a fresh or reentrant grant measured from `t0` (sent-before time). */
export function grant(
  st: Target,
  key: string,
  name: string,
  owner: string,
  fence: number,
  o: GrantOptions,
  t0: number,
): LeaseImpl {
  const { ms, watchdog } = o;
  const id = `${key}\n${owner}`;
  const deadline = t0 + ms - drift(ms);
  let hold = st.holds.get(id);
  if (hold && hold.fence !== fence) {
    // Redis granted a new lease (new fence): the hold we knew of had been lost without us noticing yet.
    hold.lose("not-held");
    hold = undefined;
  }
  if (!hold) {
    hold = new Hold(st, id, key, name, owner, fence, ms, watchdog, deadline, o.replicas, o.replicaTimeoutMs);
    st.holds.set(id, hold);
  } else {
    // Reentrant: the script only ever lengthens the TTL (PEXPIRE GT).
    hold.deadline = Math.max(hold.deadline, deadline);
    if (watchdog) {
      // Watchdog holds keep the key alive for the longest period any of them asked for.
      hold.ms = hold.watchdog ? Math.max(hold.ms, ms) : ms;
      hold.watchdog = true;
    }
  }
  const lease = new LeaseImpl(hold, name, owner, fence);
  hold.handles.add(lease);
  hold.arm();
  return lease;
}

/** Implementation of release(): idempotent per handle; false once released, when lost, or if Redis says so. */
export function releaseHandle(lease: LeaseImpl): Promise<boolean> {
  return lease.releasing ??= (async () => {
    const hold = lease.hold;
    hold.handles.delete(lease);
    if (hold.handles.size === 0) hold.stop();
    lease.end(released ??= new DOMException("Lease released", "AbortError"));
    try {
      return await hold.target.release(hold);
    } finally {
      if (hold.handles.size === 0) hold.ended();
    }
  })();
}

/** How long the fence record outlives a final release, ms. */
export const FENCE_RETAIN_MS = 10_000;
