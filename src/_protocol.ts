// The Redis protocol of a lease, in one place: key and channel names, the kind letters, the arguments of every
// script call, the decoding of replies (Redlock's per-node view included) and waiter messages, and what a timeout
// of Redis means to an acquire. No other module builds a lease script's arguments, reads its raw replies, or turns
// kind letters into names or numbers (the fenced writes of redlease/fence keep theirs in _fence.ts, out of the core
// bundle). Scripts run through a ScriptRunner (a client's connection: see _connection.ts), which this module only
// names.
import type { Bound, Kind, LeaseKeys, Resolved } from "./_types.ts";
import type { LeaseEventKind } from "./events.ts";
import type { LeaseKind } from "./lease.ts";
import { FENCE_RETAIN_MS, QUEUE_TTL_MS } from "./_defaults.ts";
import {
  acquire as ACQUIRE,
  acquireAll as ACQUIRE_ALL,
  acquireSet as ACQUIRE_SET,
  extend as EXTEND,
  extendSet as EXTEND_SET,
  FENCE_DIGITS,
  forceUnlock as FORCE_UNLOCK,
  inspect as INSPECT,
  leader as LEADER,
  proclaim as PROCLAIM,
  release as RELEASE,
  releaseSet as RELEASE_SET,
  type Script,
} from "./_scripts.ts";
import { LeaseKindError, RedisTimeoutError, RedisUnavailableError, RedleaseError } from "./errors.ts";

/**
 * What the protocol needs of a client: running a script, and the command its scripts publish with. A client's
 * connection is one (see Connection in _connection.ts); this module depends on nothing more of it.
 */
export interface ScriptRunner {
  /** The command release scripts notify waiters with: PUBLISH, or SPUBLISH on a cluster with sharded pub/sub. */
  readonly publish: string;
  /**
   * Run `script` on `keys` with `args` (EVALSHA, its text sent once after NOSCRIPT), bounded by `bound`, and `decode`
   * its reply in the same step.
   */
  run<R = unknown>(
    script: Script,
    keys: readonly string[],
    args: string[],
    bound?: Bound,
    decode?: (reply: unknown) => R,
  ): Promise<R>;
}

/**
 * The kind letters for the public options: exclusive (neither given), `shared: true`, or `weight` of `permits` (a
 * weight of 1 is written as none: such a hold is every permit hold of before weights, and takes the scripts' fast
 * paths).
 */
export function kindOf(shared: boolean, permits: number | undefined, weight = 1): Kind {
  return permits === undefined ? (shared ? "s" : "x") : weight > 1 ? `p${permits}w${weight}` : `p${permits}`;
}

/**
 * The public name of a kind: "exclusive", "shared", or `permit` for a permit. A lease and an event say "permit" (the
 * hold is one permit), inspect() says "permits" (the lease is held as permits): both are public and stay as they
 * are, and this is the only place that maps kind letters to either.
 */
export function kindName(kind: Kind): LeaseKind;
export function kindName(kind: Kind, permit: "permits"): "exclusive" | "shared" | "permits";
export function kindName(kind: Kind, permit: "permit" | "permits" = "permit"): LeaseKind | "permits" {
  return kind === "x" ? "exclusive" : kind === "s" ? "shared" : permit;
}

/** Whether a kind is exclusive ("x"): neither shared nor permits. */
export function isExclusive(kind: Kind): boolean {
  return kind === "x";
}

/** The number of permits of a permit kind ("p<n>", "p<n>w<k>"), else undefined. */
export function permitsOf(kind: Kind): number | undefined {
  return kind.charCodeAt(0) === 112 /* p */ ? parseInt(kind.slice(1)) : undefined;
}

/** The permits a hold of this kind takes: k of "p<n>w<k>", else 1. */
export function weightOf(kind: Kind): number {
  const at = kind.indexOf("w");
  return at < 0 ? 1 : Number(kind.slice(at + 1));
}

/** The event kind of a hold: its kindName(), or "leader" for a leadership. */
export function eventKind(kind: Kind, leader: boolean | undefined): LeaseEventKind {
  return leader ? "leader" : kindName(kind);
}

