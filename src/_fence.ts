// What the fenced writes (src/fenced_*.ts) share: their argument checks, the fence a lease carries for a resource,
// the key of the resource's fence mark, and the script call that turns a refusal into a StaleFenceError. Only the
// `redlease/fence` entry imports it, so the core bundle carries none of it.
import { checkClient, type ClientState, stateOf } from "./_client.ts";
import { DEFAULT_CALL_TIMEOUT_MS } from "./_defaults.ts";
import { fencedEval, type Script } from "./_scripts.ts";
import { checkKeys, fail } from "./_validate.ts";
import { slotOf } from "./adapters/_slot.ts";
import { StaleFenceError } from "./errors.ts";
import type { Lease } from "./lease.ts";

/**
 * How long a resource's fence mark outlives the resource, by default: 24 hours. A writer whose lease was taken
 * over while it was paused (a GC pause, a frozen VM, a long network partition) is refused while the mark lives;
 * one paused for longer than this after the resource was deleted or expired could create it again.
 *
 * @example
 * ```ts
 * await fencedDel(client, lease, "{job:7}:state", { retainMs: DEFAULT_RETAIN_MS * 7 }); // a week
 * ```
 */
export const DEFAULT_RETAIN_MS = 86_400_000;
/** The longest `retainMs`, `px` and `timeoutMs`: about 24.8 days, in ms. */
const MAX_MS = 2_147_483_647;

/**
 * What carries the fence of a fenced write: a {@linkcode Lease} from `acquire` or `withLock` (its fence, checked to
 * be still held first), or a fence carried elsewhere, such as in a queue message: `{ fence }` or the number itself.
 *
 * @example A worker writes with the fence its job was queued with
 * ```ts
 * const job: { id: string; fence: number } = JSON.parse(message);
 * await fencedSet(client, job.fence, `{job:${job.id}}:state`, "done");
 * ```
 */
export type FenceSource = Lease | { readonly fence: number } | number;

/** Options of every fenced write. */
export interface FenceOptions {
  /**
   * Which of the lease's names guards this resource, for a lease over several names (required then: each name has
   * its own fence, `lease.fences[i]`). For a lease over one name it may be given and must be that name; a name that
   * is not the lease's is a `TypeError`. Not with a fence given as a number or `{ fence }`.
   * @default {the lease's only name}
   * @example A lease over two names guards the resource of each with that name's fence
   * ```ts
   * await using lease = await acquire(client, ["account:1", "account:2"]);
   * await fencedIncrBy(client, lease, "{account:1}:balance", -100, { name: "account:1", floor: 0 });
   * await fencedIncrBy(client, lease, "{account:2}:balance", 100, { name: "account:2" });
   * ```
   */
  readonly name?: string;
  /**
   * How long the resource's fence mark outlives the resource, in ms: after a write the mark expires this long
   * after the resource does (when the resource has a TTL; the mark has none while the resource has none), and
   * this long after a write that leaves the resource absent (`fencedDel`). Within it a stale writer stays refused;
   * after it the mark is gone, so deleted resources leave no key behind for good. A writer paused for longer than
   * this after the resource went away could create it again. Integer from 1 to 2147483647.
   * @default {86400000 (24 hours)}
   * @example Resources that churn: keep their marks for an hour
   * ```ts
   * await fencedDel(client, lease, "{job:7}:state", { retainMs: 3_600_000 });
   * ```
   */
  readonly retainMs?: number;
  /**
   * How long the call may wait for Redis, in ms; it then rejects with `RedisTimeoutError` (whether the write was
   * made is then unknown). Integer from 1 to 2147483647.
   * @default {5000}
   * @example
   * ```ts
   * await fencedSet(client, lease, "{report}:body", text, { timeoutMs: 500 });
   * ```
   */
  readonly timeoutMs?: number;
  /**
   * Stops waiting for the reply: the call rejects with `signal.reason` (the write may still be made). An aborted
   * signal rejects before any command.
   * @default {undefined}
   * @example
   * ```ts
   * await withLock(client, "report", (signal, lease) => fencedSet(client, lease, "{report}:body", text, { signal }));
   * ```
   */
  readonly signal?: AbortSignal;
}

