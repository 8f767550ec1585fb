// Argument checks shared by every entry point; they run before any Redis command.
import type { AcquireOptions, CallOptions, KeyOptions, Lease } from "./lease.ts";
import type { Kind, Resolved } from "./_types.ts";
import {
  DEFAULT_CLAIM_MS,
  DEFAULT_PREFIX,
  DEFAULT_REPLICA_TIMEOUT_MS,
  DEFAULT_RETRY_DELAY_MS,
  DEFAULT_WAIT_MS,
  DEFAULT_WATCHDOG_MS,
  defaultNodeTimeoutMs,
} from "./_defaults.ts";
import { kindOf } from "./_protocol.ts";
import { MAX_TIMER_MS } from "./_timers.ts";

const MAX_NAME = 1024;
const MAX_OWNER = 512;
/** The longest `label` (what inspect() shows of a holder). */
export const MAX_LABEL = 256;
/** The most permits a lease may have. */
export const MAX_PERMITS = 1_000_000;

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
    fail(
      op,
      "name",
      `must be a non-empty string of at most ${MAX_NAME} characters`,
      name,
      typeof name === "string" ? RangeError : TypeError,
    );
  }
}

/** The longest value a leader may proclaim, in UTF-16 code units. */
const MAX_VALUE = 65_536;

/** A value to proclaim: a string of at most MAX_VALUE characters. */
export function checkValue(op: string, value: unknown): asserts value is string {
  if (typeof value !== "string") fail(op, "value", "must be a string", value);
  if (value.length > MAX_VALUE) fail(op, "value", `must be at most ${MAX_VALUE} characters`, value, RangeError);
}

/** The most names one lease may cover. */
export const MAX_NAMES = 64;

/** The names of a lease over several names: 1 to MAX_NAMES distinct valid names. */
export function checkNames(op: string, names: readonly unknown[]): asserts names is readonly string[] {
  if (names.length === 0 || names.length > MAX_NAMES) {
    fail(op, "names", `must hold 1 to ${MAX_NAMES} names`, names, RangeError);
  }
  for (const n of names) checkName(op, n);
  if (new Set(names).size !== names.length) fail(op, "names", "must not repeat a name", names, RangeError);
}

export function checkPrefix(op: string, options: KeyOptions | undefined): string {
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    fail(op, "options", "must be an object", options);
  }
  const prefix = options?.prefix;
  if (prefix === undefined) return DEFAULT_PREFIX;
  if (typeof prefix !== "string" || prefix.length === 0 || /[{}]/.test(prefix)) {
    fail(
      op,
      "prefix",
      "must be a non-empty string without '{' or '}'",
      prefix,
      typeof prefix === "string" ? RangeError : TypeError,
    );
  }
  return prefix;
}

/** An integer option from min to max: TypeError when not a number, RangeError when out of range. */
function checkInt(op: string, what: string, v: unknown, min: number, max = MAX_TIMER_MS): number {
  if (typeof v === "number" && Number.isInteger(v) && v >= min && v <= max) return v;
  fail(op, what, `must be an integer from ${min} to ${max}`, v, typeof v === "number" ? RangeError : TypeError);
}

/** The options of release(), extend() and proclaim(): CallOptions. */
export const CALL_KEYS: readonly string[] = ["timeoutMs"];
/** The options of inspect() and forceUnlock(): KeyOptions and CallOptions. */
export const KEY_CALL_KEYS: readonly string[] = ["prefix", "timeoutMs"];
/** The options of acquire() and withLock(): AcquireOptions. */
export const ACQUIRE_KEYS: readonly string[] = [
  "prefix",
  "shared",
  "permits",
  "weight",
  "leaseMs",
  "watchdogMs",
  "waitMs",
  "signal",
  "owner",
  "label",
  "replicas",
  "replicaTimeoutMs",
  "claimMs",
  "lockDelayMs",
  "nodeTimeoutMs",
  "retryDelayMs",
];

/**
 * Fail with a TypeError for a key of `options` that is not one of `keys`, naming the closest valid one: in plain
 * JavaScript a misspelt option (`{ wait: 1000 }`) would otherwise be ignored and its default used. Cheap enough for
 * the uncontended acquire: a loop over the keys given (for…in over a plain object allocates nothing), each looked up
 * in a short list; the suggestion is worked out only when one is unknown.
 */
