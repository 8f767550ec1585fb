import type { LeaseLossReason, LeaseLostError } from "./errors.ts";
import type { LeaseKind } from "./lease.ts";

/**
 * Receives every {@linkcode LeaseEvent} of a client, synchronously, at the moment redlease learns it (register it
 * with `configure(client, { onEvent })`). It runs in the caller's context where there is one (an `acquired` event
 * inside the awaited `acquire`), so an OpenTelemetry span it starts has the caller's span as its parent. A handler
 * that throws or rejects never breaks the lease: its failure is dropped. With no handler, no event is built.
 *
 * @example Count acquisitions and losses per kind
 * ```ts
 * import { configure, type LeaseEvent } from "redlease";
 * const counts = new Map<string, number>();
 * configure(client, {
 *   onEvent: (e: LeaseEvent) => counts.set(`${e.type}/${e.kind}`, (counts.get(`${e.type}/${e.kind}`) ?? 0) + 1),
 * });
 * ```
 */
export type LeaseEventHandler = (event: LeaseEvent) => void;

/**
 * What happened to a lease of this process: one of the events below, told apart by `type`. Every event names the
 * lease and its kind; those about a hold carry its owner and fence too. A hold is told about only once its
 * `acquired` (or `resumed`) event was, and only to the handler told of it: a lease acquired before the handler was
 * registered (or under the handler it replaced), or undone inside `acquire` (too few replicas acknowledged it, say),
 * tells it nothing of its renewals, loss or release.
 *
 * | `type` | when |
 * |---|---|
 * | `queued` | an acquire found the lease held and starts to wait (once per call) |
 * | `acquired` | an acquire (or a `campaign`) got the lease: after its wait, by a handoff or by its own call |
 * | `acquire-failed` | an acquire gave up: its wait ran out, its signal aborted, or Redis failed it |
 * | `renewed` | a watchdog renewal (or the claim of a handed-over grant) reset the TTL in Redis |
 * | `renewal-failed` | a renewal got no answer or an error; it is retried until the local deadline |
 * | `lost` | the hold is gone (its `signal` aborted with a {@linkcode LeaseLostError}) |
 * | `released` | a lease handle was released (`final`: the hold ended with it) |
 * | `handed-over` | a release of this process handed the lease straight to queued waiters |
 * | `resumed` | this process took a hold over from another by its token (`resume`) |
 * | `passed-on` | this process's waiter found a grant that its waiter never claimed within its claim window, and passed the lease on |
 *
 * @example Log each lost lease and why
 * ```ts
 * import { configure } from "redlease";
 * configure(client, {
 *   onEvent: (e) => {
 *     if (e.type === "lost") console.warn(`lease ${e.name} lost after ${e.heldMs} ms: ${e.reason}`);
 *   },
 * });
 * ```
 */
export type LeaseEvent =
  | QueuedEvent
  | AcquiredEvent
  | AcquireFailedEvent
  | RenewedEvent
  | RenewalFailedEvent
  | LostEvent
  | ReleasedEvent
  | HandedOverEvent
  | ResumedEvent
  | PassedOnEvent;

/**
 * The kind of lease an event is about: a {@linkcode LeaseKind}, or `leader` for a leadership from `campaign` (an
 * exclusive lease). A lease over several names has an event per name.
 */
export type LeaseEventKind = LeaseKind | "leader";

/** What every event says. */
export interface LeaseEventBase {
  /** The lease name (one name of a lease over several). */
  readonly name: string;
  /** The kind of lease. */
  readonly kind: LeaseEventKind;
}

/** What every event about a hold says. */
export interface HoldEventBase extends LeaseEventBase {
  /** The owner, as `lease.owner`. */
  readonly owner: string;
  /** The hold's fence, as `lease.fence`. */
  readonly fence: number;
}

/** An acquire found the lease held and starts to wait (queued, or polling where the client cannot listen). */
export interface QueuedEvent extends LeaseEventBase {
  /** What happened: queued. */
  readonly type: "queued";
  /**
   * The owner the acquire asks for when it starts to wait. A generated owner is new for each further attempt of the
   * same call (after a grant that came too late to use, or a Redlock retry), so the lease it gets may have another.
   */
  readonly owner: string;
  /** What Redis said is left of the current hold (or of a grant's claim window), ms; -1 when unknown. */
  readonly retryMs: number;
}

