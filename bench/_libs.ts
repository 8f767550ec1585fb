// The libraries under test behind one small interface. Libraries are imported dynamically in load(), so that a
// cold-start child can time the import itself and a pooled worker only loads what a round uses.
import { createHash, randomUUID } from "node:crypto";

export type LibId =
  | "redlease"
  | "raw"
  | "redlock"
  | "sesame"
  | "semaphore"
  | "ring"
  | "fifo"
  | "redlease-io"
  | "redlease-glide"
  | "fenced"
  | "fenced-io"
  | "guarded"
  | "fairfenced"
  | "redlease-permits"
  | "semaphore-permits"
  | "fairpermits"
  | "redlease-weighted"
  | "semaphore-weighted"
  | "redlease-events"
  | "redlease-otel"
  | "redlease-metrics";

/** B6: n permits of one name, contended (a counting semaphore). */
export const PERMITS = 4;
export const PERMIT_LIBS: readonly LibId[] = ["redlease-permits", "semaphore-permits", "fairpermits"];

/**
 * B7: weighted permits, the PERMITS of one name taken by holds of mixed weights: every fourth worker (seat 0, 4, …)
 * takes HEAVY of them at once, the others one (redis-semaphore's MultiSemaphore against redlease's `weight`).
 */
export const WEIGHTED_LIBS: readonly LibId[] = ["redlease-weighted", "semaphore-weighted"];
export const HEAVY = 3;
/** The permits the worker at `seat` takes in B7. */
export function weightOfSeat(seat: number): number {
  return seat % 4 === 0 ? HEAVY : 1;
}

/**
 * Not a library: the least Redis work n permits can do with what redlease's permits guarantee, the B6 floor for any
 * semaphore that gives them: holds that expire (a sorted set of holders by the µs their lease ends, purged before
 * counting), a FIFO wait queue whose entries expire (a sorted set by µs queued, with a TTL) that a newcomer cannot
 * overtake, a fence per hold from the server clock strictly above the last one given (kept in a key beside the
 * holders), the earliest holder's remaining time for a queued waiter, and a release that hands every permit it frees
 * to the next waiters in the queue and PUBLISHes each its grant on its worker's channel. The client work is `fifo`'s
 * (no handle, watchdog, claim window, bounds or dead-waiter skipping, and no retry at the earliest expiry: in B6 no
 * holder dies). B6 only.
 */
export const FAIR_PERMITS_FLOOR: LibId = "fairpermits";

/** The lock libraries (B1–B5). */
export const LIBS: readonly LibId[] = ["redlease", "raw", "redlock", "sesame", "semaphore"];

/**
 * Not a lock: a pub/sub token ring among the B3 workers (worker i holds 1 ms, then PUBLISHes the token to worker
 * i+1's channel). It is the floor for a notified (wake-one) handoff on this machine and load: one PUBLISH, one
 * loopback hop to a sleeping process, no lock state at all. B3 only.
 */
export const FLOOR: LibId = "ring";

/**
 * Not a library: the least Redis work a fair (FIFO) notified lock can do, as a floor for B3's Redis CPU and gap.
 * acquire = one script: SET NX PX, or RPUSH the worker's id to the queue and wait for a message on the worker's
 * channel; release = one script: if GET = own id then LPOP the next id, SET it as the holder and PUBLISH to its
 * channel, else DEL. No fence, no reentrancy, no expiry of queue entries (a dead waiter strands the lock for the
 * lease TTL), no renewal: every guarantee redlease adds costs on top of this. B3 only.
 */
export const FAIR_FLOOR: LibId = "fifo";

/**
 * Not a library: the fair floor above with what redlease's guarantees need of Redis and nothing else, the B3 floor
 * for any lock that gives them: a fence from the server clock (strictly increasing across handoffs), a wait queue
 * whose entries expire (a sorted set by time queued, with a TTL), the holder's remaining time for the waiter, and a
 * grant message saying when the waiter was queued and granted (for its local deadline). The scripts are those of
 * bench/scripts_cost.ts's "fair + fenced + expiring queue" rows; the client work is `fifo`'s (no handle, watchdog,
 * claim window, bounds or dead-waiter skipping). B3 only.
 */
export const FAIR_FENCED_FLOOR: LibId = "fairfenced";

/**
 * B1/B2 only: redlease on the peers' client. node-redis (redlease's, and raw's) writes the commands of one event-loop
 * turn together and ioredis writes each at once, which overlaps the client's and Redis's work differently on few
 * cores; this row tells that apart from redlease's own cost.
 */
export const ON_PEER_CLIENT: LibId = "redlease-io";

/**
 * B1/B2/B3: redlease on Valkey GLIDE (redlease/glide, the same build's adapter), beside redlease on node-redis and on
 * ioredis: GLIDE sends every command through its Rust core, and wakes waiters by pub/sub on the client's own
 * connection.
 */
export const ON_GLIDE: LibId = "redlease-glide";

/**
 * Not a library: the least a fenced lease does uncontended, on node-redis as redlease uses it — two EVALSHA per
 * cycle of the floor scripts that bench/scripts_cost.ts measures (acquire: TIME, SET NX PX GET, EXISTS queue;
 * release: GET, check owner, EXISTS queue, SET the bare fence PX), a fresh owner per cycle and nothing else: no
 * handle, no watchdog, no signal, no bounds. The floor for B1/B2 of any lock that gives a fence strictly
 * increasing across release and expiry and keeps FIFO; its client work is raw's. B1/B2 only.
 */
export const FENCED_FLOOR: LibId = "fenced";

/**
 * Not a library: the minimal fenced lease above with the least client work that redlease's guarantees need, the
 * B1/B2 floor for any library that gives them. Each call is bounded by a deadline (a promise of its own that rejects
 * when the deadline passes first, on an entry of one shared unref'd timer), and a grant whose reply comes after that,
 * or after the lease's local deadline (send time + TTL − redlease's drift margin), is given back; a granted lease
 * gets a hold record keyed by key and owner (what reentrancy and a process's own listing look up) and a watchdog
 * entry on that timer, which renews it at a third of its TTL and gives up at the local deadline; a release is
 * bounded by the lease's deadline, drops both, and is a no-op the second time; owners are fresh ids (a random prefix
 * and a counter); the name is checked (1 to 1024 characters) and escaped into one hash tag. Nothing else: no
 * options, events, signals, attempt ids, waiter queue or undo by attempt. Same scripts as `fenced` (2 keys and 2
 * arguments, where redlease sends 4 and 3), so redlease ÷ this row includes that difference too. B1/B2 only.
 */
export const GUARDED_FLOOR: LibId = "guarded";

