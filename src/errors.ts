/**
 * Base class of every error redlease raises on purpose (as opposed to errors from the Redis client, which are
 * passed through unchanged). Invalid arguments are not RedleaseErrors: they are `TypeError` / `RangeError`.
 *
 * `instanceof` holds only for errors of the same copy of redlease. Where two copies can meet in one process (the
 * ESM and the CommonJS build, or two installed versions), test errors with the guards instead, one per error
 * class: {@linkcode isRedleaseError}, {@linkcode isLockTimeoutError}, {@linkcode isLeaseLostError} and the others.
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
  static {
    brand(this, "RedleaseError");
  }
  /** The class name, "RedleaseError"; each subclass sets its own (it survives minification). */
  override name = "RedleaseError";
  /** The lease name the error is about. */
  readonly lockName: string;
  /**
   * redlease raises it; construct one yourself only to stand in for it, as in a test.
   *
   * @param lockName The lease name the error is about.
   * @param message The error message.
   * @param options `cause`: the error that led to this one.
   */
  constructor(lockName: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.lockName = lockName;
  }
}

/**
 * The lease is held by others: the wait for it ran out (or `waitMs: 0` found it held). Raised only when Redis
 * answered, and its last answer was "held": an outage is a {@linkcode RedisUnavailableError} instead, never this
 * (so code that answers this error with "busy", such as HTTP 409, never reports an outage as contention).
 * `remainingMs` is the holder's remaining lease time as Redis reported it on the last attempt (`-1` if the lease had
 * no TTL); with a lock delay (`lockDelayMs`), the time until that delay would end, the holder's time included. Both
 * times are whole milliseconds: `remainingMs` rounded up, `waitedMs` rounded to the nearest.
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
  static {
    brand(this, "LockTimeoutError");
  }
  /** The class name, "LockTimeoutError". */
  override name = "LockTimeoutError";
  /**
   * The holder's remaining lease time in whole ms (rounded up) at the last attempt (with a lock delay: until the
   * delay ends); `-1`: no TTL.
   */
  readonly remainingMs: number;
  /** How long this call waited, in whole ms (rounded to the nearest). */
  readonly waitedMs: number;
  /**
   * redlease raises it; construct one yourself only to stand in for it, as in a test.
   *
   * @param lockName The lease name.
   * @param remainingMs The holder's remaining lease time in ms at the last attempt (`-1`: no TTL); rounded up.
   * @param waitedMs How long the call waited, in ms; rounded to the nearest.
   * @param options `cause`: an error that explains the wait further, if any.
   */
  constructor(lockName: string, remainingMs: number, waitedMs: number, options?: { cause?: unknown }) {
    const left = Math.ceil(remainingMs), waited = Math.round(waitedMs);
    super(
      lockName,
      `Cannot acquire lease '${lockName}': held by another owner for ${left} ms more (waited ${waited} ms)`,
      options,
    );
    this.remainingMs = left;
    this.waitedMs = waited;
  }
}

/**
 * Redis could not be reached, or did not answer, so redlease cannot tell whether the lease is held: an outage, not
 * contention (which is a {@linkcode LockTimeoutError}). Every call rejects with it then: `acquire` (whatever its
 * `waitMs`), `withLock`, `campaign`, `resume`, `release`, `extend`, `inspect` and `forceUnlock`; an acquire's attempt
 * is undone once Redis answers again. `cause` carries the last error from the Redis client when there was one (for
 * example `connect ECONNREFUSED`, or the error the client emitted while reconnecting). {@linkcode RedisTimeoutError}
 * (Redis did not answer within a bound) is one of these.
 *
 * It does not extend {@linkcode LockTimeoutError} on purpose: code that maps a LockTimeoutError to "busy, try
 * another time" must never see an outage, whose next step differs (retry once Redis is back, alert).
 *
 * @example Busy is 409, an outage is 503
 * ```ts
 * import { acquire, isLockTimeoutError, isRedisUnavailableError } from "redlease";
 * try {
 *   await acquire(client, "report", { waitMs: 2000 });
 * } catch (err) {
 *   if (isLockTimeoutError(err)) console.log("409: busy");
 *   else if (isRedisUnavailableError(err)) console.log("503: Redis unavailable", err.cause);
 *   else throw err;
 * }
 * ```
 */
