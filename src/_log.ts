// Calls into the user's code that redlease makes on its own (a logger, an event handler): whatever they throw or
// reject with is theirs, and never breaks what redlease was doing.
import type { LogDetails, Logger } from "./_types.ts";
import type { LeaseEvent, LeaseEventHandler } from "./events.ts";

/** Hand a message to `logger` (see configure()); a logger that throws never breaks what redlease was doing. */
export function log(
  logger: Logger | null | undefined,
  level: "warn" | "debug",
  message: string,
  details: LogDetails,
): void {
  try {
    const r: unknown = logger?.[level]?.(message, details);
    // An async logger's rejection is its own too.
    if (typeof (r as PromiseLike<unknown> | undefined)?.then === "function") {
      (r as Promise<unknown>).then(undefined, () => {});
    }
  } catch { /* the logger's own failure: redlease goes on */ }
}

/** Hand `event` to `handler` (see configure()'s `onEvent`); its failure (a throw, a rejection) is its own. */
export function emit(handler: LeaseEventHandler, event: LeaseEvent): void {
  try {
    const r: unknown = handler(event);
    if (typeof (r as PromiseLike<unknown> | undefined)?.then === "function") {
      (r as Promise<unknown>).then(undefined, () => {});
    }
  } catch { /* the handler's own failure: redlease goes on */ }
}