/**
 * Not a library: FENCED_FLOOR's exact scripts and cycle on an ioredis client (the peers' client, and redlease-io's):
 * `evalsha(sha, 2, lease, queue, owner, ms)` per call, a fresh owner per cycle and nothing else. The floor for
 * B1/B2 of any lock with redlease's guarantees on ioredis, so that redlease-io ÷ this row is redlease's own cost on
 * that client and this row ÷ the peers says whether any such lock could beat them on their own client. B1/B2 only.
 */
export const FENCED_IO_FLOOR: LibId = "fenced-io";

/**
 * B1/B2 only: redlease with an event handler (configure(client, { onEvent })) that counts every event by type, the
 * cost of the hook itself beside `redlease` (no handler: no event is built).
 */
export const WITH_EVENTS: LibId = "redlease-events";

/**
 * B1/B2 only: redlease with the OpenTelemetry instruments on (`redlease/otel` as its event handler), on the real SDK:
 * a MeterProvider whose reader exports every minute, and a tracer provider that samples every span (the SDK's
 * default) into a BatchSpanProcessor whose exporter drops them — every acquire recorded and traced.
 */
export const WITH_OTEL: LibId = "redlease-otel";
/** B1/B2 only: as WITH_OTEL with metrics only (no tracer provider registered: no span is made). */
export const WITH_METRICS: LibId = "redlease-metrics";

/** The B1/B2-only rows: not run in B3 or B5. */
export const UNCONTENDED_ONLY: readonly LibId[] = [
  ON_PEER_CLIENT,
  FENCED_FLOOR,
  FENCED_IO_FLOOR,
  GUARDED_FLOOR,
  WITH_EVENTS,
  WITH_METRICS,
  WITH_OTEL,
];

/** The B3-only rows that are not libraries. */
export const FLOORS: readonly LibId[] = [FLOOR, FAIR_FLOOR, FAIR_FENCED_FLOOR];

/** Which libraries have a retry delay to tune (the others run one configuration). */
export const TUNABLE: Record<LibId, boolean> = {
  redlease: false,
  raw: false,
  redlock: true,
  sesame: true,
  semaphore: true,
  ring: false,
  fifo: false,
  "redlease-io": false,
  "redlease-glide": false,
  fenced: false,
  "fenced-io": false,
  guarded: false,
  fairfenced: false,
  "redlease-permits": false,
  "semaphore-permits": true,
  fairpermits: false,
  "redlease-weighted": false,
  "semaphore-weighted": true,
  "redlease-events": false,
  "redlease-otel": false,
  "redlease-metrics": false,
};

export const LABEL: Record<LibId, string> = {
  redlease: "redlease",
  raw: "raw node-redis (SET NX PX + EVALSHA)",
  redlock: "redlock 5.0.0-beta.2",
  sesame: "@sesamecare-oss/redlock",
  semaphore: "redis-semaphore Mutex",
  ring: "floor: pub/sub token ring (not a lock)",
  fifo: "floor: minimal fair notified lock (FIFO, no fence)",
  "redlease-io": "redlease on ioredis",
  "redlease-glide": "redlease on Valkey GLIDE",
  fenced: "floor: minimal fenced lease (node-redis, 2 EVALSHA)",
  "fenced-io": "floor: minimal fenced lease on ioredis (2 EVALSHA)",
  guarded: "floor: minimal fenced lease with the client work of redlease's guarantees",
  fairfenced: "floor: fair notified lock with a fence and an expiring queue",
  "redlease-permits": `redlease, ${PERMITS} permits`,
  "semaphore-permits": `redis-semaphore Semaphore, ${PERMITS} permits`,
  fairpermits: `floor: fair notified permits with a fence and an expiring queue, ${PERMITS} permits`,
  "redlease-weighted": `redlease, ${PERMITS} permits, weights ${HEAVY} and 1`,
  "semaphore-weighted": `redis-semaphore MultiSemaphore, ${PERMITS} permits, weights ${HEAVY} and 1`,
  "redlease-events": "redlease with an event handler",
  "redlease-otel": "redlease with OpenTelemetry metrics and spans",
  "redlease-metrics": "redlease with OpenTelemetry metrics",
};

/** Lease / lock TTL used by every library that takes one, ms. */
export const LEASE_MS = 10_000;
/** Wait / retry budget, ms. */
export const WAIT_MS = 10_000;
/** Raw baseline polling interval while the lock is held, ms. */
export const RAW_POLL_MS = 10;

const redlockDefault = { retryCount: Math.ceil(WAIT_MS / 200) }; // 200 ms is redlock's default retryDelay
const redlockTuned = { retryCount: WAIT_MS, retryDelay: 1, retryJitter: 0 };