export class RedisUnavailableError extends RedleaseError {
  static {
    brand(this, "RedisUnavailableError");
  }
  /** The class name, "RedisUnavailableError". */
  override name = "RedisUnavailableError";
  /**
   * (Types only: makes the class nominal, so that `!isRedisUnavailableError(err)` does not narrow a LockTimeoutError,
   * which has every member of this class, away.)
   * @ignore
   */
  declare private readonly outage: never;
  /**
   * redlease raises it; construct one yourself only to stand in for it, as in a test.
   *
   * @param lockName The lease name.
   * @param message The error message.
   * @param options `cause`: the last error from the Redis client, if any.
   */
  constructor(lockName: string, message: string, options?: { cause?: unknown }) {
    super(lockName, message, options);
  }
}

/**
 * Redis did not answer a lease command within its bound: the caller's deadline (`acquire`'s `waitMs` plus a grace of
 * 250 ms), or the `timeoutMs` of `release`, `extend`, `inspect` and `forceUnlock`. A {@linkcode RedisUnavailableError};
 * `cause` is the last error the Redis client reported, when it reported one. The command's outcome is unknown: it may still run when
 * the connection recovers. redlease undoes an `acquire` whose outcome is unknown once Redis answers again; a
 * `release` that timed out leaves the lease to expire by its TTL (its watchdog has stopped).
 *
 * @example
 * ```ts
 * import { release, RedisTimeoutError } from "redlease";
 * try {
 *   await release(lease, { timeoutMs: 500 });
 * } catch (err) {
 *   if (err instanceof RedisTimeoutError) console.warn(`no answer in ${err.timeoutMs} ms; the lease will expire`);
 * }
 * ```
 */
export class RedisTimeoutError extends RedisUnavailableError {
  static {
    brand(this, "RedisTimeoutError");
  }
  /** The class name, "RedisTimeoutError". */
  override name = "RedisTimeoutError";
  /** The bound that passed, in whole ms. */
  readonly timeoutMs: number;
  /**
   * redlease raises it; construct one yourself only to stand in for it, as in a test.
   *
   * @param lockName The lease name.
   * @param timeoutMs The bound that passed, in ms; rounded to the nearest.
   * @param options `cause`: the last error the Redis client reported, if any.
   */
  constructor(lockName: string, timeoutMs: number, options?: { cause?: unknown }) {
    const ms = Math.round(timeoutMs);
    super(lockName, `Redis did not answer within ${ms} ms about lease '${lockName}'`, options);
    this.timeoutMs = ms;
  }
}

/** Why a lease was lost: see {@linkcode LeaseLostError.why}. */
export type LeaseLossReason = "expired" | "not-held" | "unreachable";

/**
 * The holder no longer holds the lease. It is the reason `lease.signal` aborts with, and what `withLock` rejects
 * with when the lease was lost before the callback settled.
 * - `expired`: a fixed lease reached its local deadline.
 * - `not-held`: Redis says this owner no longer holds it (expired there, force-unlocked, or the key was removed).
 * - `unreachable`: renewals failed until the local deadline passed; the lease must be presumed gone. `cause` is the
 *   last renewal's error (a {@linkcode RedisUnavailableError} whose own `cause` is the Redis client's error).
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
  static {
    brand(this, "LeaseLostError");
  }
  /** The class name, "LeaseLostError". */
  override name = "LeaseLostError";
  /** Why the lease was lost. */
  readonly why: LeaseLossReason;
  /**
   * redlease raises it; construct one yourself only to stand in for it, as in a test.
   *
   * @param lockName The lease name.
   * @param why Why the lease was lost.
   * @param options `cause`: the last Redis error, for `"unreachable"`.
   */
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

