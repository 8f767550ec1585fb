import type { LogDetails, Logger } from "./configure.ts";

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