/**
 * What a call that failed with `e` rejects with, about the lease `name`: an error of redlease's own, a Redis error
 * reply (`ERR …`, `NOPERM …`: Redis answered) and an argument error (`Cannot …`) as they are; a RedisTimeoutError
 * without a cause gets `last` (the client's last error) as one; anything else — the client could not reach Redis, or
 * Redis answered that it cannot serve now (LOADING, MASTERDOWN, CLUSTERDOWN, BUSY, TRYAGAIN, READONLY: a replica, as
 * after a failover; NOREPLICAS; an HTTP 5xx) — becomes a RedisUnavailableError with `e` as its cause. An outage is
 * never a LockTimeoutError: that means held by others.
 */
export function asUnavailable(e: unknown, name: string, last?: unknown): unknown {
  if (e instanceof RedisTimeoutError) {
    return e.cause === undefined && last !== undefined ? new RedisTimeoutError(name, e.timeoutMs, { cause: last }) : e;
  }
  if (e instanceof RedleaseError) return e;
  const message = e instanceof Error ? e.message : String(e);
  if (
    /^(Cannot |[A-Z][A-Z_]+( |$))/.test(message) &&
    !/^(LOADING|MASTERDOWN|CLUSTERDOWN|BUSY|TRYAGAIN|READONLY|NOREPLICAS)\b|^\S+ over HTTP failed with status 5/.test(
      message,
    )
  ) {
    return e;
  }
  return new RedisUnavailableError(name, `Redis is unavailable for lease '${name}': ${message}`, { cause: e });
}

/**
 * The lease's keys. The whole name is the hash tag, so all of a lease's keys and channels share a cluster slot;
 * `%` and `}` are percent-encoded so that a name cannot end the tag early (or leave it empty).
 */
export function keysOf(prefix: string, name: string): LeaseKeys {
  const tag = /[%}]/.test(name) ? name.replace(/[%}]/g, (c) => (c === "%" ? "%25" : "%7D")) : name;
  const hash = `${prefix}:{${tag}}`;
  return keysOfHash(hash);
}

function keysOfHash(hash: string): LeaseKeys {
  const queue = `${hash}:q`, holders = `${hash}:s`, holderRecords = `${hash}:d`;
  return { hash, queue, holders, holderRecords, all: [hash, queue, holders, holderRecords] };
}

/** The key under which a target keeps this process's hold of `owner` on the lease at `keys` in `kind`. */
export function holdId(keys: LeaseKeys, owner: string, kind: Kind): string {
  // An owner may hold a lease exclusively and shared at once (a downgrade): two holds. Its permits are one hold
  // whatever their weight (a request of another weight finds it, and Redis refuses it: see refused()).
  return kind === "x" ? `${keys.hash}\n${owner}` : `${keys.hash}\n${owner}\n${kind.replace(/w.*/, "")}`;
}

/** The channel on which the waiters of client `clientId` hear about grants of the lease at `keys`. */
export function channelOf(keys: LeaseKeys, clientId: string): string {
  return `${keys.hash}:w:${clientId}`;
}

let idPrefix: string | undefined;
let idCount = 0;

/**
 * A new id for an acquire attempt (it names one acquire call in Redis, so that its retries and its undo are
 * recognised) or a default owner: unique per call, across clients and processes. 96 random bits drawn once per
 * module instance (16 characters of base64url, so never `:` or `|`), plus a counter: as unique as a random UUID per
 * call, without drawing and formatting one on every call, and shorter on the wire.
 */
export function attemptId(): string {
  idPrefix ??= btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(12))))
    .replaceAll("+", "-").replaceAll("/", "_");
  return idPrefix + (++idCount).toString(36);
}

/**
 * The owner as Redis knows it. An owner string the caller chose counts only on the client (or Redlock group) that
 * uses it: `<client id>:<owner>`, as Redisson scopes a thread id to its client, so the same string in two processes
 * never merges their holds (sharing a hold across processes goes through a token: see resume()). A string scoped
 * already is kept; so is the owner of a live hold of the same lease on the same client or group (the caller checks
 * that: a `lease.owner` passed back re-enters, whether it was made here, by attemptId(), or came with a token).
 */
export function scopedOwner(scope: string, owner: string): string {
  return owner.startsWith(`${scope}:`) ? owner : `${scope}:${owner}`;
}