/** How a lease is held, as {@linkcode LeaseKindError} reports it: exclusive, shared, or a number of permits. */
export type LeaseKindFound = "exclusive" | "shared" | number;

/**
 * The lease is held in a way this request cannot join, so waiting could never succeed. Raised at once by `acquire`:
 * - `why` "upgrade": an exclusive hold was asked by an owner that holds the lease shared. Waiting would deadlock
 *   (the exclusive hold waits for the shared one, which waits for its owner); release the shared hold first. (The
 *   other way round, an exclusive holder adding a shared hold, is allowed: a downgrade.)
 * - `why` "mismatch": the lease is in use as another kind: permits asked of a lease held exclusively or shared, an
 *   exclusive or shared hold asked of a lease held as permits, or permits of a different number. `found` says how it
 *   is held (a number: that many permits).
 * - `why` "weight": an owner that holds some of the permits asked for them again with another `weight` (a re-entry
 *   takes no more permits, so it must ask the weight it holds; release first to change it). `found` is the number
 *   of permits.
 *
 * @example
 * ```ts
 * import { acquire, LeaseKindError } from "redlease";
 * try {
 *   await acquire(client, "uploads", { permits: 4 });
 * } catch (err) {
 *   if (err instanceof LeaseKindError) console.error(`'uploads' is held as ${err.found}`);
 * }
 * ```
 */
export class LeaseKindError extends RedleaseError {
  static {
    brand(this, "LeaseKindError");
  }
  /** The class name, "LeaseKindError". */
  override name = "LeaseKindError";
  /**
   * "upgrade" (exclusive asked by a shared holder), "mismatch" (the lease is held as another kind) or "weight" (a
   * re-entry with another weight).
   */
  readonly why: "upgrade" | "mismatch" | "weight";
  /** How the lease is held: "exclusive", "shared", or the number of permits. */
  readonly found: LeaseKindFound;
  /**
   * redlease raises it; construct one yourself only to stand in for it, as in a test.
   *
   * @param lockName The lease name.
   * @param why "upgrade", "mismatch" or "weight".
   * @param found How the lease is held: "exclusive", "shared", or the number of permits.
   */
  constructor(lockName: string, why: "upgrade" | "mismatch" | "weight", found: LeaseKindFound) {
    const held = typeof found === "number" ? `as ${found} permits` : found === "shared" ? "shared" : "exclusively";
    super(
      lockName,
      why === "upgrade"
        ? `Cannot hold lease '${lockName}' exclusively while holding it shared (it would deadlock): release the shared hold first`
        : why === "weight"
        ? `Cannot re-enter lease '${lockName}' with another weight than the one this owner holds of its ${found} permits`
        : `Lease '${lockName}' is held ${held}, which this request cannot join`,
    );
    this.why = why;
    this.found = found;
  }
}

/**
 * Fewer replicas than the `replicas` option asked for acknowledged a lease write within `replicaTimeoutMs`.
 * `acquire` undoes its grant before rejecting with it; an explicit `extend` rejects with it (the primary has the
 * new TTL, but a failover may lose it); a watchdog renewal treats it as a failed renewal and keeps trying until
 * the lease's local deadline.
 *
 * @example
 * ```ts
 * import { acquire, ReplicationError } from "redlease";
 * try {
 *   await acquire(client, "payout", { replicas: 1, replicaTimeoutMs: 500 });
 * } catch (err) {
 *   if (err instanceof ReplicationError) console.log(`${err.acknowledged}/${err.required} replicas`);
 * }
 * ```
 */