/** A fenced call, checked and ready to send. */
export interface Prepared {
  readonly state: ClientState;
  /** The resource and its mark. */
  readonly keys: readonly [string, string];
  readonly fence: number;
  /** The lease name whose fence guards the write, or "". */
  readonly lockName: string;
  /** ARGV[1] and ARGV[2] of every fenced script: the fence and retainMs. */
  readonly head: readonly [string, string];
  readonly until: number;
  readonly signal: AbortSignal | undefined;
  readonly sharded: boolean;
}

/**
 * The key of the fence mark of resource `key`: `<key>:fence` (the same hash tag, so the same Cluster slot). It holds
 * the highest fence that wrote `key`, as decimal digits; do not write it yourself.
 *
 * @param key The resource key.
 * @returns The key of its mark.
 *
 * @example
 * ```ts
 * markOf("{sale}:stock"); // "{sale}:stock:fence"
 * const highest = Number(await client.get(markOf("{sale}:stock")));
 * ```
 */
export function markOf(key: string): string {
  return `${key}:fence`;
}

/** Whether `key` has a non-empty hash tag: a `{` with a `}` after it and something between (as slotOf reads it). */
function hasTag(key: string): boolean {
  const open = key.indexOf("{");
  return open >= 0 && key.indexOf("}", open + 1) > open + 1;
}

function isLease(value: object): value is Lease {
  const candidate = value as Partial<Lease>;
  return Array.isArray(candidate.names) && Array.isArray(candidate.fences) && candidate.signal instanceof AbortSignal;
}

export function checkKey(op: string, what: string, key: unknown): asserts key is string {
  if (typeof key !== "string" || key.length === 0) {
    fail(op, what, "must be a non-empty string", key, typeof key === "string" ? RangeError : TypeError);
  }
}

export function checkInteger(op: string, what: string, v: unknown): asserts v is number {
  if (typeof v !== "number") fail(op, what, "must be a safe integer", v);
  if (!Number.isSafeInteger(v)) fail(op, what, "must be a safe integer", v, RangeError);
}

function checkMs(op: string, what: string, v: unknown, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v === "number" && Number.isInteger(v) && v >= 1 && v <= MAX_MS) return v;
  fail(op, what, `must be an integer from 1 to ${MAX_MS}`, v, typeof v === "number" ? RangeError : TypeError);
}

/**
 * A checked options object of a fenced write (undefined is an empty one): FenceOptions, plus the `extra` keys of the
 * write's own options; any other key is a TypeError.
 */
export function checkOptions<T extends FenceOptions>(op: string, options: T | undefined, ...extra: string[]): T {
  if (options === undefined) return {} as T;
  if (typeof options !== "object" || options === null) fail(op, "options", "must be an object", options);
  checkKeys(op, options, ["name", "retainMs", "timeoutMs", "signal", ...extra]);
  return options;
}

/** The fence a write carries, and its lease's name and signal (none for a fence given as `{ fence }` or a number). */
export interface Resolved {
  readonly fence: number;
  /** The lease name whose fence guards the write, or "". */
  readonly lockName: string;
  readonly leaseSignal: AbortSignal | undefined;
}

/**
 * Check `lease` (a FenceSource) and `name`, and resolve the fence they give: what every fenced write, to Redis or to
 * SQL, takes first (no command is sent). Does not check whether a lease has ended: its caller does, after its own
 * arguments, with `leaseSignal?.throwIfAborted()`.
 */
export function resolveFence(op: string, lease: unknown, name: unknown): Resolved {
  if (name !== undefined && typeof name !== "string") fail(op, "name", "must be a string", name);
  let fence: unknown, lockName = "", leaseSignal: AbortSignal | undefined;
  if (typeof lease === "object" && lease !== null && isLease(lease)) {
    const names = lease.names;
    if (name === undefined && names.length > 1) {
      fail(op, "name", "must say which of the lease's names guards this resource (it holds several)", name);
    }
    const i = name === undefined ? 0 : names.indexOf(name);
    if (i < 0) {
      fail(op, "name", `must be one of the lease's names, not a lease from another name (${names.join(", ")})`, name);
    }
    fence = lease.fences[i];
    lockName = names[i];
    leaseSignal = lease.signal;
  } else if (typeof lease === "object" && lease !== null && "fence" in lease) {
    fence = (lease as { fence: unknown }).fence;
  } else if (typeof lease === "number") {
    fence = lease;
  } else {
    fail(op, "lease", "must be a Lease, a { fence } object or a fence number", lease);
  }
  if (lockName === "" && name !== undefined) {
    fail(op, "name", "must be omitted when 'lease' is a fence rather than a Lease", name);
  }
  if (typeof fence !== "number") fail(op, "fence", "must be a positive safe integer", fence);
  if (!Number.isSafeInteger(fence) || fence < 1) {
    fail(op, "fence", "must be a positive safe integer", fence, RangeError);
  }
  return { fence, lockName, leaseSignal };
}

