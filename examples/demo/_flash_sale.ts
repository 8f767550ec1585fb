// The flash sale ("seckill") of the case study: S units of one item, U users, each allowed one order, and
// requests for them spread over several app-server processes. One request, in every mode:
//
//   pre-check   GET stock; sold out → reject                          (cheap front door, no lock)
//   user lock   HGET orders-by-user; already bought → reject          (one order per user)
//               "authorise payment"  (sleep payMs; sometimes slowMs)
//   item lock   GET stock; 0 → sold out
//               "write the order"    (sleep writeMs; sometimes slowMs)
//               SET stock v-1, RPUSH orders, HINCRBY orders-by-user   (read-modify-write on purpose, like a
//                                                                      DB row read then UPDATEd)
//
// Modes differ only in what "user lock" and "item lock" are:
//   no-lock   nothing: concurrent requests read the same stock and user state, so the sale oversells and
//             users order twice.
//   naive     SET key "1" NX PX ttl and a plain DEL: no owner token, a fixed TTL shorter than the slow
//             sections, so a lock expires under its holder, a second request enters, and the first one's DEL
//             then deletes the second one's lock.
//   redlease  withLock() per user and for the item (watchdog renewal, owner-checked release); the order write
//             also carries the lease's fencing token and is refused if a newer token has written.
import type { createClient } from "redis";
import { configure, type LeaseEvent, LeaseLostError, withLock } from "../../mod.ts";
import { rng } from "../../harness/rng.ts";

export type Client = ReturnType<typeof createClient>;

export const MODES = ["no-lock", "naive", "redlease"] as const;
export type Mode = typeof MODES[number];

export interface SaleConfig {
  /** App-server processes. */
  readonly buyers: number;
  /** Units in stock. */
  readonly items: number;
  readonly users: number;
  readonly requests: number;
  /** Requests in flight per process. */
  readonly concurrency: number;
  readonly payMs: number;
  readonly writeMs: number;
  /** Duration of a slow step (a GC pause, a slow payment provider, a slow disk). */
  readonly slowMs: number;
  /** Fraction of steps that are slow. */
  readonly slowRate: number;
  /** TTL of the naive SET NX lock: shorter than slowMs. */
  readonly naiveTtlMs: number;
  /** Longest wait for a lock before the request fails. */
  readonly waitMs: number;
  readonly seed: number;
}

export interface Request {
  readonly user: number;
  readonly payMs: number;
  readonly writeMs: number;
}

/**
 * Every request of the sale, shuffled: each user sends requests/users of them (double clicks, retries, several
 * tabs), and consecutive ones go to different app servers, as a load balancer would spread them.
 */
