import type { LogDetails, Logger } from "./configure.ts";

/** Hand a message to `logger` (see configure()); a logger that throws never breaks what redlease was doing. */
export function log(
  logger: Logger | null | undefined,
  level: "warn" | "debug",
  message: string,
  details: LogDetails,
): void {
  try {
    logger?.[level]?.(message, details);
  } catch { /* the logger's own failure: redlease goes on */ }
}
