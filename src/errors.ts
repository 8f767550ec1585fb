/**
 * Base class of every error redlease raises on purpose (as opposed to errors from the Redis client, which are
 * passed through unchanged). Invalid arguments are not RedleaseErrors: they are `TypeError` / `RangeError`.
 *
 * @example Catch anything the library itself decided
 * ```ts
 * import { acquire, RedleaseError } from "redlease";
 * try {
 *   await acquire(client, "jobs:nightly", { waitMs: 0 });
 * } catch (err) {
 *   if (err instanceof RedleaseError) console.log(err.name, err.lockName);
 *   else throw err;
 * }
 * ```
 */
export class RedleaseError extends Error {
  override name = "RedleaseError";
  /** The lease name the error is about. */
  readonly lockName: string;
  constructor(lockName: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.lockName = lockName;
  }
}

/**
 * The wait for a lease ran out (or `waitMs: 0` found it held). `remainingMs` is the holder's remaining lease
 * time as Redis reported it on the last attempt (`-1` if the lease had no TTL).
 *
 * @example
 * ```ts
 * import { acquire, LockTimeoutError } from "redlease";
 * try {
 *   await acquire(client, "report", { waitMs: 0 });
 * } catch (err) {
 *   if (err instanceof LockTimeoutError) console.log(`busy for ${err.remainingMs} more ms`);
 * }
 * ```
 */
export class LockTimeoutError extends RedleaseError {
  override name = "LockTimeoutError";
  /** The holder's remaining lease time in ms at the last attempt. */
  readonly remainingMs: number;
  /** How long this call waited, in ms. */
  readonly waitedMs: number;
  constructor(lockName: string, remainingMs: number, waitedMs: number) {
    super(
      lockName,
      `Cannot acquire lease '${lockName}': held by another owner for ${remainingMs} ms more (waited ${
        Math.round(waitedMs)
      } ms)`,
    );
    this.remainingMs = remainingMs;
    this.waitedMs = waitedMs;
  }
}

/** Why a lease was lost: see {@linkcode LeaseLostError.why}. */
export type LeaseLossReason = "expired" | "not-held" | "unreachable";

/**
 * The holder no longer holds the lease. It is the reason `lease.signal` aborts with, and what `withLock` rejects
 * with when the lease was lost before the callback settled.
 * - `expired`: a fixed lease reached its local deadline.
 * - `not-held`: Redis says this owner no longer holds it (expired there, force-unlocked, or the key was removed).
 * - `unreachable`: renewals failed until the local deadline passed; the lease must be presumed gone.
 *
 * @example
 * ```ts
 * import { LeaseLostError, withLock } from "redlease";
 * try {
 *   await withLock(client, "ledger", async (signal) => {
 *     await doWork({ signal }); // stop writing when signal aborts
 *   });
 * } catch (err) {
 *   if (err instanceof LeaseLostError) console.error(`lost ${err.lockName}: ${err.why}`);
 * }
 * ```
 */
export class LeaseLostError extends RedleaseError {
  override name = "LeaseLostError";
  /** Why the lease was lost. */
  readonly why: LeaseLossReason;
  constructor(lockName: string, why: LeaseLossReason, options?: { cause?: unknown }) {
    const text = why === "expired"
      ? "its fixed lease ran out"
      : why === "not-held"
      ? "Redis reports it is no longer held by this owner"
      : "renewals failed until its deadline passed";
    super(lockName, `Lease '${lockName}' was lost: ${text}`, options);
    this.why = why;
  }
}