export function plan(c: SaleConfig): Request[] {
  const rnd = rng(c.seed); // (seeded: every process derives the same plan)
  const out: Request[] = [];
  for (let i = 0; i < c.requests; i++) {
    out.push({
      user: i % c.users,
      payMs: rnd() < c.slowRate / 2 ? c.slowMs : c.payMs,
      writeMs: rnd() < c.slowRate ? c.slowMs : c.writeMs,
    });
  }
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** The requests that app server `index` of `c.buyers` serves. */
export function share(c: SaleConfig, index: number): Request[] {
  return plan(c).filter((_, i) => i % c.buyers === index);
}

export interface SaleKeys {
  readonly stock: string;
  readonly orders: string;
  readonly byUser: string;
  readonly fence: string;
  /** Namespace of the naive locks. */
  readonly locks: string;
  /** Key prefix of the redlease leases. */
  readonly leasePrefix: string;
}

export function saleKeys(ns: string, mode: Mode): SaleKeys {
  const base = `${ns}:sale:${mode}`;
  return {
    stock: `${base}:stock`,
    orders: `${base}:orders`,
    byUser: `${base}:orders-by-user`,
    fence: `${base}:fence`,
    locks: `${base}:lock`,
    leasePrefix: `${base}:lease`,
  };
}

/** What one app server counted. */
export interface WorkerCounts {
  handled: number;
  bought: number;
  soldOut: number;
  alreadyBought: number;
  /** Lock waits that ran out, and unexpected errors. */
  errors: number;
  /** naive: DELs that removed a lock another request had acquired after ours expired. */
  wrongOwnerReleases: number;
  /** naive: releases that found our lock expired (gone or someone else's); redlease: leases lost. */
  expiredMidSection: number;
  /** redlease: order writes refused because a newer fencing token had written. */
  fencedOut: number;
  latenciesMs: number[];
  /** redlease: what its event hook (configure(client, { onEvent })) told, per lease: the item, and users' leases. */
  contention: { item: Contention; user: Contention };
}

/** One lease's (or kind of lease's) contention, as redlease's events tell it. */
export interface Contention {
  acquired: number;
  /** Acquisitions that had to wait (a `queued` event came first). */
  waited: number;
  /** Acquisitions granted by a release's handoff message. */
  handedOff: number;
  /** Wait of each acquisition that waited, ms. */
  waitsMs: number[];
  /** Grants that their waiter never claimed, passed on (`passed-on`). */
  passedOn: number;
  lost: number;
  /** Acquires that gave up (timeout, abort or error). */
  failed: number;
}

export function emptyContention(): Contention {
  return { acquired: 0, waited: 0, handedOff: 0, waitsMs: [], passedOn: 0, lost: 0, failed: 0 };
}

/** Count `client`'s lease events into `into`: redlease's own account of the contention. */
function countEvents(client: Client, into: WorkerCounts["contention"]): () => void {
  configure(client, {
    onEvent: (e: LeaseEvent) => {
      const c = e.name === "item" ? into.item : into.user;
      if (e.type === "acquired") {
        c.acquired++;
        if (e.queued) {
          c.waited++;
          c.waitsMs.push(e.waitMs);
        }
        if (e.handedOff) c.handedOff++;
      } else if (e.type === "passed-on") c.passedOn++;
      else if (e.type === "lost") c.lost++;
      else if (e.type === "acquire-failed") c.failed++;
    },
  });
  return () => configure(client, { onEvent: null });
}

export function emptyCounts(): WorkerCounts {
  return {
    handled: 0,
    bought: 0,
    soldOut: 0,
    alreadyBought: 0,
    errors: 0,
    wrongOwnerReleases: 0,
    expiredMidSection: 0,
    fencedOut: 0,
    latenciesMs: [],
    contention: { item: emptyContention(), user: emptyContention() },
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

class LockWaitTimeout extends Error {}

// The naive lock is exactly SET key "1" NX PX ttl and DEL key. For measurement only, the same Lua call also
// writes (on acquire) and reads (on release) a side key holding a per-acquisition token, so the demo can tell
// afterwards whether a DEL removed the caller's own lock. The lock itself never looks at the token.
const NAIVE_ACQUIRE = `
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[1])
  return 1
end
return 0`;
const NAIVE_RELEASE = `
local who = redis.call('GET', KEYS[2])
local deleted = redis.call('DEL', KEYS[1])
if deleted == 1 then redis.call('DEL', KEYS[2]) end
return { deleted, who or '' }`;

// The resource-side fencing check of the redlease mode: the order write is refused when a newer token wrote.
const FENCED_WRITE = `
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
redis.call('RPUSH', KEYS[3], ARGV[3])
redis.call('HINCRBY', KEYS[4], ARGV[3], 1)
return 1`;

type Section<T> = (fence: number | undefined) => Promise<T>;
type Lock = <T>(name: string, fn: Section<T>) => Promise<T>;

function naiveLock(client: Client, c: SaleConfig, k: SaleKeys, counts: WorkerCounts): Lock {
  let seq = 0;
  const me = crypto.randomUUID().slice(0, 8);
  return async (name, fn) => {
    const key = `${k.locks}:${name}`;
    const token = `${me}-${seq++}`;
    const deadline = performance.now() + c.waitMs;
    for (;;) {
      const got = await client.sendCommand([
        "EVAL",
        NAIVE_ACQUIRE,
        "2",
        key,
        `${key}:who`,
        String(c.naiveTtlMs),
        token,
      ]);
      if (got === 1) break;
      if (performance.now() > deadline) throw new LockWaitTimeout(name);
      await sleep(5 + Math.random() * 5);
    }
    try {
      return await fn(undefined);
    } finally {
      const [deleted, who] = await client.sendCommand(["EVAL", NAIVE_RELEASE, "2", key, `${key}:who`]) as [
        number,
        string,
      ];
      if (who !== token) counts.expiredMidSection++;
      if (deleted === 1 && who !== token) counts.wrongOwnerReleases++;
    }
  };
}

function redleaseLock(client: Client, c: SaleConfig, k: SaleKeys, counts: WorkerCounts): Lock {
  return async (name, fn) => {
    try {
      return await withLock(client, name, (_signal, lease) => fn(lease.fence), {
        prefix: k.leasePrefix,
        waitMs: c.waitMs,
      });
    } catch (e) {
      // Counted once, by the lock whose lease it was (an inner lock's loss passes through the outer one).
      if (e instanceof LeaseLostError && e.lockName === name) counts.expiredMidSection++;
      throw e;
    }
  };
}

const noLock: Lock = (_name, fn) => fn(undefined);

/** Serve `requests` with `c.concurrency` in flight; `progress` is called after each one. */
export async function serve(
  client: Client,
  mode: Mode,
  c: SaleConfig,
  k: SaleKeys,
  requests: readonly Request[],
  progress: (counts: WorkerCounts) => void,
): Promise<WorkerCounts> {
  const counts = emptyCounts();
  const lock = mode === "naive"
    ? naiveLock(client, c, k, counts)
    : mode === "redlease"
    ? redleaseLock(client, c, k, counts)
    : noLock;

  const write = async (stock: number, user: string, fence: number | undefined): Promise<boolean> => {
    if (mode === "redlease") {
      const r = await client.sendCommand([
        "EVAL",
        FENCED_WRITE,
        "4",
        k.fence,
        k.stock,
        k.orders,
        k.byUser,
        String(fence),
        String(stock),
        user,
      ]);
      return r === 1;
    }
    await client.multi().set(k.stock, String(stock)).rPush(k.orders, user).hIncrBy(k.byUser, user, 1).exec();
    return true;
  };

  const one = async (r: Request): Promise<"bought" | "sold-out" | "already" | "fenced"> => {
    if (Number(await client.get(k.stock)) <= 0) return "sold-out";
    const user = String(r.user);
    return await lock(`user:${user}`, async () => {
      if (Number(await client.hGet(k.byUser, user) ?? 0) > 0) return "already";
      await sleep(r.payMs);
      return await lock("item", async (fence) => {
        const v = Number(await client.get(k.stock));
        if (v <= 0) return "sold-out";
        await sleep(r.writeMs);
        return await write(v - 1, user, fence) ? "bought" : "fenced";
      });
    });
  };

  let next = 0;
  const loop = async () => {
    while (next < requests.length) {
      const r = requests[next++];
      const t0 = performance.now();
      try {
        const outcome = await one(r);
        if (outcome === "bought") counts.bought++;
        else if (outcome === "sold-out") counts.soldOut++;
        else if (outcome === "already") counts.alreadyBought++;
        else counts.fencedOut++;
      } catch (e) {
        if (!(e instanceof LeaseLostError) && !(e instanceof LockWaitTimeout)) throw e;
        counts.errors++;
      }
      counts.latenciesMs.push(performance.now() - t0);
      counts.handled++;
      progress(counts);
    }
  };
  const stop = mode === "redlease" ? countEvents(client, counts.contention) : undefined;
  try {
    await Promise.all(Array.from({ length: Math.min(c.concurrency, requests.length) }, loop));
  } finally {
    stop?.();
  }
  return counts;
}