/**
 * Check what every fenced write takes and resolve the fence (no command is sent): `key` is the guarded resource.
 * A released or lost lease throws its signal's reason (an `AbortError` DOMException, or `LeaseLostError`).
 */
export function prepare(
  op: string,
  client: unknown,
  lease: unknown,
  key: unknown,
  options: FenceOptions,
): Prepared {
  checkClient(op, client);
  const { fence, lockName, leaseSignal } = resolveFence(op, lease, options.name);
  checkKey(op, "key", key);
  const state = stateOf(client);
  const sharded = state.driver.sharded === true;
  if (sharded && !hasTag(key)) {
    fail(
      op,
      "key",
      "must have a non-empty hash tag on a Redis Cluster (as in '{sale}:stock'), so that its fence mark shares its slot",
      key,
    );
  }
  const retainMs = checkMs(op, "retainMs", options.retainMs, DEFAULT_RETAIN_MS);
  const timeoutMs = checkMs(op, "timeoutMs", options.timeoutMs, DEFAULT_CALL_TIMEOUT_MS);
  const signal = options.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) fail(op, "signal", "must be an AbortSignal", signal);
  // A hold that has ended carries a fence nobody may write with any more: its reason says why.
  leaseSignal?.throwIfAborted();
  signal?.throwIfAborted();
  return {
    state,
    keys: [key, markOf(key)],
    fence,
    lockName,
    head: [String(fence), String(retainMs)],
    until: performance.now() + timeoutMs,
    signal,
    sharded,
  };
}

/** On a Cluster: a TypeError unless every key of `keys` is in the slot of the first. */
export function checkSlots(op: string, call: Prepared, keys: readonly string[]): void {
  if (!call.sharded) return;
  const slot = slotOf(keys[0]);
  if (keys.some((k) => slotOf(k) !== slot)) {
    fail(op, "keys", "must all be in the slot of keys[0] on a Redis Cluster (give them the same hash tag)", keys);
  }
}

/**
 * Run a fenced script: KEYS are the resource, `keys` after it (fencedEval's), then the mark; ARGV are `args`
 * followed by the fence and retainMs for fencedEval (`tail`), else the fence and retainMs followed by `args`. A
 * refusal (`{0, highest}`) rejects with StaleFenceError; any other reply is `decode`d.
 */
export function runFenced<R>(
  call: Prepared,
  script: Script,
  args: readonly string[],
  decode: (reply: readonly unknown[]) => R,
  keys?: readonly string[],
): Promise<R> {
  const [key, mark] = call.keys;
  const allKeys = keys ? [...keys, mark] : [key, mark];
  const allArgs = keys ? [...args, ...call.head] : [...call.head, ...args];
  const bound = { until: call.until, signal: call.signal, name: call.lockName || key };
  return call.state.run(script, allKeys, allArgs, bound, (reply) => {
    const fields = reply as readonly unknown[];
    if (Number(fields[0]) === 0) throw new StaleFenceError(call.lockName, key, call.fence, Number(fields[1]));
    return decode(fields);
  });
}

/** fencedEval's scripts by body: the caller's body inside the check, with its SHA1 (the last 100 bodies). */
const wrapped = new Map<string, Promise<Script>>();

/** The fenced script around `body`, hashed with Web Crypto (no build-time SHA1 exists for it). */
export function wrap(body: string): Promise<Script> {
  let script = wrapped.get(body);
  if (!script) {
    const source = `local function body(KEYS, ARGV)\n${body}\nend\n${fencedEval.source}`;
    script = crypto.subtle.digest("SHA-1", new TextEncoder().encode(source)).then((digest) => ({
      name: "fenced_eval.lua",
      sha: Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join(""),
      source,
    }));
    if (wrapped.size >= 100) wrapped.delete(wrapped.keys().next().value!);
    wrapped.set(body, script);
  }
  return script;
}
