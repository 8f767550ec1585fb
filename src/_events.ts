// Events (see events.ts): built only where a handler is registered, and handed to it in a way that a handler that
// throws or rejects never breaks the lease.
import type { LeaseEventHandler, LeaseEventKind } from "./events.ts";
import { eventKind } from "./_protocol.ts";
import type { LeaseImpl } from "./_hold.ts";
import { emit } from "./_log.ts";
import { LockTimeoutError } from "./errors.ts";

/**
 * Tell `handler` that an acquire started at `startedAt` got `lease`. Only a handle told acquired (or resumed) is told
 * released, and only a hold with one is told lost: an observer never sees the end of a lease whose start it did not
 * see (a grant undone inside acquire, say, for want of replicas).
 */
export function acquiredEvent(
  handler: LeaseEventHandler,
  lease: LeaseImpl,
  startedAt: number,
  queued: boolean,
  handedOff: boolean,
): void {
  const hold = lease.hold;
  // Re-entered: a hold this handler was told of already (one got before it was registered is new to it).
  const reentered = hold.tell(handler, lease, startedAt);
  const waitMs = performance.now() - startedAt;
  // (One object, not a spread of event(): every acquire builds it.)
  emit(handler, {
    type: "acquired",
    name: hold.name,
    kind: eventKind(hold.kind, hold.leader),
    owner: hold.owner,
    fence: hold.fence,
    waitMs,
    startedAt,
    queued,
    handedOff,
    reentered,
  });
  // Lost before its start could be told (while acquire waited for replicas, say): its end is told now, once.
  if (hold.lost && !reentered) hold.tellLost(handler);
}

/** Tell `handler` that an acquire of `name` started at `startedAt` fails with `error`. */
export function failedEvent(
  handler: LeaseEventHandler,
  name: string,
  kind: LeaseEventKind,
  error: unknown,
  signal: AbortSignal | undefined,
  startedAt: number,
): void {
  const outcome = signal?.aborted && error === signal.reason
    ? "aborted"
    : error instanceof LockTimeoutError
    ? "timeout"
    : "error";
  emit(handler, {
    type: "acquire-failed",
    name,
    kind,
    outcome,
    error,
    waitMs: performance.now() - startedAt,
    startedAt,
  });
}