/**
 * A new owner for an acquire without `owner`: a new id, then the `label` after a space if one was given. The owner is
 * the last field of every record that stores it, so the label costs no command, key or script; inspect() reads it
 * back (labelOf). An id never holds a space nor a ':', and every other owner is `<scope>:…`, so only these parse.
 */
export function newOwner(o: Resolved): string {
  return o.label === undefined ? attemptId() : `${attemptId()} ${o.label}`;
}

/** The label of an owner made by newOwner(), else undefined. */
export function labelOf(owner: string): string | undefined {
  const at = owner.indexOf(" ");
  // (An id is attemptId()'s: 16 characters of random base64url and a counter.)
  return at > 16 && /^[\w-]+$/.test(owner.slice(0, at)) ? owner.slice(at + 1) : undefined;
}

/**
 * The owner Redis knows an acquire by: a new id; a Lease's owner exactly; the owner of a live hold of this lease
 * here (a `lease.owner` passed back; for a shared request, of a shared or exclusive hold); else the string given,
 * scoped to `target` (see scopedOwner).
 */
export function ownerFor(
  target: { readonly scope: string; readonly holds: ReadonlyMap<string, { readonly active: boolean }> },
  keys: LeaseKeys,
  opts: Resolved,
): string {
  if (opts.owner === undefined) return newOwner(opts);
  if (opts.exactOwner || target.holds.get(holdId(keys, opts.owner, opts.kind))?.active) return opts.owner;
  // A shared request by the owner of an exclusive hold here: a downgrade.
  if (opts.kind === "s" && target.holds.get(holdId(keys, opts.owner, "x"))?.active) return opts.owner;
  return scopedOwner(target.scope, opts.owner);
}

/** What a lease token names: one hold of one lease on one Redis. */
export interface TokenHold {
  readonly name: string;
  readonly keys: LeaseKeys;
  readonly owner: string;
  readonly fence: number;
  readonly fenceText: string;
  readonly kind: Kind;
}

const TOKEN = "rl1.";

/**
 * `lease.token`: `rl1.` and the base64url of the JSON `[name, lease key, owner, fence]` (and the kind, for a shared
 * hold or a permit): plain text that any runtime
 * can carry (an environment variable, a queue message, a URL), naming the hold, not a secret: it grants what the
 * owner string does.
 */
