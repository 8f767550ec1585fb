// What the chaos workers and the checker share: the configuration a worker gets, the record of each critical
// section it ran, and the scripts of the protected "resource" (a separate redis-server).
import type { ResourceConfig, SaleOutcome, SinkId } from "./_resource.ts";

/**
 * Every resource script reads the resource server's clock: `TIME` as microseconds, and the script's position in
 * the server's own order of resource commands (an INCR of the ops key, KEYS[3]). The checker decides whether two
 * critical sections overlapped from these alone, on this one server's clock, never from the workers' clocks. The
 * sequence number is the exact order (two scripts can run within the same microsecond); TIME gives durations.
 */
const STAMP = `local t = redis.call('TIME')
local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local op = redis.call('INCR', KEYS[3])`;

/** The Lua scripts run on the resource server (EVAL: they are tiny and that server is never faulted). */
export const RESOURCE = {
  /**
   * The read half of the non-atomic read–sleep–write, and the first resource command of a section: the counter
   * and how many writes the log holds so far.
   * KEYS: counter, write log, ops. Returns { counter, log length, op, server µs }.
   */
  read: `${STAMP}
return { tonumber(redis.call('GET', KEYS[1]) or '0'), redis.call('LLEN', KEYS[2]), op, us }`,
  /**
   * The write half: SET the counter to the value computed from the earlier read, returning what it overwrote,
   * and append the writer's tag to the write log (so the checker can tell whose writes came in between).
   * KEYS: counter, write log, ops. ARGV: new value, writer tag. Returns { overwritten value, log length after,
   * op, server µs }.
   */
  write: `${STAMP}
local old = tonumber(redis.call('GET', KEYS[1]) or '0')
redis.call('SET', KEYS[1], ARGV[1])
return { old, redis.call('RPUSH', KEYS[2], ARGV[2]), op, us }`,
  /**
   * The fenced register, and the last resource command of a section: accept a write only if its token is above
   * the last accepted one, and log every accepted token with the server time.
   * KEYS: register, accepted log, ops. ARGV: token, writer tag. Returns { 1 accepted / 0 rejected, op, server µs }.
   */
  fenced: `${STAMP}
if tonumber(ARGV[1]) > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. t[1] .. string.format('%06d', tonumber(t[2])))
  return { 1, op, us }
end
return { 0, op, us }`,
} as const;

/** Keys on the resource server for one scenario. */
export function resourceKeys(prefix: string) {
  return {
    counter: `${prefix}:counter`,
    writes: `${prefix}:writes`,
    register: `${prefix}:register`,
    accepted: `${prefix}:accepted`,
    /** The resource server's command sequence (see STAMP). */
    ops: `${prefix}:ops`,
  };
}

/** A fault the worker applies to itself inside one critical section. */
export type WorkerFault =
  /** Print `PAUSEME` and sleep `sleepMs`; the parent SIGSTOPs the process meanwhile and SIGCONTs it later. */
  | { kind: "pause"; atMs: number; sleepMs: number }
  /**
   * Print `PARTITIONME` and sleep `sleepMs`; the parent cuts this worker's route to the lock server meanwhile (both
   * connections, both ways, no RST) and heals it `Victim.stopMs` later. The resource servers stay reachable.
   */
  | { kind: "partition"; atMs: number; sleepMs: number }
  /** Block the event loop synchronously for `blockMs`. */
  | { kind: "block"; atMs: number; blockMs: number };

/** See WorkerConfig.kind. */
export type LeaseMode = "names" | "elect" | "shared" | "permits" | "weighted";

/**
 * A lock side other than one plain redis-server (the topology scenarios, chaos/_topology.ts): the worker connects
 * with the driver's own cluster or sentinel client, directly (no fault proxy: the topology itself is the fault).
 */
export type LockTarget =
  /** Redis Cluster through node-redis v4 (`redis`) or v5 (`redis5`) createCluster; rootNodes are redis:// urls. */
  | { kind: "cluster"; driver: "redis4" | "redis5"; rootNodes: string[] }
  /** A Sentinel group through node-redis v5's createSentinel, or ioredis in sentinel mode (through `ioredis()`). */
  | {
    kind: "sentinel";
    driver: "redis5" | "ioredis";
    name: string;
    sentinels: Array<{ host: string; port: number }>;
  };