export function checkKeys<T extends object | undefined>(op: string, options: T, keys: readonly string[]): T {
  for (const key in options) if (!keys.includes(key)) unknownKey(op, key, keys);
  return options;
}

function unknownKey(op: string, key: string, keys: readonly string[]): never {
  let best = "", least = Math.max(2, key.length >> 1) + 1;
  for (const k of keys) {
    const d = distance(key.toLowerCase(), k.toLowerCase());
    if (d < least) [best, least] = [k, d];
  }
  const hint = best ? `did you mean '${best}'?` : `valid options: ${keys.join(", ")}`;
  throw new TypeError(`Cannot ${op}: unknown option '${key.length > 40 ? key.slice(0, 40) + "…" : key}' (${hint})`);
}

/** The edit distance (Levenshtein) between `a` and `b`. */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length];
}

/**
 * The `timeoutMs` of a CallOptions object, or undefined for the call's default; an unknown key (one not in `keys`)
 * is a TypeError.
 */
export function checkCallOptions(
  op: string,
  options: CallOptions | undefined,
  keys: readonly string[] = CALL_KEYS,
): number | undefined {
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    fail(op, "options", "must be an object", options);
  }
  checkKeys(op, options, keys);
  return options?.timeoutMs === undefined ? undefined : checkInt(op, "timeoutMs", options.timeoutMs, 1);
}

export function checkLeaseMs(op: string, v: unknown): number {
  return checkInt(op, "leaseMs", v, 1);
}

/** The options of acquire() and its kin, checked (in the order below, which decides the error) and with defaults. */
export function resolveAcquire(
  op: string,
  name: unknown,
  options: AcquireOptions | undefined,
  ownerOf: (lease: Lease) => string | undefined,
): Resolved {
  checkName(op, name);
  const prefix = checkPrefix(op, options);
  const opts = checkKeys(op, options ?? {}, ACQUIRE_KEYS);
  const ms = checkLifetime(op, opts);
  const watchdog = opts.leaseMs === undefined;
  const waitMs = checkWaitMs(op, opts.waitMs ?? DEFAULT_WAIT_MS);
  const signal = opts.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) fail(op, "signal", "must be an AbortSignal", signal);
  const owner = checkOwner(op, opts.owner, ownerOf);
  const exactOwner = opts.owner !== undefined && typeof opts.owner !== "string";
  const label = checkLabel(op, opts.label, opts.owner);
  const replicas = checkInt(op, "replicas", opts.replicas ?? 0, 0, 100);
  const replicaTimeoutMs = checkInt(
    op,
    "replicaTimeoutMs",
    opts.replicaTimeoutMs ?? DEFAULT_REPLICA_TIMEOUT_MS,
    1,
    60_000,
  );
  const nodeTimeoutMs = checkInt(op, "nodeTimeoutMs", opts.nodeTimeoutMs ?? defaultNodeTimeoutMs(ms), 1, ms);
  const retryDelayMs = checkInt(op, "retryDelayMs", opts.retryDelayMs ?? DEFAULT_RETRY_DELAY_MS, 1, 60_000);
  const claimMs = checkInt(op, "claimMs", opts.claimMs ?? DEFAULT_CLAIM_MS, 10, 60_000);
  const lockDelayMs = checkInt(op, "lockDelayMs", opts.lockDelayMs ?? 0, 0);
  const kind = checkKind(op, opts.shared, opts.permits, opts.weight);
  signal?.throwIfAborted();
  return {
    claimMs,
    lockDelayMs,
    name,
    prefix,
    ms,
    watchdog,
    waitMs,
    signal,
    owner,
    exactOwner,
    label,
    replicas,
    replicaTimeoutMs,
    nodeTimeoutMs,
    retryDelayMs,
    kind,
  };
}