/** Exactly what each variant passes, for the report. */
export function settingsText(lib: LibId, tuned: boolean): string {
  switch (lib) {
    case "redlease":
      return `acquire(client, name, { waitMs: ${WAIT_MS} }) (watchdog mode: 30 s TTL renewed every 10 s), release(lease)`;
    case "redlease-events":
      return `as redlease, with configure(client, { onEvent }) counting every event by its type`;
    case "redlease-otel":
      return `as redlease, with configure(client, { onEvent: otel({ meterProvider, tracerProvider }) }) on the ` +
        `OpenTelemetry SDK: metrics read every 60 s, every span sampled into a BatchSpanProcessor (spans dropped)`;
    case "redlease-metrics":
      return `as redlease, with configure(client, { onEvent: otel({ meterProvider }) }) on the OpenTelemetry SDK: ` +
        `metrics read every 60 s; no tracer provider registered (no span made)`;
    case "redlease-io":
      return `as redlease, on an ioredis client (the peers' client) through ioredis() from redlease/ioredis`;
    case "redlease-glide":
      return `as redlease, on a Valkey GLIDE GlideClient (default settings but requestTimeout ${WAIT_MS} ms) ` +
        `through glide() from redlease/glide`;
    case "raw":
      return `SET key token NX PX ${LEASE_MS}; while held, sleep ${RAW_POLL_MS} ms and retry, for up to ${WAIT_MS} ms; ` +
        `release: EVALSHA of "if GET == token then DEL"`;
    case "redlock":
    case "sesame":
      return (tuned
        ? `new Redlock([ioredis], { retryCount: ${redlockTuned.retryCount}, retryDelay: 1, retryJitter: 0 })`
        : `new Redlock([ioredis], { retryCount: ${redlockDefault.retryCount} }) (defaults: retryDelay 200, ` +
          `retryJitter 100 → ~${WAIT_MS / 1000} s budget)`) +
        `; acquire([name], ${LEASE_MS}); lock.release()`;
    case "semaphore":
      return (tuned
        ? `new Mutex(ioredis, name, { retryInterval: 1 })`
        : `new Mutex(ioredis, name) (defaults: retryInterval 10, acquireTimeout 10000, lockTimeout 10000)`) +
        `; acquire(); release()`;
    case "ring":
      return `node-redis v4: each worker SUBSCRIBEs to ring:<its index>; "acquire" = wait for the token message, ` +
        `"release" = PUBLISH ring:<next index> <name>; worker 0 starts with the token`;
    case "fenced":
      return `node-redis v4, two EVALSHA per cycle, a fresh owner each: acquire = ${JSON.stringify(FENCED_ACQUIRE)}, ` +
        `release = ${JSON.stringify(FENCED_RELEASE)} (the floor scripts of bench/scripts_cost.ts)`;
    case "fenced-io":
      return `as fenced (the same scripts, two per cycle, a fresh owner each) on an ioredis client: ` +
        `evalsha(sha, 2, lease, queue, owner, ${LEASE_MS}), after SCRIPT LOAD at connect`;
    case "guarded":
      return `as fenced (same scripts), with each call bounded by a deadline on one shared timer (a late grant given ` +
        `back), a hold record and a watchdog entry per lease (renewal at a third of the ${LEASE_MS} ms TTL: ${
          JSON.stringify(FENCED_EXTEND)
        }), fresh owner ids (prefix + counter), a check and hash-tag escape of the name, a release that is a no-op ` +
        `the second time`;
    case "redlease-permits":
      return `acquire(client, name, { permits: ${PERMITS}, waitMs: ${WAIT_MS} }) (watchdog mode), release(lease)`;
    case "redlease-weighted":
      return `acquire(client, name, { permits: ${PERMITS}, weight: k, waitMs: ${WAIT_MS} }) (watchdog mode), ` +
        `release(lease); k = ${HEAVY} for every fourth worker, else 1`;
    case "semaphore-weighted":
      return (tuned
        ? `new MultiSemaphore(ioredis, name, ${PERMITS}, k, { retryInterval: 1 })`
        : `new MultiSemaphore(ioredis, name, ${PERMITS}, k) (defaults: retryInterval 10, acquireTimeout 10000, lockTimeout 10000)`) +
        `; acquire(); release(); k = ${HEAVY} for every fourth worker, else 1`;
    case "semaphore-permits":
      return (tuned
        ? `new Semaphore(ioredis, name, ${PERMITS}, { retryInterval: 1 })`
        : `new Semaphore(ioredis, name, ${PERMITS}) (defaults: retryInterval 10, acquireTimeout 10000, lockTimeout 10000)`) +
        `; acquire(); release()`;
    case "fairpermits":
      return `node-redis v4, two EVALSHA per acquisition: acquire = ${JSON.stringify(FAIR_PERMITS_ACQUIRE)}, then ` +
        `wait for a message on <holders>:w:<worker id> unless granted; release = ${
          JSON.stringify(FAIR_PERMITS_RELEASE)
        }`;
    case "fairfenced":
      return `node-redis v4, two EVALSHA per acquisition: acquire = ${JSON.stringify(FAIR_QUEUE)}, then wait for a ` +
        `message on <lock>:w:<worker id> unless granted; release = ${JSON.stringify(FAIR_HANDOFF)}`;
    case "fifo":
      return `node-redis v4, two EVALSHA per acquisition: acquire = ${JSON.stringify(FIFO_ACQUIRE)}, then wait for ` +
        `a message on fifo:<worker id> unless granted; release = ${JSON.stringify(FIFO_RELEASE)}`;
  }
}

/**
 * Commands each library's clients send directly (from their source). None of them is ever called by that library's
 * Lua scripts, so in INFO commandstats, total − these = commands called from Lua.
 */
export const CLIENT_COMMANDS: Record<LibId, RegExp> = {
  // EVALSHA (+ EVAL once per script, after NOSCRIPT), and (UN)SUBSCRIBE on the subscriber connection. Lua calls HLEN, HGET, TIME, …
  redlease: /^(evalsha|evalsha_ro|eval|script\|.*|subscribe|unsubscribe|ssubscribe|sunsubscribe|wait)$/,
  // SET NX PX, EVALSHA (+ SCRIPT LOAD once). Lua calls GET, DEL.
  raw: /^(set|evalsha|script\|.*)$/,
  // EVALSHA, EVAL after NOSCRIPT. Lua calls EXISTS, SET, GET, DEL.
  redlock: /^(evalsha|eval|script\|.*)$/,
  // ioredis defineCommand: EVALSHA, EVAL after NOSCRIPT. Lua calls SELECT (pcall), EXISTS, SET, GET, DEL.
  sesame: /^(evalsha|eval|script\|.*)$/,
  // SET NX PX, EVALSHA, EVAL after NOSCRIPT. Lua calls GET, DEL, PEXPIRE.
  semaphore: /^(set|evalsha|eval|script\|.*)$/,
  // PUBLISH (and SUBSCRIBE at setup); no scripts.
  ring: /^(publish|subscribe|unsubscribe)$/,
  // EVALSHA (+ SCRIPT LOAD once), SUBSCRIBE at setup. Lua calls SET, RPUSH, GET, LPOP, PUBLISH, DEL.
  "redlease-io": /^(evalsha|evalsha_ro|eval|script\|.*|subscribe|unsubscribe|ssubscribe|sunsubscribe|wait)$/,
  // As redlease, on the client's one connection, and CLIENT ID once a second while a client has waiters (B3).
  "redlease-glide": /^(evalsha|evalsha_ro|eval|script\|.*|subscribe|unsubscribe|wait|client\|id)$/,
  fifo: /^(evalsha|script\|.*|subscribe|unsubscribe)$/,
  // EVALSHA (+ SCRIPT LOAD once). Lua calls TIME, SET, EXISTS, GET.
  fenced: /^(evalsha|script\|.*)$/,
  // As fenced (ioredis: EVALSHA, SCRIPT LOAD at connect; its handshake sends nothing else counted here).
  "fenced-io": /^(evalsha|script\|.*)$/,
  // As fenced. Lua calls TIME, SET, EXISTS, GET (and PEXPIRE in a renewal).
  guarded: /^(evalsha|script\|.*)$/,
  // EVALSHA (+ SCRIPT LOAD once), SUBSCRIBE at setup. Lua calls TIME, SET, PTTL, ZADD, PEXPIRE, GET, ZPOPMIN, PUBLISH.
  fairfenced: /^(evalsha|script\|.*|subscribe|unsubscribe)$/,
  // EVALSHA (+ SCRIPT LOAD once), SUBSCRIBE at setup. Lua calls TIME, ZREMRANGEBYSCORE, EXISTS, ZCARD, GET, ZADD,
  // SET, PEXPIRE, ZRANGE, ZREM, ZPOPMIN, PUBLISH.
  fairpermits: /^(evalsha|script\|.*|subscribe|unsubscribe)$/,
  "redlease-permits": /^(evalsha|evalsha_ro|eval|script\|.*|subscribe|unsubscribe|ssubscribe|sunsubscribe|wait)$/,
  // EVALSHA (+ EVAL after NOSCRIPT) from its Lua scripts; the refresh timer's EVALSHA too.
  "semaphore-permits": /^(evalsha|eval|script\|.*)$/,
  "redlease-weighted": /^(evalsha|evalsha_ro|eval|script\|.*|subscribe|unsubscribe|ssubscribe|sunsubscribe|wait)$/,
  "semaphore-weighted": /^(evalsha|eval|script\|.*)$/,
  "redlease-events": /^(evalsha|evalsha_ro|eval|script\|.*|subscribe|unsubscribe|ssubscribe|sunsubscribe|wait)$/,
  "redlease-otel": /^(evalsha|evalsha_ro|eval|script\|.*|subscribe|unsubscribe|ssubscribe|sunsubscribe|wait)$/,
  "redlease-metrics": /^(evalsha|evalsha_ro|eval|script\|.*|subscribe|unsubscribe|ssubscribe|sunsubscribe|wait)$/,
};

