// The waiter of one acquire call, as an explicit state machine, changed only by its own methods:
//   queued ──onMessage(grant), enough time left──▶ granted ──(the acquire path attaches the hold)──▶ end() ▶ ended
//   granted ──tooLate() (past its deadline when taken)──▶ unverified
//   queued ──onMessage(grant), validity unknown──▶ unverified ──re-check──▶ granted by reply, or takenBack() ▶ queued
//   any ──end() (cancel / timeout / abort / a grant by reply)──▶ ended
// A message is a fact about one attempt (a fence, when it was queued and granted). It is applied only while the
// waiter still waits, and only if it is newer than any grant it has seen: a late message about an earlier grant
// never changes the current one.
import { drift, realClock } from "./_hold.ts";
import type { Acquired, QueueEntry, WaiterMessage } from "./_protocol.ts";

/** A grant learned by message, with its conservative local deadline and when to claim it. */
export interface MessageGrant {
  readonly fence: number;
  readonly deadline: number;
  readonly claimAt: number;
}

export type WaiterState = "queued" | "granted" | "unverified" | "ended";

/** The waiter of one acquire call (see the top of this file): what its messages and checks have told it. */
export class Waiter {
  readonly entry: QueueEntry;
  readonly now: () => number;
  #state: WaiterState = "queued";
  #grant: MessageGrant | undefined;
  /** Re-check no later than this (performance.now() clock): set when messages may have been lost. */
  #recheckAt = Infinity;
  /** Bumped on every change a message makes, so the acquire path can tell whether one came during a call. */
  #version = 0;
  /** The highest fence a grant message told of. */
  #seen = 0;
  /** Whether a grant message came since this waiter was last queued. */
  #heard = false;
  /** When the entry that `queued` last found dropped unheard was queued (server µs), until its grant is heard. */
  #dropped = NaN;
  /**
   * Server µs when queued → local send time of the call that queued it (a lower bound of that moment): the latest
   * in two fields (nearly every wait is queued once), earlier ones in a Map made when a second comes.
   */
  #queuedAt = NaN;
  #sent = 0;
  #earlier: Map<number, number> | undefined;
  #wake: (() => void) | undefined;

  constructor(entry: QueueEntry, now: () => number = realClock.now) {
    this.entry = entry;
    this.now = now;
  }

  get state(): WaiterState {
    return this.#state;
  }
  /** The grant a message brought (read while `state` is "granted"). */
  get grant(): MessageGrant | undefined {
    return this.#grant;
  }
  /** Re-check no later than this (performance.now() clock): set when messages may have been lost. */
  get recheckAt(): number {
    return this.#recheckAt;
  }
  /** Bumped on every change a message makes, so the acquire path can tell whether one came during a call. */
  get version(): number {
    return this.#version;
  }

  /** The wait is over (a lease taken, or the wait given up): every later message is ignored. */
  end(): void {
    this.#state = "ended";
  }

  /** The grant a message brought was past its deadline when taken up: the next check claims it if still ours. */
  tooLate(): void {
    if (this.#state === "granted") this.#state = "unverified";
  }

  /**
   * A re-check sent at `version` found this waiter queued: an unverified grant that no message changed since was
   * taken back (passed on), and the waiter waits again.
   */
  takenBack(version: number): void {
    if (this.#version === version && this.#state === "unverified") this.#state = "queued";
  }

  /** The nap between checks is over: the check sent next covers any re-check asked for so far. */
  woke(): void {
    this.#recheckAt = Infinity;
  }

  /**
   * The reply to a queue check that was sent at `t0`. True when it queued this waiter again while no grant message
   * came since it was last queued: its entry was removed unheard, dropped as dead because the grant's message reached
   * no subscriber of its client (a grant it heard but did not claim in time passes on too, and that says nothing).
   */
  queued(r: Acquired, t0: number): boolean {
    if (r.fence !== undefined || !r.queuedNow || r.queuedAt === undefined) return false;
    const again = !Number.isNaN(this.#queuedAt), unheard = again && !this.#heard;
    if (again) (this.#earlier ??= new Map()).set(this.#queuedAt, this.#sent); // queued before
    if (unheard) this.#dropped = this.#queuedAt;
    this.#queuedAt = r.queuedAt;
    this.#sent = t0;
    this.#heard = false;
    return unheard;
  }

  /**
   * Whether the entry `queued` last found dropped unheard is still unheard: its grant message, sent on the subscriber
   * connection before the reply that re-queued this waiter, may be read after that reply (a busy process reads one
   * socket, then runs what it resolved, before the other), and then it was heard after all.
   */
  get droppedUnheard(): boolean {
    return !Number.isNaN(this.#dropped);
  }

  #sentAt(queuedAt: number): number | undefined {
    return queuedAt === this.#queuedAt ? this.#sent : this.#earlier?.get(queuedAt);
  }

  /** Where the nap between checks can be cut short. */
  onWake(wake: (() => void) | undefined): void {
    this.#wake = wake;
  }

  /** A message on this waiter's channel: a grant of its attempt, or a "check" (messages may have been lost). */
  onMessage(m: WaiterMessage): void {
    if (this.#state === "granted" || this.#state === "ended") return;
    if (m.kind === "check") {
      this.#recheckAt = this.now();
    } else {
      this.#heard = true;
      if (m.queuedAt === this.#dropped) this.#dropped = NaN;
      if (m.fence <= this.#seen) return;
      this.#seen = m.fence;
      const sent = this.#sentAt(m.queuedAt);
      // Server time passes as local time does (less the drift allowance): the grant happened at least
      // (grantedAt - queuedAt) after the call that queued us was sent, and holds until its claim window ends.
      const window = Math.min(this.entry.ms, this.entry.claimMs);
      const deadline = sent === undefined
        ? -Infinity
        : sent + (m.grantedAt - m.queuedAt) / 1000 + window - drift(window);
      const now = this.now();
      if (deadline - now > window / 4) {
        this.#grant = { fence: m.fence, deadline, claimAt: now + (deadline - now) / 2 };
        this.#state = "granted";
      } else {
        // Too little is known or left to use it without a round trip: a re-check claims it if it is still ours.
        this.#state = "unverified";
      }
    }
    this.#version++;
    this.#wake?.();
  }
}