export class ReplicationError extends RedleaseError {
  static {
    brand(this, "ReplicationError");
  }
  /** The class name, "ReplicationError". */
  override name = "ReplicationError";
  /** Replicas that acknowledged the write. */
  readonly acknowledged: number;
  /** Replicas the `replicas` option required. */
  readonly required: number;
  /**
   * redlease raises it; construct one yourself only to stand in for it, as in a test.
   *
   * @param lockName The lease name.
   * @param acknowledged Replicas that acknowledged the write.
   * @param required Replicas the `replicas` option required.
   */
  constructor(lockName: string, acknowledged: number, required: number) {
    super(
      lockName,
      `Lease '${lockName}' was not replicated: ${acknowledged} of ${required} required replicas acknowledged it`,
    );
    this.acknowledged = acknowledged;
    this.required = required;
  }
}

/**
 * Redlock could not reach a majority of its independent masters: too many of them failed or did not answer
 * within the per-node timeout. An outage, so a {@linkcode RedisUnavailableError} (its guard holds for it too);
 * distinct from {@linkcode LockTimeoutError}, which means the lease is held by someone else (a majority of masters
 * said so). `errors` holds the per-node failures; the first is the `cause`.
 *
 * @example
 * ```ts
 * import { acquire, QuorumError } from "redlease";
 * import { redlock } from "redlease/redlock";
 * try {
 *   await acquire(redlock([a, b, c, d, e]), "settlement", { waitMs: 0 });
 * } catch (err) {
 *   if (err instanceof QuorumError) console.log(`${err.granted}/${err.required}`, err.errors);
 * }
 * ```
 */
export class QuorumError extends RedisUnavailableError {
  static {
    brand(this, "QuorumError");
  }
  /** The class name, "QuorumError". */
  override name = "QuorumError";
  /** Nodes that granted (or renewed) the lease. */
  readonly granted: number;
  /** The majority needed. */
  readonly required: number;
  /** The failures of the other nodes. */
  readonly errors: readonly unknown[];
  /**
   * redlease raises it; construct one yourself only to stand in for it, as in a test.
   *
   * @param lockName The lease name.
   * @param granted Nodes that granted (or renewed) the lease.
   * @param required The majority needed.
   * @param errors The failures of the other nodes; the first is the `cause`.
   */
  constructor(lockName: string, granted: number, required: number, errors: readonly unknown[]) {
    super(
      lockName,
      `Lease '${lockName}' has no quorum: ${granted} of the ${required} nodes needed granted it; ${errors.length} failed`,
      { cause: errors[0] },
    );
    this.granted = granted;
    this.required = required;
    this.errors = errors;
  }
}

/**
 * A fenced write (`redlease/fence`) was refused: a writer with a higher fence wrote the resource `key` before, so this
 * writer's lease is stale (it expired, was force-unlocked or passed to another holder while this one was paused).
 * Nothing was written. Stop working on the resource; `lockName` is the lease name whose fence guarded the write
 * ("" when only a fence number was passed).
 *
 * @example
 * ```ts
 * import { StaleFenceError } from "redlease";
 * import { fencedSet } from "redlease/fence";
 * try {
 *   await fencedSet(client, lease, "{report}:body", text);
 * } catch (err) {
 *   if (err instanceof StaleFenceError) console.warn(`${err.key} was written by fence ${err.highest}`);
 *   else throw err;
 * }
 * ```
 */
export class StaleFenceError extends RedleaseError {
  static {
    brand(this, "StaleFenceError");
  }
  /** The class name, "StaleFenceError". */
  override name = "StaleFenceError";
  /**
   * The resource the write was refused at: the Redis key, or for the SQL helpers the table of `fencedSqlUpdate` or
   * the resource of `fencedSqlTransaction`.
   */
  readonly key: string;
  /** The fence the write carried. */
  readonly fence: number;
  /** The highest fence that wrote the resource before (greater than `fence`). */
  readonly highest: number;
  /**
   * redlease raises it; construct one yourself only to stand in for it, as in a test.
   *
   * @param lockName The lease name whose fence guarded the write, or "".
   * @param key The resource key.
   * @param fence The fence the write carried.
   * @param highest The highest fence that wrote the resource before.
   */
  constructor(lockName: string, key: string, fence: number, highest: number) {
    super(lockName, `Write to '${key}' refused: fence ${fence} is older than fence ${highest}, which wrote it before`);
    this.key = key;
    this.fence = fence;
    this.highest = highest;
  }
}

