// The types every layer of src/ shares, in a module that imports nothing, so that any module can name them without
// depending on the module that happened to need them first. The layering of src/ is in src/README.md; the checker is
// scripts/check_imports.ts.

/**
 * How a hold shares its lease, as the scripts and queue entries write it: "x" exclusive, "s" shared, "p<n>" one of
 * n permits, "p<n>w<k>" k of n permits (a weighted hold). Shared and permit holds live in the lease's holder set (see
 * lua/_holders.lua). Only _protocol.ts reads or writes these letters (kindOf, kindName, permitsOf, weightOf).
 */
export type Kind = "x" | "s" | `p${number}` | `p${number}w${number}`;

/** The keys of one lease; all share the lease name as their hash tag (one cluster slot). */
export interface LeaseKeys {
  /** The lease key: a string, the grant record (fence, attempt, holds, claim deadline, owner; see lua/_record.lua). */
  readonly hash: string;
  /** The FIFO wait queue. */
  readonly queue: string;
  /** The holder set of shared holds and permits (owner -> expiry), and their records (owner -> fence, holds). */
  readonly holders: string;
  readonly holderRecords: string;
  /** The four keys in the order the lease scripts take them (built once: every call of the lease sends them). */
  readonly all: readonly string[];
}

/** How long a call may take: until `until` on the performance.now() clock, and no longer than `signal` allows. */
export interface Bound {
  readonly until: number;
  readonly signal?: AbortSignal;
  /** The lease the call is about (for the timeout error). */
  readonly name: string;
}

/** Options resolved and checked (see resolveAcquire). */
export interface Resolved {
  readonly name: string;
  readonly prefix: string;
  /** Lease TTL to set in ms (the fixed lease, or the watchdog period). */
  readonly ms: number;
  readonly watchdog: boolean;
  readonly waitMs: number;
  readonly signal: AbortSignal | undefined;
  readonly owner: string | undefined;
  /** Whether `owner` is a Lease's owner, kept exactly (a string given is scoped to the client). */
  readonly exactOwner: boolean;
  /** What a new owner carries after its id (see newOwner), or undefined. */
  readonly label: string | undefined;
  readonly replicas: number;
  readonly replicaTimeoutMs: number;
  readonly nodeTimeoutMs: number;
  readonly retryDelayMs: number;
  readonly claimMs: number;
  /** The lock delay in ms (0: none). */
  readonly lockDelayMs: number;
  /** How the hold shares the lease: "x" exclusive, "s" shared, "p<n>" one of n permits, "p<n>w<k>" k of them. */
  readonly kind: Kind;
  /** A leadership (campaign): its events say so. */
  readonly leader?: boolean;
}

/**
 * Where redlease's own messages go: the warnings it cannot throw (a risky server setting, a lease that could not be
 * given back and will lapse by its TTL) and, if `debug` is there, what it retries by itself (a renewal that failed
 * and is tried again, a lease lost). Errors the caller can act on are still thrown or given as `lease.signal`'s
 * reason; the logger only adds a record. `console` fits, and so does any logger with these two methods.
 *
 * @example Route redlease's warnings into your logger, with their details as fields
 * ```ts
 * import { configure } from "redlease";
 * configure(client, { logger: { warn: (message, details) => log.warn({ ...details, lib: "redlease" }, message) } });
 * ```
 */
export interface Logger {
  /** Something an operator should see: a server setting that can lose leases, a give-back that never got through. */
  warn(message: string, details: LogDetails): void;
  /** What redlease handles by itself (a renewal retried, a lease lost: its signal has aborted). Off unless given. */
  debug?(message: string, details: LogDetails): void;
}

/** The facts of a {@linkcode Logger} message, as fields. */
export interface LogDetails {
  /** The lease name the message is about, if any. */
  readonly name?: string;
  /** The error behind it, if any. */
  readonly error?: unknown;
  /** The Redis `maxmemory-policy`, for the eviction warning. */
  readonly policy?: string;
  /** For a lost lease: why (see `LeaseLostError.why`). */
  readonly why?: string;
}