export interface WorkerConfig {
  /** Worker id, e.g. "bun-1". */
  id: string;
  /** The plain lock server (through the worker's proxy), unless `lock` names a topology. */
  lockUrl: string;
  /** A cluster or sentinel lock side instead of `lockUrl`. */
  lock?: LockTarget;
  /** The acquire option `replicas` (WAIT for that many replicas' acks on every grant). */
  replicas?: number;
  /**
   * An acquire that has not settled this long after waitMs is recorded as hung (WorkerResult.hung); the worker
   * waits for it until the end of the run, then gives up (default 5000).
   */
  hangMarginMs?: number;
  resUrl: string;
  /** The lease name all workers contend for. */
  name: string;
  /** Resource key prefix (see resourceKeys). */
  resPrefix: string;
  /** Watchdog mode (watchdogMs) or a fixed lease (leaseMs). */
  watchdogMs?: number;
  leaseMs?: number;
  waitMs: number;
  /** The sleep between the read and the write inside the critical section, ms. */
  csSleepMs: number;
  /** The same for this worker's first section only (a long first hold: ScenarioSpec.longHolder). */
  firstCsSleepMs?: number;
  /** Faults this worker applies to itself, at `atMs` after GO (first section that starts after that). */
  faults?: WorkerFault[];
  /** The acquire option `claimMs` (default: the library's). */
  claimMs?: number;
  /** A fixed `owner` string for every acquire of this worker (default: a random owner per acquire). */
  owner?: string;
  /**
   * The kind of lease (default: one exclusive lease). "names": one lease over the name and `<name>:b`; "elect":
   * campaign() for the name; "shared": every third section of a worker is a writer (exclusive), the others readers
   * (shared, read-only); "permits": one of `permits` permits (read-only sections); "weighted": `weight` of `permits`
   * permits (read-only sections).
   */
  kind?: LeaseMode;
  permits?: number;
  /** The permits this worker takes at once ("weighted"). */
  weight?: number;
  /**
   * Checker self-test only: do not acquire the lease at all. Each "section" takes a fresh fence from an INCR on
   * the lock server (as if granted) and runs unprotected, so the checker must report overlaps and lost updates.
   */
  noLock?: boolean;
  /**
   * The resource scenarios (chaos/_resource.ts): inside each section, after the counter write, also sell one item
   * through the fence helpers (or plain writes, with `check: false`) to the Redis or PostgreSQL resource.
   */
  resource?: ResourceConfig;
  /**
   * More acquire options for every acquire of this worker (JSON: plain values only), spread over the ones above,
   * e.g. an option a scenario is about.
   */
  acquireOptions?: Record<string, unknown>;
}

/** What the worker observed in a section where it applied a fault to itself. */
export interface FaultRecord {
  kind: "pause" | "block" | "partition";
  /** How long the sleep (pause, partition) or block actually took, ms. */
  tookMs: number;
  /** lease.signal.aborted read first thing after the pause/block. */
  abortedAtResume: boolean;
  /** lease.remainingMs read at the same moment. */
  remainingAtResume: number;
  /** lease.signal.aborted after yielding to the event loop once (a setTimeout(0)). */
  abortedAfterYield: boolean;
  /** The LeaseLostError `why`, if it had aborted. */
  why?: string;
}

/**
 * One critical section (one held lease) as a worker recorded it. `start`, `end`, `lostAt` and the other wall
 * times are the worker's wall ms (timeOrigin + now(): each process has its own clock, so they only order sections
 * of one worker reliably; `WorkerResult.clock` maps them to the servers' clock); `srv*` and `op*` are on the
 * resource server's clock, the one the checker decides overlaps on.
 */
export interface Section {
  w: string;
  /** A read-only section (a shared hold's reader, or a permit): it may overlap other read-only sections. */
  readOnly?: boolean;
  /** The permits the section's hold took (weighted permits; else 1). */
  weight?: number;
  seq: number;
  fence: number;
  /** Wall ms when acquire() returned the lease. */
  start: number;
  /** Wall ms when the critical section ended (just before release() was called). */
  end: number;
  /** Wall ms when the acquire() call that returned this lease started (the worker waited from then on). */
  acqStart?: number;
  /**
   * Wall ms when `lease.signal` aborted, whatever the reason: a LeaseLostError, or release() (which aborts it
   * synchronously as it starts). The end of the holder's belief that it holds the lease.
   */
  abortAt?: number;
  /** The lease's local deadline (`timeOrigin + lease.expiresAt`, wall ms) read at that moment. */
  deadlineAt?: number;
  /** Wall ms when release() settled. */
  relEnd?: number;
  /**
   * The section on the resource server's clock: TIME (µs) of its first resource command (the read) and of its
   * last one that completed (the fenced write, else the counter write, else the read), and the positions of the
   * same two commands in the server's command order. Absent if no resource command completed.
   */
  srvStart?: number;
  srvEnd?: number;
  opStart?: number;
  opEnd?: number;
  /** Counter value and write-log length at the read. */
  read?: number;
  readLen?: number;
  /** Counter value the write overwrote, and the write's 1-based position in the write log. */
  old?: number;
  writeIdx?: number;
  /** Fenced write: 1 accepted, 0 rejected (absent if not attempted). */
  fenced?: 0 | 1;
  /** lease.signal.aborted just before the fenced write. */
  abortedAtWrite?: boolean;
  /** When the signal aborted with a LeaseLostError (wall ms) and why, if it did before the release. */
  lostAt?: number;
  why?: string;
  /** release() result, or the class of the error it threw. */
  released?: boolean;
  releaseErr?: string;
  /** Error class that ended the section early. */
  err?: string;
  fault?: FaultRecord;
  /** The resource scenarios: the outcome of the section's sale at each sink (chaos/_resource.ts)… */
  sales?: Partial<Record<SinkId, SaleOutcome>>;
  /** …or the class of the error it threw. */
  saleErrs?: Partial<Record<SinkId, string>>;
}