/**
 * Marks the instances of `cls` (its subclasses' included) with the registry symbol `redlease.<name>`. `Symbol.for`
 * gives every copy of redlease in a process the same symbol, so the guards below recognise errors of any copy,
 * where `instanceof` recognises its own copy's only.
 */
function brand(cls: { prototype: object }, name: string): void {
  Object.defineProperty(cls.prototype, Symbol.for(`redlease.${name}`), { value: true });
}

/** Whether `e` carries the brand of the error class `name` (see `brand`). */
function branded(e: unknown, name: string): boolean {
  return typeof e === "object" && e !== null && (e as Record<symbol, unknown>)[Symbol.for(`redlease.${name}`)] === true;
}

/**
 * Whether `err` is a {@linkcode RedleaseError} (any of its subclasses included) from any copy of redlease: unlike
 * `instanceof`, it holds across the ESM and CommonJS builds, or two installed versions, in one process. A plain
 * `Error` that only has the same `name` is not one.
 *
 * @param err Any value, such as a caught error or `signal.reason`.
 * @returns `true` for an error that redlease raised on purpose.
 *
 * @example
 * ```ts
 * import { acquire, isRedleaseError } from "redlease";
 * try {
 *   await acquire(client, "jobs:nightly", { waitMs: 0 });
 * } catch (err) {
 *   if (!isRedleaseError(err)) throw err; // a Redis or argument error
 *   console.log(err.name, err.lockName);
 * }
 * ```
 */
export function isRedleaseError(err: unknown): err is RedleaseError {
  return branded(err, "RedleaseError");
}

/**
 * Whether `err` is a {@linkcode LockTimeoutError} from any copy of redlease (see {@linkcode isRedleaseError}).
 *
 * @param err Any value, such as a caught error.
 * @returns `true` when the lease is held by others (the wait ran out, or `waitMs: 0` found it held); never for an
 *   outage, which is a {@linkcode RedisUnavailableError}.
 *
 * @example
 * ```ts
 * import { acquire, isLockTimeoutError } from "redlease";
 * try {
 *   await acquire(client, "report", { waitMs: 0 });
 * } catch (err) {
 *   if (isLockTimeoutError(err)) console.log(`busy for ${err.remainingMs} more ms`);
 *   else throw err;
 * }
 * ```
 */
export function isLockTimeoutError(err: unknown): err is LockTimeoutError {
  return branded(err, "LockTimeoutError");
}

/**
 * Whether `err` is a {@linkcode RedisUnavailableError} (a {@linkcode RedisTimeoutError} included) from any copy of
 * redlease (see {@linkcode isRedleaseError}).
 *
 * @param err Any value, such as a caught error.
 * @returns `true` when Redis could not be reached or did not answer: an outage, not contention.
 *
 * @example
 * ```ts
 * import { acquire, isRedisUnavailableError } from "redlease";
 * await acquire(client, "report", { waitMs: 2000 }).catch((err) => {
 *   if (isRedisUnavailableError(err)) console.warn("Redis is unavailable:", err.cause);
 *   throw err;
 * });
 * ```
 */
export function isRedisUnavailableError(err: unknown): err is RedisUnavailableError {
  return branded(err, "RedisUnavailableError");
}

/**
 * Whether `err` is a {@linkcode RedisTimeoutError} from any copy of redlease (see {@linkcode isRedleaseError}).
 *
 * @param err Any value, such as a caught error.
 * @returns `true` when Redis did not answer a lease command within its bound.
 *
 * @example
 * ```ts
 * import { isRedisTimeoutError, release } from "redlease";
 * await release(lease, { timeoutMs: 500 }).catch((err) => {
 *   if (!isRedisTimeoutError(err)) throw err;
 *   console.warn("no answer; the lease will expire by its TTL");
 * });
 * ```
 */