export interface Adapter {
  /** Resolves once held; rejects when the wait budget runs out (a failed acquisition). */
  acquire(name: string): Promise<unknown>;
  release(handle: unknown): Promise<void>;
  close(): Promise<void>;
}

/** Where this process sits among the B3 workers (used by the token ring only). */
export interface Seat {
  index: number;
  of: number;
}

export interface Loaded {
  connect(url: string, seat?: Seat): Promise<Adapter>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const RAW_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
const RAW_RELEASE_SHA = createHash("sha1").update(RAW_RELEASE).digest("hex");

// The minimal fair notified lock (see FAIR_FLOOR). KEYS: lock, queue; ARGV: worker id, lease ms (, name to publish).
const FIFO_ACQUIRE = "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end " +
  "redis.call('rpush', KEYS[2], ARGV[1]) return 0";
const FIFO_RELEASE = "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end " +
  "local n = redis.call('lpop', KEYS[2]) if n then redis.call('set', KEYS[1], n, 'PX', ARGV[2]) " +
  "redis.call('publish', 'fifo:' .. n, ARGV[3]) else redis.call('del', KEYS[1]) end return 1";
// The minimal fenced lease (see FENCED_FLOOR). KEYS: lease, queue; ARGV: owner, ms.
export const FENCED_ACQUIRE = "local t = redis.call('TIME') local f = t[1] .. t[2] " +
  "if redis.call('SET', KEYS[1], f .. ':' .. ARGV[1], 'NX', 'PX', ARGV[2], 'GET') then return 0 end " +
  "if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end return f";
export const FENCED_RELEASE = "local v = redis.call('GET', KEYS[1]) local f, o = string.match(v, '^(%d+):(.*)$') " +
  "if o ~= ARGV[1] then return 0 end if redis.call('EXISTS', KEYS[2]) == 1 then return 3 end " +
  "if ARGV[2] == 'del' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], f, 'PX', ARGV[2]) end return 2";
// The watchdog's renewal of the guarded floor (see GUARDED_FLOOR). KEYS: lease; ARGV: owner, ms.
export const FENCED_EXTEND = "local v = redis.call('GET', KEYS[1]) " +
  "if v and string.match(v, '^%d+:(.*)$') == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
// The fair floor with redlease's Redis work (see FAIR_FENCED_FLOOR): the fence is the server's time in µs (padded,
// so that it orders as a number and as a queue score). KEYS: lock, queue. Queue: ARGV owner, lease ms,
// entry "<client>|<attempt>|<owner>", queue TTL ms; replies the fence (a string) when it took the lock (free, or only
// the last fence left by a release that found nobody queued), else
// {-1 - PTTL, the score it is queued at, 1 if this call queued it}. Hand over: ARGV owner, lease ms; publishes
// "<attempt>:<fence>:<queued at>:<granted at>" to <lock>:w:<client> and makes the entry's owner the holder.
export const FAIR_QUEUE = "local t = redis.call('TIME') local us = t[2] " +
  "if #us < 6 then us = string.rep('0', 6 - #us) .. us end local f = t[1] .. us " +
  "local v = redis.call('SET', KEYS[1], f .. ':' .. ARGV[1], 'NX', 'PX', ARGV[2], 'GET') if not v then return f end " +
  "if not string.find(v, ':', 1, true) then redis.call('SET', KEYS[1], f .. ':' .. ARGV[1], 'PX', ARGV[2]) return f end " +
  "local r = -1 - redis.call('PTTL', KEYS[1]) local c = redis.call('ZADD', KEYS[2], 'NX', f, ARGV[3]) " +
  "redis.call('PEXPIRE', KEYS[2], ARGV[4]) return { r, f, c }";
export const FAIR_HANDOFF = "local v = redis.call('GET', KEYS[1]) local f, o = string.match(v, '^(%d+):(.*)$') " +
  "if o ~= ARGV[1] then return 0 end local top = redis.call('ZPOPMIN', KEYS[2]) " +
  "if not top[1] then redis.call('SET', KEYS[1], f, 'PX', ARGV[2]) return 2 end " +
  "local c, w, rest = string.match(top[1], '^([^|]*)|([^|]*)|(.*)$') local t = redis.call('TIME') " +
  "local now = tonumber(t[1]) * 1000000 + tonumber(t[2]) local g = tonumber(f) + 1 if now > g then g = now end " +
  "g = string.format('%d', g) redis.call('PUBLISH', KEYS[1] .. ':w:' .. c, w .. ':' .. g .. ':' .. top[2] .. " +
  "':' .. string.format('%d', now)) redis.call('SET', KEYS[1], g .. ':' .. rest, 'PX', ARGV[2]) return 3";
// The fair permits floor (see FAIR_PERMITS_FLOOR). KEYS: holders, queue, last fence. The time is the server's in µs
// (padded, so that it orders as a number and as a score). Acquire: ARGV owner, lease ms, permits, entry
// "<client>|<attempt>|<owner>", queue TTL ms; replies the fence (a string) when it took a permit (the queue empty and
// fewer live holders than permits), else {-1 - ms until the earliest hold ends, the score it is queued at, 1 if this
// call queued it}. Release: ARGV owner, lease ms, permits; drops the owner's hold and, for every permit now free, pops
// the next entry, makes its owner a holder with a fence of its own and publishes "<attempt>:<fence>:<queued at>:<granted
// at>" to <holders>:w:<client>; replies 0 (not a holder), 1 (no permit free), 2 (nobody queued) or 3 (handed over).
export const FAIR_PERMITS_ACQUIRE = "local t = redis.call('TIME') local us = t[2] " +
  "if #us < 6 then us = string.rep('0', 6 - #us) .. us end local now = t[1] .. us local n = tonumber(now) " +
  "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) " +
  "if redis.call('EXISTS', KEYS[2]) == 0 and redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then " +
  "local g = n local last = tonumber(redis.call('GET', KEYS[3]) or '0') if g <= last then g = last + 1 end " +
  "g = string.format('%d', g) redis.call('ZADD', KEYS[1], n + ARGV[2] * 1000, ARGV[1]) " +
  "redis.call('PEXPIRE', KEYS[1], ARGV[2]) redis.call('SET', KEYS[3], g, 'PX', ARGV[2]) return g end " +
  "local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES') local r = -1 " +
  "if first[2] then r = -1 - math.floor((tonumber(first[2]) - n) / 1000) end " +
  "local c = redis.call('ZADD', KEYS[2], 'NX', now, ARGV[4]) redis.call('PEXPIRE', KEYS[2], ARGV[5]) " +
  "return { r, now, c }";
export const FAIR_PERMITS_RELEASE = "if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end " +
  "if redis.call('EXISTS', KEYS[2]) == 0 then return 2 end local t = redis.call('TIME') local us = t[2] " +
  "if #us < 6 then us = string.rep('0', 6 - #us) .. us end local now = t[1] .. us local n = tonumber(now) " +
  "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) " +
  "local free = tonumber(ARGV[3]) - redis.call('ZCARD', KEYS[1]) if free <= 0 then return 1 end " +
  "local top = redis.call('ZPOPMIN', KEYS[2], free) if not top[1] then return 2 end " +
  "local last = tonumber(redis.call('GET', KEYS[3]) or '0') local ends = n + ARGV[2] * 1000 " +
  "for i = 1, #top, 2 do local c, w, rest = string.match(top[i], '^([^|]*)|([^|]*)|(.*)$') " +
  "local g = n if g <= last then g = last + 1 end last = g redis.call('ZADD', KEYS[1], ends, rest) " +
  "redis.call('PUBLISH', KEYS[1] .. ':w:' .. c, w .. ':' .. string.format('%d', g) .. ':' .. top[i + 1] .. ':' .. now) end " +
  "redis.call('SET', KEYS[3], string.format('%d', last), 'PX', ARGV[2]) redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 3";
const sha1 = (s: string) => createHash("sha1").update(s).digest("hex");

/** A lease of the guarded floor (see GUARDED_FLOOR). */
interface GuardedHold {
  readonly id: string;
  readonly keys: string[];
  readonly owner: string;
  readonly fence: string;
  deadline: number;
  renewal: Due | undefined;
  released: boolean;
}

interface Due {
  readonly at: number;
  readonly fn: () => void;
  i: number;
}

/** One unref'd timer armed for the earliest of its entries (the guarded floor's deadlines and renewals). */
function sharedTimer() {
  const due: Due[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined, armedAt = Infinity;
  const arm = (at: number) => {
    clearTimeout(timer);
    armedAt = at;
    timer = at < Infinity ? setTimeout(fire, at - performance.now()) : undefined;
    (timer as { unref?(): void } | undefined)?.unref?.();
  };
  const drop = (d: Due) => {
    if (d.i < 0) return;
    const last = due.pop()!;
    if (last !== d) due[last.i = d.i] = last;
    d.i = -1;
  };
  const fire = () => {
    const now = performance.now(), ready = due.filter((d) => d.at <= now);
    ready.forEach(drop);
    arm(due.reduce((next, d) => Math.min(next, d.at), Infinity));
    for (const d of ready) d.fn();
  };
  return {
    add(at: number, fn: () => void): Due {
      const d = { at, fn, i: due.length };
      due.push(d);
      if (at < armedAt) arm(at);
      return d;
    },
    drop,
  };
}

// deno-lint-ignore no-explicit-any
type Any = any;

function onError(lib: string) {
  let reported = false;
  return (e: unknown) => {
    if (reported) return;
    reported = true;
    console.error(`${lib}: client error: ${String(e)}`);
  };
}

/** A node-redis client with `scripts` loaded, and a second connection for SUBSCRIBE (the B3 floors). */
async function scriptedPair(url: string, scripts: string[]): Promise<{ c: Any; sub: Any }> {
  const { createClient } = await import("redis");
  const c = createClient({ url });
  c.on("error", onError("node-redis"));
  const sub = c.duplicate();
  sub.on("error", onError("node-redis"));
  await Promise.all([c.connect(), sub.connect()]);
  await Promise.all(scripts.map((s) => c.sendCommand(["SCRIPT", "LOAD", s])));
  return { c, sub };
}

/** A connected node-redis client with `scripts` loaded, for the uncontended floors. */
async function scriptedClient(
  url: string,
  scripts: string[],
): Promise<{ sendCommand(args: string[]): Promise<unknown>; quit(): Promise<unknown> }> {
  const { createClient } = await import("redis");
  const c = createClient({ url });
  c.on("error", onError("node-redis"));
  await c.connect();
  await Promise.all(scripts.map((s) => c.sendCommand(["SCRIPT", "LOAD", s])));
  return c;
}

/**
 * Grants by message, for the notified B3 floors: `wait(id)` until `granted(id)`, or fail after WAIT_MS. A grant's
 * message can overtake the reply of the call that queued its waiter, so early grants are counted per id.
 */
function grants(lib: string) {
  const early = new Map<string, number>(), waiting = new Map<string, () => void>();
  return {
    granted(id: string): void {
      const wake = waiting.get(id);
      if (wake) {
        waiting.delete(id);
        wake();
      } else early.set(id, (early.get(id) ?? 0) + 1);
    },
    wait(id: string): Promise<void> {
      const e = early.get(id) ?? 0;
      if (e > 0) {
        if (e === 1) early.delete(id);
        else early.set(id, e - 1);
        return Promise.resolve();
      }
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => {
          waiting.delete(id);
          reject(new Error(`${lib}: not granted within ${WAIT_MS} ms`));
        }, WAIT_MS);
        waiting.set(id, () => {
          clearTimeout(t);
          resolve();
        });
      });
    },
  };
}

