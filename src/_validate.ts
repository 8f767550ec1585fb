// Argument checks shared by every entry point; they run before any Redis command.
import type { AcquireOptions, KeyOptions, Lease } from "./lease.ts";
import { MAX_TIMER_MS } from "./_timers.ts";

export const DEFAULT_PREFIX = "redlease";
export const DEFAULT_WATCHDOG_MS = 30_000;
export const DEFAULT_WAIT_MS = 10_000;
const MAX_NAME = 1024;
const MAX_OWNER = 512;

function show(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v);
  if (typeof v === "number" || typeof v === "boolean" || v == null) return String(v);
  if (typeof v === "function") return "a function";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : typeof v;
}

export function fail(op: string, what: string, must: string, value: unknown, Err = TypeError): never {
  throw new Err(`Cannot ${op} as '${what}' ${must}: current value is ${show(value)}`);
}

export function checkName(op: string, name: unknown): asserts name is string {
  if (typeof name !== "string" || name.length === 0 || name.length > MAX_NAME) {
    fail(op, "name", `must be a non-empty string of at most ${MAX_NAME} characters`, name, typeof name === "string" ? RangeError : TypeError);
  }
}

export function checkPrefix(op: string, options: KeyOptions | undefined): string {
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    fail(op, "options", "must be an object", options);
  }
  const prefix = options?.prefix ?? DEFAULT_PREFIX;
  if (typeof prefix !== "string" || prefix.length === 0 || /[{}]/.test(prefix)) {
    fail(op, "prefix", "must be a non-empty string without '{' or '}'", prefix, typeof prefix === "string" ? RangeError : TypeError);
  }
  return prefix;
}

function checkMs(op: string, what: string, v: unknown, min: number): number {
  if (typeof v !== "number") fail(op, what, `must be an integer from ${min} to ${MAX_TIMER_MS}`, v);
  if (!Number.isInteger(v) || v < min || v > MAX_TIMER_MS) {
    fail(op, what, `must be an integer from ${min} to ${MAX_TIMER_MS}`, v, RangeError);
  }
  return v;
}

export function checkLeaseMs(op: string, v: unknown): number {
  return checkMs(op, "leaseMs", v, 1);
}

/** Options resolved and checked. */
export interface Resolved {
  readonly name: string;
  readonly prefix: string;
  /** Lease TTL to set in ms (the fixed lease, or the watchdog period). */
  readonly ms: number;
  readonly watchdog: boolean;
  readonly waitMs: number;
  readonly signal: AbortSignal | undefined;
  readonly owner: string | undefined;
  readonly replicas: number;
  readonly replicaTimeoutMs: number;
  readonly nodeTimeoutMs: number;
  readonly retryDelayMs: number;
}

export function resolveAcquire(
  op: string,
  name: unknown,
  options: AcquireOptions | undefined,
  ownerOf: (lease: Lease) => string | undefined,
): Resolved {
  checkName(op, name);
  const prefix = checkPrefix(op, options);
  const o = options ?? {};
  let ms: number;
  let watchdog: boolean;
  if (o.leaseMs !== undefined) {
    ms = checkLeaseMs(op, o.leaseMs);
    watchdog = false;
    if (o.watchdogMs !== undefined) fail(op, "watchdogMs", "must be omitted when 'leaseMs' is given", o.watchdogMs);
  } else {
    ms = o.watchdogMs === undefined ? DEFAULT_WATCHDOG_MS : checkMs(op, "watchdogMs", o.watchdogMs, 30);
    watchdog = true;
  }
  const waitMs = o.waitMs ?? DEFAULT_WAIT_MS;
  if (typeof waitMs !== "number") fail(op, "waitMs", "must be a number", waitMs);
  if (Number.isNaN(waitMs) || waitMs < 0 || (!Number.isInteger(waitMs) && waitMs !== Infinity)) {
    fail(op, "waitMs", "must be a non-negative integer or Infinity", waitMs, RangeError);
  }
  const signal = o.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) fail(op, "signal", "must be an AbortSignal", signal);
  let owner: string | undefined;
  if (o.owner !== undefined) {
    if (typeof o.owner === "string") {
      owner = o.owner;
      if (owner.length === 0 || owner.length > MAX_OWNER) {
        fail(op, "owner", `must be a non-empty string of at most ${MAX_OWNER} characters`, owner, RangeError);
      }
    } else {
      owner = ownerOf(o.owner as Lease);
      if (owner === undefined) fail(op, "owner", "must be a string or a Lease from this library", o.owner);
    }
  }
  const replicas = o.replicas ?? 0;
  if (typeof replicas !== "number") fail(op, "replicas", "must be an integer from 0 to 100", replicas);
  if (!Number.isInteger(replicas) || replicas < 0 || replicas > 100) {
    fail(op, "replicas", "must be an integer from 0 to 100", replicas, RangeError);
  }
  const replicaTimeoutMs = o.replicaTimeoutMs ?? 1_000;
  if (typeof replicaTimeoutMs !== "number") fail(op, "replicaTimeoutMs", "must be an integer from 1 to 60000", replicaTimeoutMs);
  if (!Number.isInteger(replicaTimeoutMs) || replicaTimeoutMs < 1 || replicaTimeoutMs > 60_000) {
    fail(op, "replicaTimeoutMs", "must be an integer from 1 to 60000", replicaTimeoutMs, RangeError);
  }
  const nodeTimeoutMs = o.nodeTimeoutMs ?? Math.max(5, Math.min(50, Math.floor(ms / 200)));
  if (typeof nodeTimeoutMs !== "number") fail(op, "nodeTimeoutMs", `must be an integer from 1 to ${ms}`, nodeTimeoutMs);
  if (!Number.isInteger(nodeTimeoutMs) || nodeTimeoutMs < 1 || nodeTimeoutMs > ms) {
    fail(op, "nodeTimeoutMs", `must be an integer from 1 to ${ms} (the lease)`, nodeTimeoutMs, RangeError);
  }
  const retryDelayMs = o.retryDelayMs ?? 100;
  if (typeof retryDelayMs !== "number") fail(op, "retryDelayMs", "must be an integer from 1 to 60000", retryDelayMs);
  if (!Number.isInteger(retryDelayMs) || retryDelayMs < 1 || retryDelayMs > 60_000) {
    fail(op, "retryDelayMs", "must be an integer from 1 to 60000", retryDelayMs, RangeError);
  }
  signal?.throwIfAborted();
  return {
    name,
    prefix,
    ms,
    watchdog,
    waitMs,
    signal,
    owner,
    replicas,
    replicaTimeoutMs,
    nodeTimeoutMs,
    retryDelayMs,
  };
}