/**
 * How this worker's wall clock maps to the servers' clock: server ms ≈ wall + offsetMs, within ±errMs. Measured
 * with TIME on the resource server (never faulted), taking the sample with the shortest round trip, once before
 * GO and once after the loop. Both redis-servers run on this host and read the same system clock (gettimeofday),
 * so this is also the lock server's clock, on which the fences are stamped.
 */
export interface ClockSync {
  offsetMs: number;
  errMs: number;
  /** The two measurements (before GO, after the loop). */
  before: { offsetMs: number; errMs: number };
  after: { offsetMs: number; errMs: number };
}

export interface WorkerResult {
  id: string;
  runtime: string;
  pid: number;
  sections: Section[];
  /** Errors by class: acquire failures, release failures, section failures, client 'error' events. */
  errors: Record<string, number>;
  /** The wall → server clock mapping (absent from synthetic inputs: the clock-based metrics are then skipped). */
  clock?: ClockSync;
  /** [start, end] wall ms of every acquire() call that failed (the worker was waiting then, too). */
  failedWaits?: Array<[number, number]>;
  /** Acquire calls that did not settle within waitMs + hangMarginMs. */
  hung?: HungAcquire[];
}

/** An acquire() call that had not settled waitMs + hangMarginMs after it started (wall ms of this worker). */
export interface HungAcquire {
  acqStart: number;
  /** When the worker noticed (acqStart + waitMs + hangMarginMs). */
  detectedAt: number;
  /** When it settled at last, and how ("lease": it returned a lease, used as a section; or the error class). */
  settledAt?: number;
  outcome: string;
}

/** One clock sample: `time()` returns the server's TIME as [seconds, microseconds]. */
export async function syncClock(
  time: () => Promise<unknown>,
  samples = 12,
): Promise<{ offsetMs: number; errMs: number }> {
  let best = { offsetMs: 0, errMs: Infinity };
  for (let i = 0; i < samples; i++) {
    const t0 = wall();
    const [sec, usec] = (await time()) as [string, string];
    const t1 = wall();
    const srv = Number(sec) * 1000 + Number(usec) / 1000;
    const errMs = (t1 - t0) / 2;
    if (errMs < best.errMs) best = { offsetMs: srv - (t0 + t1) / 2, errMs };
  }
  return best;
}

/** Combine the two measurements: their mean, with an error that covers both and the drift between them. */
export function combineClock(
  before: { offsetMs: number; errMs: number },
  after: { offsetMs: number; errMs: number },
): ClockSync {
  const offsetMs = (before.offsetMs + after.offsetMs) / 2;
  const errMs = Math.max(before.errMs, after.errMs) + Math.abs(after.offsetMs - before.offsetMs) / 2;
  return { offsetMs, errMs, before, after };
}

/** A short, stable class name for an error: its name, plus the first word of a Redis error reply. */
export function errorClass(e: unknown): string {
  if (!(e instanceof Error)) return `non-error:${typeof e}`;
  // node-redis error classes keep name "Error": prefer the constructor's name.
  const ctor = e.constructor?.name;
  const name = ctor && ctor !== "Error" ? ctor : e.name || "Error";
  if (name === "LeaseLostError") return `LeaseLostError:${(e as { why?: string }).why}`;
  // Redis error replies ("NOSCRIPT …", "OOM …", "LOADING …") and system errors (ECONNREFUSED): keep the code.
  const sys = (e as { code?: unknown }).code;
  const code = typeof sys === "string" ? sys : /^([A-Z]{3,}[A-Z_]*)\b/.exec(e.message)?.[1];
  return code ? `${name}:${code}` : name;
}

export const wall = (): number => performance.timeOrigin + performance.now();