async function ioredisClient(url: string): Promise<Any> {
  const m: Any = await import("ioredis");
  const Redis = m.Redis ?? m.default;
  const c = new Redis(url, { lazyConnect: true });
  c.on("error", onError("ioredis"));
  await c.connect();
  return c;
}

/**
 * Where bench/_bundle.ts bundleRedlease() puts the ioredis adapter beside the bundle `file` (a path or a file URL
 * ending in .mjs or .js).
 */
export function adapterBundle(file: string, adapter: "ioredis" | "glide" = "ioredis"): string {
  return file.replace(/(\.m?js)$/, `-${adapter}$1`);
}

/** Import a library (and its client). `redleaseUrl` is the module to use for redlease. */
export async function load(lib: LibId, tuned: boolean, redleaseUrl: string): Promise<Loaded> {
  switch (lib) {
    case "redlease":
    case "redlease-events":
    case "redlease-permits":
    case "redlease-weighted": {
      const [{ createClient }, rl] = await Promise.all([import("redis"), import(redleaseUrl) as Promise<Any>]);
      const permits = lib === "redlease-permits" ? { permits: PERMITS } : {};
      return {
        async connect(url, seat = { index: 0, of: 1 }) {
          const kind = lib === "redlease-weighted" ? { permits: PERMITS, weight: weightOfSeat(seat.index) } : permits;
          const c = createClient({ url });
          c.on("error", onError("node-redis"));
          await c.connect();
          if (lib === "redlease-events") {
            const counts: Record<string, number> = {};
            rl.configure(c, { onEvent: (e: { type: string }) => void (counts[e.type] = (counts[e.type] ?? 0) + 1) });
          }
          return {
            acquire: (name) => rl.acquire(c, name, { waitMs: WAIT_MS, ...kind }),
            release: async (h) => void await rl.release(h),
            close: async () => void await c.quit(),
          };
        },
      };
    }
    case "redlease-metrics":
    case "redlease-otel": {
      const [{ createClient }, rl, { otelHandler }] = await Promise.all([
        import("redis"),
        import(redleaseUrl) as Promise<Any>,
        import("./_otel.ts"),
      ]);
      return {
        async connect(url) {
          const c = createClient({ url });
          c.on("error", onError("node-redis"));
          await c.connect();
          rl.configure(c, { onEvent: await otelHandler(lib === "redlease-metrics") });
          return {
            acquire: (name) => rl.acquire(c, name, { waitMs: WAIT_MS }),
            release: async (h) => void await rl.release(h),
            close: async () => void await c.quit(),
          };
        },
      };
    }
    case "redlease-io": {
      const [rl, io] = await Promise.all([
        import(redleaseUrl) as Promise<Any>,
        // The adapter bundled beside redleaseUrl from the same tree (bench/_bundle.ts), not src/ through tsx: its
        // code runs on every command, and the tree under test may not be this one (bench/sequential.ts).
        import(adapterBundle(redleaseUrl)) as Promise<Any>,
        import("ioredis"),
      ]);
      return {
        async connect(url) {
          const c = await ioredisClient(url);
          const d = io.ioredis(c);
          return {
            acquire: (name) => rl.acquire(d, name, { waitMs: WAIT_MS }),
            release: async (h) => void await rl.release(h),
            close: async () => void await c.quit(),
          };
        },
      };
    }
    case "redlease-glide": {
      const [rl, gl, { GlideClient, Logger }] = await Promise.all([
        import(redleaseUrl) as Promise<Any>,
        import(adapterBundle(redleaseUrl, "glide")) as Promise<Any>, // (as redlease-io: the same build's adapter)
        import("@valkey/valkey-glide"),
      ]);
      Logger.setLoggerConfig("error");
      return {
        async connect(url) {
          const { hostname, port } = new URL(url);
          const c = await GlideClient.createClient({
            addresses: [{ host: hostname, port: Number(port) }],
            requestTimeout: WAIT_MS, // (GLIDE's 250 ms default fails a call that a loaded machine answers late)
          });
          const d = gl.glide(c);
          return {
            acquire: (name) => rl.acquire(d, name, { waitMs: WAIT_MS }),
            release: async (h) => void await rl.release(h),
            close: () => Promise.resolve(c.close()),
          };
        },
      };
    }
    case "raw": {
      const { createClient } = await import("redis");
      return {
        async connect(url) {
          const c = createClient({ url });
          c.on("error", onError("node-redis"));
          await c.connect();
          return {
            async acquire(name) {
              const key = `raw:${name}`, token = randomUUID();
              const deadline = performance.now() + WAIT_MS;
              for (;;) {
                if (await c.sendCommand(["SET", key, token, "NX", "PX", String(LEASE_MS)]) === "OK") {
                  return [key, token];
                }
                if (performance.now() >= deadline) throw new Error(`raw: not acquired within ${WAIT_MS} ms`);
                await sleep(RAW_POLL_MS);
              }
            },
            async release(h) {
              const [key, token] = h as [string, string];
              const cmd = ["EVALSHA", RAW_RELEASE_SHA, "1", key, token];
              try {
                await c.sendCommand(cmd);
              } catch (e) {
                if (!String((e as Error)?.message).startsWith("NOSCRIPT")) throw e;
                await c.sendCommand(["SCRIPT", "LOAD", RAW_RELEASE]);
                await c.sendCommand(cmd);
              }
            },
            close: async () => void await c.quit(),
          };
        },
      };
    }
    case "redlock":
    case "sesame": {
      // (redlock's package.json "exports" hides its typings: import it through a variable specifier)
      const spec = lib === "redlock" ? "redlock" : "@sesamecare-oss/redlock";
      const m: Any = await import(spec);
      const Redlock = lib === "redlock" ? m.default : m.Redlock;
      await import("ioredis");
      const settings = tuned ? redlockTuned : redlockDefault;
      return {
        async connect(url) {
          const c = await ioredisClient(url);
          const rl = new Redlock([c], settings);
          return {
            acquire: (name) => rl.acquire([name], LEASE_MS),
            release: async (h) => void await (h as Any).release(),
            close: async () => void await c.quit(),
          };
        },
      };
    }
    case "ring": {
      const { createClient } = await import("redis");
      return {
        async connect(url, seat = { index: 0, of: 1 }) {
          const pub = createClient({ url });
          pub.on("error", onError("node-redis"));
          const sub = pub.duplicate();
          sub.on("error", onError("node-redis"));
          await Promise.all([pub.connect(), sub.connect()]);
          const tokens = new Map<string, number>(), waiting = new Map<string, () => void>(), seen = new Set<string>();
          await sub.subscribe(`ring:${seat.index}`, (name) => {
            const wake = waiting.get(name);
            if (wake) {
              waiting.delete(name);
              wake();
            } else tokens.set(name, (tokens.get(name) ?? 0) + 1);
          });
          const next = `ring:${(seat.index + 1) % seat.of}`;
          return {
            acquire(name) {
              if (seat.index === 0 && !seen.has(name)) { // worker 0 starts with the token
                seen.add(name);
                return Promise.resolve(name);
              }
              const t = tokens.get(name) ?? 0;
              if (t > 0) {
                tokens.set(name, t - 1);
                return Promise.resolve(name);
              }
              return new Promise((resolve) => waiting.set(name, () => resolve(name)));
            },
            release: async (h) => void await pub.sendCommand(["PUBLISH", next, h as string]),
            close: async () => void await Promise.all([sub.quit(), pub.quit()]),
          };
        },
      };
    }
    case "fifo": {
      return {
        async connect(url) {
          const { c, sub } = await scriptedPair(url, [FIFO_ACQUIRE, FIFO_RELEASE]);
          const id = randomUUID(), acq = sha1(FIFO_ACQUIRE), rel = sha1(FIFO_RELEASE), g = grants("fifo");
          await sub.subscribe(`fifo:${id}`, (name: string) => g.granted(name)); // the message names the lock
          const keys = (name: string) => [`fifo:{${name}}`, `fifo:{${name}}:q`];
          return {
            async acquire(name) {
              const got = await c.sendCommand(["EVALSHA", acq, "2", ...keys(name), id, String(LEASE_MS)]);
              if (got !== 1) await g.wait(name);
              return name;
            },
            release: async (h) => {
              const name = h as string;
              await c.sendCommand(["EVALSHA", rel, "2", ...keys(name), id, String(LEASE_MS), name]);
            },
            close: async () => void await Promise.all([sub.quit(), c.quit()]),
          };
        },
      };
    }
    case "fenced": {
      return {
        async connect(url) {
          const c = await scriptedClient(url, [FENCED_ACQUIRE, FENCED_RELEASE]);
          const acq = sha1(FENCED_ACQUIRE), rel = sha1(FENCED_RELEASE);
          return {
            async acquire(name) {
              const keys = [`fenced:{${name}}`, `fenced:{${name}}:q`], owner = randomUUID();
              const deadline = performance.now() + WAIT_MS;
              for (;;) {
                const f = await c.sendCommand(["EVALSHA", acq, "2", ...keys, owner, String(LEASE_MS)]);
                if (f !== 0) return [keys, owner];
                if (performance.now() >= deadline) throw new Error(`fenced: not acquired within ${WAIT_MS} ms`);
                await sleep(RAW_POLL_MS);
              }
            },
            async release(h) {
              const [keys, owner] = h as [string[], string];
              await c.sendCommand(["EVALSHA", rel, "2", ...keys, owner, "10000"]);
            },
            close: async () => void await c.quit(),
          };
        },
      };
    }
    case "fenced-io": {
      await import("ioredis");
      return {
        async connect(url) {
          const c = await ioredisClient(url);
          await Promise.all([FENCED_ACQUIRE, FENCED_RELEASE].map((s) => c.script("LOAD", s)));
          const acq = sha1(FENCED_ACQUIRE), rel = sha1(FENCED_RELEASE);
          return {
            async acquire(name) {
              const lease = `fenced:{${name}}`, queue = `fenced:{${name}}:q`, owner = randomUUID();
              const deadline = performance.now() + WAIT_MS;
              for (;;) {
                const f = await c.evalsha(acq, 2, lease, queue, owner, LEASE_MS);
                if (f !== 0) return [lease, queue, owner];
                if (performance.now() >= deadline) throw new Error(`fenced-io: not acquired within ${WAIT_MS} ms`);
                await sleep(RAW_POLL_MS);
              }
            },
            async release(h) {
              const [lease, queue, owner] = h as [string, string, string];
              await c.evalsha(rel, 2, lease, queue, owner, 10000);
            },
            close: async () => void await c.quit(),
          };
        },
      };
    }
    case "guarded": {
      return {
        async connect(url) {
          const scripts = [FENCED_ACQUIRE, FENCED_RELEASE, FENCED_EXTEND];
          const c = await scriptedClient(url, scripts);
          const [acq, rel, ext] = scripts.map(sha1);
          // (A sentinel entry, as redlease's holdMap(): a Map emptied on every cycle is shrunk and grown again.)
          const timer = sharedTimer(), holds = new Map<string, GuardedHold>([["", undefined as never]]);
          const prefix = randomUUID().slice(0, 16);
          let n = 0;
          const drift = Math.floor(LEASE_MS * 0.01) + 2; // redlease's margin for clock drift
          /**
           * One call, bounded: settles with its decoded reply, or rejects once `until` passes first. A reply that
           * comes after that goes to `late` (a grant nobody is waiting for must be given back).
           */
          const bounded = <T>(
            cmd: string[],
            until: number,
            decode: (r: unknown) => T | Promise<T>,
            late?: (r: unknown) => void,
          ) =>
            new Promise<T>((resolve, reject) => {
              const due = timer.add(until, () => reject(new Error("guarded: Redis did not answer in time")));
              c.sendCommand(cmd).then((r) => {
                if (due.i < 0) return late?.(r);
                timer.drop(due);
                try {
                  resolve(decode(r));
                } catch (e) {
                  reject(e);
                }
              }, (e) => {
                timer.drop(due);
                reject(e);
              });
            });
          const releaseCmd = (keys: string[], owner: string) => ["EVALSHA", rel, "2", keys[0], keys[1], owner, "10000"];
          const give = (keys: string[], owner: string) => void c.sendCommand(releaseCmd(keys, owner)).catch(() => {});
          const renew = (h: GuardedHold): void => {
            if (h.released) return;
            const t0 = performance.now();
            bounded(["EVALSHA", ext, "1", h.keys[0], h.owner, String(LEASE_MS)], h.deadline, Number).then((held) => {
              if (h.released) return;
              if (held !== 1) return void holds.delete(h.id); // lost: nothing to renew
              h.deadline = t0 + LEASE_MS - drift;
              h.renewal = timer.add(t0 + LEASE_MS / 3, () => renew(h));
            }, () => {
              if (h.released) return;
              // Unreachable: retry until the local deadline, then the lease is lost.
              if (performance.now() >= h.deadline) return void holds.delete(h.id);
              h.renewal = timer.add(performance.now() + 100, () => renew(h));
            });
          };
          const attempt = (keys: string[], owner: string, until: number): Promise<GuardedHold> => {
            const t0 = performance.now();
            const cmd = ["EVALSHA", acq, "2", keys[0], keys[1], owner, String(LEASE_MS)];
            return bounded(cmd, until, (r) => {
              if (r === 0) {
                if (performance.now() >= until) throw new Error(`guarded: not acquired within ${WAIT_MS} ms`);
                return sleep(RAW_POLL_MS).then(() => attempt(keys, owner, until));
              }
              const deadline = t0 + LEASE_MS - drift;
              if (performance.now() >= deadline) {
                give(keys, owner);
                throw new Error("guarded: the grant came after the lease ran out");
              }
              const id = `${keys[0]}\n${owner}`;
              const h: GuardedHold = {
                id,
                keys,
                owner,
                fence: String(r),
                deadline,
                renewal: undefined,
                released: false,
              };
              h.renewal = timer.add(t0 + LEASE_MS / 3, () => renew(h));
              holds.set(id, h);
              return h;
            }, (r) => r === 0 || give(keys, owner));
          };
          const release = (h: GuardedHold): Promise<void> => {
            if (h.released) return Promise.resolve();
            h.released = true;
            const now = performance.now();
            const released = bounded(
              releaseCmd(h.keys, h.owner),
              now + Math.max(250, h.deadline - now),
              () => undefined,
            );
            if (h.renewal) timer.drop(h.renewal);
            holds.delete(h.id);
            return released;
          };
          return {
            acquire(name) {
              if (typeof name !== "string" || name === "" || name.length > 1024) {
                return Promise.reject(new TypeError("guarded: 'name' must be a string of 1 to 1024 characters"));
              }
              // One hash tag for all the keys, as redlease keeps them: `}` and `%` escaped.
              const tag = /[%}]/.test(name) ? name.replace(/[%}]/g, (x) => (x === "%" ? "%25" : "%7D")) : name;
              const key = `guarded:{${tag}}`, owner = prefix + (++n).toString(36);
              return attempt([key, `${key}:q`], owner, performance.now() + WAIT_MS);
            },
            // (The same wrapper as redlease's row.)
            release: async (h) => void await release(h as GuardedHold),
            close: async () => void await c.quit(),
          };
        },
      };
    }
    case "fairfenced": {
      return {
        async connect(url) {
          const { c, sub } = await scriptedPair(url, [FAIR_QUEUE, FAIR_HANDOFF]);
          const id = randomUUID(), queue = sha1(FAIR_QUEUE), handoff = sha1(FAIR_HANDOFF), g = grants("fairfenced");
          const onMessage = (m: string) => g.granted(m.slice(0, m.indexOf(":"))); // "<attempt>:<fence>:…"
          const subscribed = new Set<string>();
          let attempts = 0;
          return {
            async acquire(name) {
              const keys = [`ff:{${name}}`, `ff:{${name}}:q`], channel = `${keys[0]}:w:${id}`;
              if (!subscribed.has(channel)) {
                subscribed.add(channel);
                await sub.subscribe(channel, onMessage);
              }
              const attempt = String(++attempts);
              const r = await c.sendCommand([
                "EVALSHA",
                queue,
                "2",
                ...keys,
                id,
                String(LEASE_MS),
                `${id}|${attempt}|${id}`,
                "30000",
              ]);
              if (Array.isArray(r)) await g.wait(attempt);
              return name;
            },
            release: async (h) => {
              const name = h as string;
              await c.sendCommand(["EVALSHA", handoff, "2", `ff:{${name}}`, `ff:{${name}}:q`, id, String(LEASE_MS)]);
            },
            close: async () => void await Promise.all([sub.quit(), c.quit()]),
          };
        },
      };
    }
    case "fairpermits": {
      return {
        async connect(url) {
          const { c, sub } = await scriptedPair(url, [FAIR_PERMITS_ACQUIRE, FAIR_PERMITS_RELEASE]);
          const id = randomUUID(), g = grants("fairpermits");
          const acq = sha1(FAIR_PERMITS_ACQUIRE), rel = sha1(FAIR_PERMITS_RELEASE);
          const onMessage = (m: string) => g.granted(m.slice(0, m.indexOf(":"))); // "<attempt>:<fence>:…"
          const subscribed = new Set<string>();
          const keys = (name: string) => [`fp:{${name}}`, `fp:{${name}}:q`, `fp:{${name}}:f`];
          let attempts = 0;
          return {
            async acquire(name) {
              const ks = keys(name), channel = `${ks[0]}:w:${id}`;
              if (!subscribed.has(channel)) {
                subscribed.add(channel);
                await sub.subscribe(channel, onMessage);
              }
              const attempt = String(++attempts), owner = `${id}:${attempt}`;
              const r = await c.sendCommand([
                "EVALSHA",
                acq,
                "3",
                ...ks,
                owner,
                String(LEASE_MS),
                String(PERMITS),
                `${id}|${attempt}|${owner}`,
                "30000",
              ]);
              if (Array.isArray(r)) await g.wait(attempt);
              return { name, owner };
            },
            release: async (h) => {
              const { name, owner } = h as { name: string; owner: string };
              await c.sendCommand(["EVALSHA", rel, "3", ...keys(name), owner, String(LEASE_MS), String(PERMITS)]);
            },
            close: async () => void await Promise.all([sub.quit(), c.quit()]),
          };
        },
      };
    }
    case "semaphore-weighted": {
      const { MultiSemaphore }: Any = await import("redis-semaphore");
      await import("ioredis");
      const options = tuned ? { retryInterval: 1 } : {};
      return {
        async connect(url, seat = { index: 0, of: 1 }) {
          const c = await ioredisClient(url);
          const weight = weightOfSeat(seat.index);
          return {
            async acquire(name) {
              const s = new MultiSemaphore(c, name, PERMITS, weight, options);
              await s.acquire();
              return s;
            },
            release: async (h) => void await (h as Any).release(),
            close: async () => void await c.quit(),
          };
        },
      };
    }
    case "semaphore-permits": {
      const { Semaphore }: Any = await import("redis-semaphore");
      await import("ioredis");
      const options = tuned ? { retryInterval: 1 } : {};
      return {
        async connect(url) {
          const c = await ioredisClient(url);
          return {
            async acquire(name) {
              const s = new Semaphore(c, name, PERMITS, options);
              await s.acquire();
              return s;
            },
            release: async (h) => void await (h as Any).release(),
            close: async () => void await c.quit(),
          };
        },
      };
    }
    case "semaphore": {
      const { Mutex }: Any = await import("redis-semaphore");
      await import("ioredis");
      const options = tuned ? { retryInterval: 1 } : {};
      return {
        async connect(url) {
          const c = await ioredisClient(url);
          return {
            async acquire(name) {
              const m = new Mutex(c, name, options);
              await m.acquire();
              return m;
            },
            release: async (h) => void await (h as Any).release(),
            close: async () => void await c.quit(),
          };
        },
      };
    }
  }
}