export function isRedisTimeoutError(err: unknown): err is RedisTimeoutError {
  return branded(err, "RedisTimeoutError");
}

/**
 * Whether `err` is a {@linkcode LeaseLostError} from any copy of redlease (see {@linkcode isRedleaseError}).
 *
 * @param err Any value, such as a caught error or `lease.signal.reason`.
 * @returns `true` when the holder no longer holds the lease.
 *
 * @example
 * ```ts
 * import { isLeaseLostError, withLock } from "redlease";
 * try {
 *   await withLock(client, "ledger", (signal) => doWork({ signal }));
 * } catch (err) {
 *   if (isLeaseLostError(err)) console.error(`lost ${err.lockName}: ${err.why}`);
 *   else throw err;
 * }
 * ```
 */
export function isLeaseLostError(err: unknown): err is LeaseLostError {
  return branded(err, "LeaseLostError");
}

/**
 * Whether `err` is a {@linkcode LeaseKindError} from any copy of redlease (see {@linkcode isRedleaseError}).
 *
 * @param err Any value, such as a caught error.
 * @returns `true` when the lease is held in a way the request cannot join.
 *
 * @example
 * ```ts
 * import { acquire, isLeaseKindError } from "redlease";
 * try {
 *   await acquire(client, "uploads", { permits: 4 });
 * } catch (err) {
 *   if (isLeaseKindError(err)) console.error(`'uploads' is held as ${err.found}`);
 *   else throw err;
 * }
 * ```
 */
export function isLeaseKindError(err: unknown): err is LeaseKindError {
  return branded(err, "LeaseKindError");
}

/**
 * Whether `err` is a {@linkcode ReplicationError} from any copy of redlease (see {@linkcode isRedleaseError}).
 *
 * @param err Any value, such as a caught error.
 * @returns `true` when too few replicas acknowledged a lease write.
 *
 * @example
 * ```ts
 * import { acquire, isReplicationError } from "redlease";
 * try {
 *   await acquire(client, "payout", { replicas: 1, replicaTimeoutMs: 500 });
 * } catch (err) {
 *   if (isReplicationError(err)) console.log(`${err.acknowledged}/${err.required} replicas`);
 *   else throw err;
 * }
 * ```
 */
export function isReplicationError(err: unknown): err is ReplicationError {
  return branded(err, "ReplicationError");
}

/**
 * Whether `err` is a {@linkcode QuorumError} from any copy of redlease (see {@linkcode isRedleaseError}).
 *
 * @param err Any value, such as a caught error.
 * @returns `true` when Redlock could not reach a majority of its masters.
 *
 * @example
 * ```ts
 * import { acquire, isQuorumError } from "redlease";
 * import { redlock } from "redlease/redlock";
 * try {
 *   await acquire(redlock([a, b, c]), "settlement", { waitMs: 0 });
 * } catch (err) {
 *   if (isQuorumError(err)) console.log(`${err.granted}/${err.required}`, err.errors);
 *   else throw err;
 * }
 * ```
 */
export function isQuorumError(err: unknown): err is QuorumError {
  return branded(err, "QuorumError");
}

/**
 * Whether `err` is a {@linkcode StaleFenceError} from any copy of redlease (see {@linkcode isRedleaseError}).
 *
 * @param err Any value, such as a caught error.
 * @returns `true` when a fenced write was refused because a higher fence wrote the resource before.
 *
 * @example
 * ```ts
 * import { isStaleFenceError } from "redlease";
 * import { fencedIncrBy } from "redlease/fence";
 * try {
 *   await fencedIncrBy(client, lease, "{sale}:stock", -1, { floor: 0 });
 * } catch (err) {
 *   if (isStaleFenceError(err)) console.warn(`lost the sale lease to fence ${err.highest}`);
 *   else throw err;
 * }
 * ```
 */
export function isStaleFenceError(err: unknown): err is StaleFenceError {
  return branded(err, "StaleFenceError");
}