/** The lease's time to live: `leaseMs` (no watchdog), or else the watchdog's `watchdogMs`; never both. */
function checkLifetime(op: string, opts: AcquireOptions): number {
  if (opts.leaseMs === undefined) {
    return opts.watchdogMs === undefined ? DEFAULT_WATCHDOG_MS : checkInt(op, "watchdogMs", opts.watchdogMs, 30);
  }
  const ms = checkLeaseMs(op, opts.leaseMs);
  if (opts.watchdogMs !== undefined) {
    fail(op, "watchdogMs", "must be omitted when 'leaseMs' is given", opts.watchdogMs);
  }
  return ms;
}

function checkWaitMs(op: string, waitMs: unknown): number {
  if (typeof waitMs !== "number") fail(op, "waitMs", "must be a number", waitMs);
  if (Number.isNaN(waitMs) || waitMs < 0 || (!Number.isInteger(waitMs) && waitMs !== Infinity)) {
    fail(op, "waitMs", "must be a non-negative integer or Infinity", waitMs, RangeError);
  }
  return waitMs;
}

/** The owner string of the `owner` option: the string given, or the owner of the Lease given. */
function checkOwner(
  op: string,
  owner: AcquireOptions["owner"],
  ownerOf: (lease: Lease) => string | undefined,
): string | undefined {
  if (owner === undefined) return undefined;
  if (typeof owner !== "string") {
    const leaseOwner = ownerOf(owner as Lease);
    if (leaseOwner === undefined) fail(op, "owner", "must be a string or a Lease from this library", owner);
    return leaseOwner;
  }
  if (owner.length === 0 || owner.length > MAX_OWNER || /\p{Cs}/u.test(owner)) {
    fail(
      op,
      "owner",
      `must be a non-empty string of at most ${MAX_OWNER} characters, without lone surrogates`,
      owner,
      RangeError,
    );
  }
  return owner;
}

function checkLabel(op: string, label: unknown, owner: unknown): string | undefined {
  if (label === undefined) return undefined;
  if (typeof label !== "string") fail(op, "label", "must be a string", label);
  // Printable on one line, so that a listing of holders stays a table.
  if (label.length === 0 || label.length > MAX_LABEL || /[\p{Cc}\p{Cs}]/u.test(label)) {
    fail(
      op,
      "label",
      `must be 1 to ${MAX_LABEL} characters, without control characters or lone surrogates`,
      label,
      RangeError,
    );
  }
  // An owner's identity is its string: a label there would make the same owner another one.
  if (owner !== undefined) {
    fail(op, "label", "cannot be combined with 'owner' (a Lease passed as owner keeps its label)", label);
  }
  return label;
}

/**
 * The kind of lease: exclusive, `shared` (a boolean) or with `permits`, which `shared` excludes; `weight`, only with
 * `permits`, from 1 to their number.
 */
function checkKind(op: string, shared: unknown, permits: unknown, weight: unknown): Kind {
  const isShared = shared !== undefined && shared !== false;
  if (isShared && shared !== true) fail(op, "shared", "must be a boolean", shared);
  if (permits !== undefined && isShared) fail(op, "permits", "cannot be combined with 'shared'", permits);
  const n = permits === undefined ? undefined : checkInt(op, "permits", permits, 1, MAX_PERMITS);
  if (weight !== undefined && n === undefined) fail(op, "weight", "can only be given with 'permits'", weight);
  return kindOf(isShared, n, weight === undefined ? 1 : checkInt(op, "weight", weight, 1, n));
}

/**
 * The options of observe() and watch() besides `prefix`: `signal` (an AbortSignal) and `pollMs` (an integer from 10
 * to 3600000), each optional; no other key.
 */
export function checkFollowOptions(
  op: string,
  options: { readonly signal?: AbortSignal; readonly pollMs?: number } | undefined,
): { signal: AbortSignal | undefined; pollMs: number | undefined } {
  checkKeys(op, options, ["prefix", "signal", "pollMs"]);
  const signal = options?.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) fail(op, "signal", "must be an AbortSignal", signal);
  const pollMs = options?.pollMs;
  if (
    pollMs !== undefined &&
    (typeof pollMs !== "number" || !Number.isInteger(pollMs) || pollMs < 10 || pollMs > 3_600_000)
  ) {
    const Err = typeof pollMs === "number" ? RangeError : TypeError;
    fail(op, "pollMs", "must be an integer from 10 to 3600000", pollMs, Err);
  }
  return { signal, pollMs };
}