/** An acquire got the lease. */
export interface AcquiredEvent extends HoldEventBase {
  /** What happened: acquired. */
  readonly type: "acquired";
  /** From the call to the grant, ms (every Redis call included). */
  readonly waitMs: number;
  /** When the call started, on the `performance.now()` clock (`waitMs` before the event). */
  readonly startedAt: number;
  /** Whether it had to wait (a `queued` event came before). */
  readonly queued: boolean;
  /** Whether a release handed it over (by one message), rather than this process's own call taking it. */
  readonly handedOff: boolean;
  /**
   * Whether it re-entered a hold this process has already (same owner and fence) and told this handler of. A hold got
   * before the handler was registered is new to it: `false`, and its end is told.
   */
  readonly reentered: boolean;
}

/** An acquire gave up. Nothing it took is left holding (its undo is sent before it rejects). */
export interface AcquireFailedEvent extends LeaseEventBase {
  /** What happened: acquire-failed. */
  readonly type: "acquire-failed";
  /** `timeout`: the wait ran out (`LockTimeoutError`); `aborted`: its `signal` aborted; `error`: anything else. */
  readonly outcome: "timeout" | "aborted" | "error";
  /** What the acquire rejects with. */
  readonly error: unknown;
  /** From the call to the failure, ms. */
  readonly waitMs: number;
  /** When the call started, on the `performance.now()` clock. */
  readonly startedAt: number;
}

/** A renewal reset the hold's TTL in Redis. */
export interface RenewedEvent extends HoldEventBase {
  /** What happened: renewed. */
  readonly type: "renewed";
  /** The TTL set, ms. */
  readonly ttlMs: number;
}

/**
 * A renewal failed (an error, too few replicas, no answer within its bound); it is tried again until the local
 * deadline. A renewal still unanswered at the deadline is not told here: the `lost` event (`unreachable`) tells it.
 */
export interface RenewalFailedEvent extends HoldEventBase {
  /** What happened: renewal-failed. */
  readonly type: "renewal-failed";
  /** Why it failed. */
  readonly error: unknown;
  /** Time left until the local deadline, when the lease is given up as `unreachable`, ms. */
  readonly leftMs: number;
}

/** The hold was lost: every handle's `signal` aborted with `error`. */
export interface LostEvent extends HoldEventBase {
  /** What happened: lost. */
  readonly type: "lost";
  /** Why (see {@linkcode LeaseLostError}): `expired`, `not-held` or `unreachable`. */
  readonly reason: LeaseLossReason;
  /** The reason `lease.signal` aborted with. */
  readonly error: LeaseLostError;
  /** From the grant of the hold to its loss, ms. */
  readonly heldMs: number;
}

/** A lease handle was released (the event comes as `release` is called; its command may still fail). */
export interface ReleasedEvent extends HoldEventBase {
  /** What happened: released. */
  readonly type: "released";
  /** Whether the hold ended with it (false: other reentrant handles still hold it). */
  readonly final: boolean;
  /** From the grant of the hold to this release, ms. */
  readonly heldMs: number;
}

/** A release of this process handed the lease to the waiters at the head of the queue (they hold it now). */
export interface HandedOverEvent extends HoldEventBase {
  /** What happened: handed-over. */
  readonly type: "handed-over";
}

/** This process took over a hold made elsewhere, by its token (`resume`): same owner and fence. */
export interface ResumedEvent extends HoldEventBase {
  /** What happened: resumed. */
  readonly type: "resumed";
}

/**
 * A waiter of this process found a grant that the waiter it was handed to did not claim within its claim window (it
 * died, is partitioned, or never heard the message), took it back and passed the lease on (to itself, or to the next
 * waiter). Each one means a lease sat idle for up to a claim window.
 */
export interface PassedOnEvent extends LeaseEventBase {
  /** What happened: passed-on. */
  readonly type: "passed-on";
}