export function tokenOf(hold: TokenHold): string {
  const fields = [hold.name, hold.keys.hash, hold.owner, hold.fenceText];
  if (hold.kind !== "x") fields.push(hold.kind);
  const bytes = new TextEncoder().encode(JSON.stringify(fields));
  let bin = "";
  for (const byte of bytes) bin += String.fromCharCode(byte);
  return TOKEN + btoa(bin).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/** The hold a token names, or undefined when `token` is not one (checked before any Redis command). */
export function parseToken(token: unknown): TokenHold | undefined {
  // (The longest a token gets: a 1024-character name twice, as the name and in its key, and a 512-character owner
  // with a 256-character label, JSON-escaped and base64url-encoded, is under 64 KB.)
  if (typeof token !== "string" || !token.startsWith(TOKEN) || token.length > 65_536) return undefined;
  let parsed: unknown;
  try {
    const bin = atob(token.slice(TOKEN.length).replaceAll("-", "+").replaceAll("_", "/"));
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
  } catch {
    return undefined;
  }
  if (
    !Array.isArray(parsed) || parsed.length < 4 || parsed.length > 5 ||
    !parsed.every((field) => typeof field === "string" && field.length > 0)
  ) {
    return undefined;
  }
  const [name, hash, owner, fenceText, kind = "x"] = parsed as string[];
  if (!/^(x|s|p[1-9]\d{0,8}(w[1-9]\d{0,8})?)$/.test(kind)) return undefined;
  // The key must be the name's (under some prefix), and the fence a decimal integer, as the scripts keep it.
  const tail = keysOf("", name).hash;
  if (!hash.endsWith(tail) || hash.length === tail.length || !/^[1-9]\d{0,15}$/.test(fenceText)) return undefined;
  return { name, keys: keysOfHash(hash), owner, fence: Number(fenceText), fenceText, kind: kind as Kind };
}

/** What a waiter puts in the queue: who to tell (client, attempt), and the grant it wants (lease, claim, owner). */
export interface QueueEntry {
  readonly clientId: string;
  readonly attempt: string;
  readonly ms: number;
  readonly claimMs: number;
  readonly kind: Kind;
  readonly owner: string;
  /** The lock delay of the hold it wants, ms (0 or omitted: none). */
  readonly lockDelayMs?: number;
}

function entryText(entry: QueueEntry): string {
  const ms = (entry.lockDelayMs ?? 0) > 0 ? `${entry.ms}d${entry.lockDelayMs}` : entry.ms;
  return `${entry.clientId}|${entry.attempt}|${ms}|${entry.claimMs}|${entry.kind}|${entry.owner}`;
}

/** The reply of an acquire call. */
export type Acquired =
  | {
    readonly fence: number;
    /** The fence as the reply gave it, where it came as a string (saves converting it back for the release). */
    readonly fenceText?: string;
    readonly retryMs?: undefined;
    readonly queuedAt?: undefined;
    readonly queuedNow?: undefined;
    /** This call passed on a grant that its waiter never claimed in time. */
    readonly passedOn?: boolean;
  }
  | {
    readonly fence?: undefined;
    /** Try again after this many ms: the holder's remaining TTL, or what is left of a claim window. */
    readonly retryMs: number;
    /** Server µs when the waiter was queued (waiting calls only). */
    readonly queuedAt?: number;
    /** Whether this call queued it (so the caller's send time is no later than `queuedAt`). */
    readonly queuedNow?: boolean;
    /** This call passed on a grant that its waiter never claimed in time. */
    readonly passedOn?: boolean;
  };

export interface AcquireArgs {
  readonly kind: Kind;
  readonly owner: string;
  readonly ms: number;
  readonly attempt: string;
  /** Join (or stay in) the queue with this entry. */
  readonly entry?: QueueEntry;
  /** The lock delay of the hold, ms; 0 or omitted: none (and no argument sent for it). */
  readonly lockDelayMs?: number;
}

/** Take, re-enter or claim the lease, or learn when to try again (and queue, for a waiter). */
export function acquireCall(st: ScriptRunner, keys: LeaseKeys, a: AcquireArgs, bound?: Bound): Promise<Acquired> {
  return runAcquire(st, keys, a, bound, acquired);
}

/**
 * acquireCall() on one Redlock master, its reply as one number: the fence (> 0) where it granted the lease, else
 * minus one minus the ms until it may (<= 0). A refusal rejects (a LeaseKindError), as for acquireCall().
 */
export function acquireOnNode(st: ScriptRunner, keys: LeaseKeys, a: AcquireArgs, bound?: Bound): Promise<number> {
  return runAcquire(st, keys, a, bound, grantOrBusy);
}

function runAcquire<R>(
  runner: ScriptRunner,
  keys: LeaseKeys,
  request: AcquireArgs,
  bound: Bound | undefined,
  decode: (reply: unknown) => R,
): Promise<R> {
  const args = [request.owner, String(request.ms), request.attempt];
  const lag = request.lockDelayMs ?? 0;
  // The exclusive script takes the rest only when it says something (a waiter's entry, SPUBLISH, a lock delay):
  // every argument costs the client and Redis on every call, and most calls are an uncontended acquire on one server.
  if (request.kind !== "x" || request.entry || runner.publish !== "PUBLISH" || lag > 0) {
    args.push(request.entry ? entryText(request.entry) : "", String(QUEUE_TTL_MS), runner.publish);
  }
  if (request.kind === "x") {
    if (lag > 0) args.push(String(lag));
    return runner.run(ACQUIRE, keys.all, args, bound, decode);
  }
  args.push(request.kind);
  if (lag > 0) args.push(String(lag));
  return runner.run(ACQUIRE_SET, keys.all, args, bound, decode);
}

/**
 * Take every lease of `keys` exclusively at once if all are free, else none (one server only: the keys of several
 * names are in several cluster slots). The fences in order, or the 1-based index of the first name not free.
 */
export async function acquireAllCall(
  runner: ScriptRunner,
  keys: readonly LeaseKeys[],
  request: AcquireArgs,
  bound?: Bound,
): Promise<number[] | number> {
  const scriptKeys = keys.flatMap((lease) => [lease.hash, lease.queue, lease.holders, lease.holderRecords]);
  const args = [request.owner, String(request.ms), request.attempt];
  if ((request.lockDelayMs ?? 0) > 0) args.push(String(request.lockDelayMs));
  const reply = await runner.run(ACQUIRE_ALL, scriptKeys, args, bound);
  return Array.isArray(reply) ? reply.map(Number) : Number(reply);
}

/**
 * A refusal ("!upgrade", "!x", "!s", "!p<n>", "!wp<n>") as a LeaseKindError. Its lease name is filled in by the acquire
 * path (a decoder has none, and a closure per call to give it one would cost the hot path).
 */
function refused(r: string): never {
  if (r === "!upgrade") throw new LeaseKindError("", "upgrade", "shared");
  if (r.charCodeAt(1) === 119 /* w */) throw new LeaseKindError("", "weight", permitsOf(r.slice(2) as Kind)!);
  const held = r.slice(1) as Kind;
  throw new LeaseKindError("", "mismatch", permitsOf(held) ?? kindName(held) as "exclusive" | "shared");
}

/**
 * A fence's decimal digits as a number, digit by digit: a fence has at most 16 (exact in a double), and a string of
 * them costs the general string-to-number conversion (a call into the runtime) several times more. NaN for anything
 * that is not 1 to 16 digits.
 */
export function fenceOf(text: string): number {
  let value = text.length > 0 && text.length <= FENCE_DIGITS ? 0 : NaN;
  for (let i = 0; i < text.length; i++) {
    const digit = text.charCodeAt(i) - 48;
    value = digit >= 0 && digit <= 9 ? value * 10 + digit : NaN;
  }
  return value;
}

function acquired(reply: unknown): Acquired {
  if (typeof reply === "string" && reply.charCodeAt(0) === 33 /* ! */) refused(reply);
  // A fresh grant's fence comes back as a string of digits (the script skips number conversions on that path),
  // and a client may return integers as strings too (ioredis stringNumbers): the sign tells them apart.
  if (typeof reply === "string" || typeof reply === "number") {
    const value = typeof reply === "number" ? reply : fenceOf(reply) || Number(reply);
    return value > 0
      ? { fence: value, fenceText: typeof reply === "string" ? reply : undefined }
      : { retryMs: -1 - value };
  }
  const [value, queuedAt, queuedNow, passed] = reply as number[];
  // (A 4th element: this call passed on a grant its waiter never claimed, and then took the lease or waits.)
  const passedOn = Number(passed) === 1 || undefined;
  if (Number(value) > 0) return { fence: Number(value), passedOn };
  return { retryMs: -1 - Number(value), queuedAt: Number(queuedAt), queuedNow: Number(queuedNow) === 1, passedOn };
}

function grantOrBusy(r: unknown): number {
  const a = acquired(r);
  return a.fence ?? -1 - a.retryMs;
}

/** What a release did. */
export type Released = "not-held" | "kept" | "freed" | "handed-over";
const RELEASED: readonly Released[] = ["not-held", "kept", "freed", "handed-over"];

export interface ReleaseArgs {
  readonly kind: Kind;
  readonly owner: string;
  /** The fence of the hold being released (a number, or its decimal text); omitted: any hold of the owner. */
  readonly fence?: number | string;
  /** Undo this acquire attempt instead: only the hold it took, if any (and its queue entry). */
  readonly attempt?: string;
  readonly entry?: QueueEntry;
}

function releaseArgs(runner: ScriptRunner, request: ReleaseArgs): string[] {
  const args = [request.owner, String(FENCE_RETAIN_MS), request.fence === undefined ? "" : String(request.fence)];
  // The rest only when it says something (an undo's attempt and entry, SPUBLISH), as for acquireCall.
  if (request.attempt !== undefined || request.entry || runner.publish !== "PUBLISH") {
    args.push(request.attempt ?? "", request.entry ? entryText(request.entry) : "", runner.publish);
  }
  return args;
}

/** Release one hold (or undo one attempt); the last hold hands the lease to the first live waiter. */
export async function releaseCall(st: ScriptRunner, keys: LeaseKeys, a: ReleaseArgs, bound?: Bound): Promise<Released> {
  return RELEASED[Number(await st.run(a.kind === "x" ? RELEASE : RELEASE_SET, keys.all, releaseArgs(st, a), bound))];
}

const wasHeld = (r: unknown): boolean => Number(r) !== 0;

/** wasHeld(), calling `handedOver` when the release handed the lease on. (Apart: its closure costs releaseHeld() nothing without it.) */
function tellingHandover(handedOver: () => void): (reply: unknown) => boolean {
  return (reply) => {
    const code = Number(reply);
    if (code === 3) handedOver();
    return code !== 0;
  };
}

/** releaseCall(), answering whether a hold was released (anything but "not-held"), in one step (the hot path). */
export function releaseHeld(
  runner: ScriptRunner,
  keys: LeaseKeys,
  request: ReleaseArgs,
  bound?: Bound,
  handedOver?: () => void,
): Promise<boolean> {
  // `handedOver` (an event handler's) is called in the same step when the release handed the lease to waiters.
  const decode = handedOver ? tellingHandover(handedOver) : wasHeld;
  return runner.run(
    request.kind === "x" ? RELEASE : RELEASE_SET,
    keys.all,
    releaseArgs(runner, request),
    bound,
    decode,
  );
}

export interface ExtendArgs {
  readonly kind: Kind;
  readonly owner: string;
  readonly ms: number;
  /** The fence (a number, or its decimal text). */
  readonly fence?: number | string;
  /** Re-establish the lease where it is free (Redlock renewal on a master that restarted empty). */
  readonly reestablish?: boolean;
  /** Set the TTL even if that shortens it (extend()); otherwise it only lengthens it (renewals, claims). */
  readonly exact?: boolean;
  /** The hold's lock delay, ms (0 or omitted: none): a hold re-established keeps it. Sent only with `reestablish`. */
  readonly lockDelayMs?: number;
}

/** Reset the TTL of a hold (and claim it if it was handed over): true, false when not held, or a new fence. */
export async function extendCall(
  runner: ScriptRunner,
  keys: LeaseKeys,
  request: ExtendArgs,
  bound?: Bound,
): Promise<boolean | { readonly fence: number }> {
  const args = [
    request.owner,
    String(request.ms),
    request.fence === undefined ? "" : String(request.fence),
    request.reestablish ? "1" : "",
    request.exact ? "" : "GT",
  ];
  if (request.reestablish && (request.lockDelayMs ?? 0) > 0) args.push(String(request.lockDelayMs));
  const reply = request.kind === "x"
    ? Number(await runner.run(EXTEND, [keys.hash], args, bound))
    : Number(await runner.run(EXTEND_SET, [keys.hash, keys.holders, keys.holderRecords], args, bound));
  return reply > 1 ? { fence: reply } : reply === 1;
}

/** Remove every hold of every owner, keeping the fence record; the first live waiter is handed the lease. */
export async function forceUnlockCall(
  runner: ScriptRunner,
  keys: LeaseKeys,
  bound?: Bound,
): Promise<"not-held" | "freed" | "handed-over"> {
  const reply = await runner.run(FORCE_UNLOCK, keys.all, [String(FENCE_RETAIN_MS), runner.publish], bound);
  return reply === 0 ? "not-held" : reply === 1 ? "freed" : "handed-over";
}

/** One holder in a snapshot. */
export interface SnapshotHolder {
  readonly owner: string;
  readonly holds: number;
  /** "x" for the exclusive holder, else the kind of the hold (its weight included). */
  readonly kind: Kind;
  /** The hold's remaining TTL in ms, for its holder: <= 0 while the hold is in its lock delay. */
  readonly pttl: number;
  /** The hold's lock delay in ms (0: none). */
  readonly lockDelayMs: number;
}

/** A consistent snapshot of one lease. */
export interface Snapshot {
  readonly fence: number;
  readonly pttl: number;
  readonly waiters: number;
  /** "x" when exclusive or free, else the set mode. */
  readonly mode: Kind;
  readonly holders: SnapshotHolder[];
}

/**
 * Read a snapshot of the lease at `keys`; with `watchMs`, also make or keep its watch key for that long (see
 * watchChannelOf), so that its grants and releases are told on its watch channel.
 */
export async function inspectCall(
  runner: ScriptRunner,
  keys: LeaseKeys,
  bound?: Bound,
  watchMs?: number,
): Promise<Snapshot> {
  const args = watchMs === undefined ? [] : [String(watchMs)];
  const reply = await runner.run(INSPECT, keys.all, args, bound) as Array<string | number>;
  const holders: SnapshotHolder[] = [];
  for (let i = 4; i + 4 < reply.length; i += 5) {
    holders.push({
      owner: String(reply[i]),
      holds: Number(reply[i + 1]),
      kind: String(reply[i + 2]) as Kind,
      pttl: Number(reply[i + 3]),
      lockDelayMs: Number(reply[i + 4]),
    });
  }
  return {
    fence: Number(reply[0]),
    pttl: Number(reply[1]),
    waiters: Number(reply[2]),
    mode: String(reply[3]) as Kind,
    holders,
  };
}

/**
 * The watch key of the lease at `keys`, and the channel of the same name on which, while that key lives, the scripts
 * tell its grants and releases (see inspect.lua).
 */
export function watchChannelOf(keys: LeaseKeys): string {
  return `${keys.hash}:n`;
}

/** The channel on which observers of the election at `keys` hear of changes (see campaign/proclaim/observe). */
export function electionChannelOf(keys: LeaseKeys): string {
  return `${keys.hash}:o`;
}

/** The key of the value the leader of the election at `keys` proclaimed. */
function valueKeyOf(keys: LeaseKeys): string {
  return `${keys.hash}:v`;
}

/** An election's state: its leader (the owner holding the lease), term (its fence) and proclaimed value. */
export interface LeaderReply {
  readonly owner: string | undefined;
  readonly term: number;
  /** ms left of the leadership, -2 when there is no leader. */
  readonly pttl: number;
  readonly value: string | undefined;
}

export async function leaderCall(runner: ScriptRunner, keys: LeaseKeys, bound?: Bound): Promise<LeaderReply> {
  const reply = await runner.run(LEADER, [keys.hash, valueKeyOf(keys)], [], bound) as unknown[];
  const owner = String(reply[0] ?? "");
  return {
    owner: owner === "" ? undefined : owner,
    term: Number(reply[1]),
    pttl: Number(reply[2]),
    value: typeof reply[3] === "string" ? reply[3] : undefined,
  };
}

export interface ProclaimArgs {
  /** The leader (omitted: only announce a change to observers). */
  readonly owner?: string;
  readonly term?: string;
  /** The value to set; omitted: none (an announcement). */
  readonly value?: string;
}

/** Set the leader's value if it still leads with that term, and tell observers; false when it no longer leads. */
export async function proclaimCall(
  st: ScriptRunner,
  keys: LeaseKeys,
  a: ProclaimArgs,
  bound?: Bound,
): Promise<boolean> {
  const args = [a.owner ?? "", a.term ?? "", a.value ?? "", a.value === undefined ? "0" : "1", st.publish];
  return Number(await st.run(PROCLAIM, [keys.hash, valueKeyOf(keys)], args, bound)) === 1;
}

/** A message on a waiter channel, addressed to one attempt. */
export type WaiterMessage =
  | {
    readonly kind: "grant";
    readonly attempt: string;
    readonly fence: number;
    /** Server µs when the waiter was queued, and when it was granted. */
    readonly queuedAt: number;
    readonly grantedAt: number;
  }
  /** Local: the subscription was re-established, and messages may have been lost: re-check now. */
  | { readonly kind: "check"; readonly attempt: string };

export function parseMessage(message: string): WaiterMessage | undefined {
  const [attempt, fence, queuedAt, grantedAt] = message.split(":");
  const m = {
    kind: "grant" as const,
    attempt,
    fence: Number(fence),
    queuedAt: Number(queuedAt),
    grantedAt: Number(grantedAt),
  };
  return Number.isFinite(m.fence) && Number.isFinite(m.queuedAt) && Number.isFinite(m.grantedAt) ? m : undefined;
}
