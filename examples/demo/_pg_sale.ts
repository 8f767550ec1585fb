// The flash sale with its stock and orders in PostgreSQL, and one app server paused mid-section past its lease.
//
// Several app-server processes (examples/demo/pg_buyer.ts) serve requests for S units of one item; each user sends
// two requests at once (a double click) that land on two different app servers, and may buy once. One request,
// under the sale's lock:
//
//   SELECT qty FROM stock;          0 → sold out
//   SELECT count(*) FROM orders WHERE buyer = $1;   > 0 → already bought
//   "authorise payment"             (sleep payMs)
//   BEGIN; UPDATE stock SET qty = qty - 1; INSERT INTO orders (buyer) …; COMMIT
//
// The app server that makes the run's first decision to sell stops (SIGSTOP) right after it, between the reads and the
// write, as a GC pause, a frozen VM or a stalled disk would stop it; the demo resumes it (SIGCONT) after several lease
// TTLs, and not before the others have sold the rest of the stock. (Which one is first is settled by a SET NX in Redis, so that the pause comes while stock is left.) Its
// lock expires meanwhile, the others sell the rest of the stock (the user of the paused request among them, through
// the twin request), and then the paused one writes what it decided before the pause. Three modes:
//
//   naive           SET lock "1" NX PX ttl, DEL lock; the write is plain SQL: it oversells and duplicates.
//   lease-no-check  redlease withLock (watchdog lease, TTL ttl); the write is the same plain SQL: the lease ended
//                   while the process was stopped, and nothing at the database knows, so it oversells too.
//   fenced          redlease withLock; the write is fencedSqlTransaction: the database refuses the paused app
//                   server's transaction, whose fence is lower than the newer holders' that wrote meanwhile.
import process from "node:process";
import type { createClient } from "redis";
import { LeaseLostError, withLock } from "../../mod.ts";
import { fencedSqlTransaction, type FenceSource, isStaleFenceError } from "../../src/fence.ts";

type Client = ReturnType<typeof createClient>;

export const PG_MODES = ["naive", "lease-no-check", "fenced"] as const;
export type PgMode = typeof PG_MODES[number];

export const PG_LABEL: Record<PgMode, string> = {
  naive: "naive SET NX lock, plain SQL",
  "lease-no-check": "redlease lease, plain SQL (no fence check)",
  fenced: "redlease lease + fencedSqlTransaction",
};

export interface PgSaleConfig {
  /** App-server processes. */
  readonly buyers: number;
  /** Units in stock. */
  readonly items: number;
  /** Users; each sends two requests at once, to two app servers. */
  readonly users: number;
  /** Requests in flight per app server. */
  readonly concurrency: number;
  /** The "payment" step between the reads and the write, ms. */
  readonly payMs: number;
  /** The lock's TTL: the naive lock's PX and redlease's watchdogMs. */
  readonly ttlMs: number;
  /** How long the paused app server stays stopped (longer than ttlMs). */
  readonly pauseMs: number;
  /** Longest wait for the lock before a request fails. */
  readonly waitMs: number;
}

/** The requests app server `index` serves: user k's two requests go to app servers 2k and 2k + 1 (mod buyers). */
export function pgShare(c: PgSaleConfig, index: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < 2 * c.users; i++) if (i % c.buyers === index) out.push(Math.floor(i / 2));
  return out;
}

/** The tables of the sale, in the demo's own schema (created by the demo, dropped afterwards). */
export function pgSchemaSql(schema: string): string[] {
  return [
    `CREATE SCHEMA ${schema}`,
    `CREATE TABLE ${schema}.stock (sku text PRIMARY KEY, qty int NOT NULL)`,
    `CREATE TABLE ${schema}.orders (id serial PRIMARY KEY, buyer text NOT NULL, sku text NOT NULL)`,
    // FENCE_TABLE_SQL, in the schema.
    `CREATE TABLE ${schema}.redlease_fences (resource text PRIMARY KEY, fence bigint NOT NULL)`,
  ];
}

/** What one app server counted. */
export interface PgCounts {
  handled: number;
  bought: number;
  soldOut: number;
  alreadyBought: number;
  /** fenced: transactions the database refused (StaleFenceError). */
  refused: number;
  /** redlease modes: sections whose lease was lost (the paused one's). */
  leaseLost: number;
  /** Lock waits that ran out. */
  errors: number;
  /** This app server was paused. */
  paused: number;
}

export function emptyPgCounts(): PgCounts {
  return { handled: 0, bought: 0, soldOut: 0, alreadyBought: 0, refused: 0, leaseLost: 0, errors: 0, paused: 0 };
}

/** A connection from the app server's pool, as fencedSqlTransaction needs it (every statement on one connection). */
export interface Conn {
  query(text: string, params?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
  release(): void;
}

class LockWaitTimeout extends Error {}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

type Outcome = "bought" | "sold-out" | "already" | "refused";

/**
 * Serve `users` (one request each) in `mode`, `c.concurrency` at a time. The first decision to sell of the run,
 * among every app server, stops its process right after it, having said `pause()` (the parent resumes it).
 */
export async function servePg(
  redis: Client,
  connect: () => Promise<Conn>,
  mode: PgMode,
  c: PgSaleConfig,
  prefix: string,
  users: readonly number[],
  pause: () => void,
): Promise<PgCounts> {
  const counts = emptyPgCounts();
  let pauseLeft = true;
  const lockKey = `${prefix}:naive-lock`;

  const plainWrite = async (conn: Conn, user: string) => {
    await conn.query("BEGIN");
    try {
      await conn.query("UPDATE stock SET qty = qty - 1 WHERE sku = 'tee'");
      await conn.query("INSERT INTO orders (buyer, sku) VALUES ($1, 'tee')", [user]);
      await conn.query("COMMIT");
    } catch (e) {
      await conn.query("ROLLBACK").catch(() => {});
      throw e;
    }
  };

  const section = async (conn: Conn, user: string, fence: FenceSource | undefined): Promise<Outcome> => {
    const [{ qty }] = (await conn.query("SELECT qty FROM stock WHERE sku = 'tee'")).rows;
    if (Number(qty) <= 0) return "sold-out";
    const [{ n }] = (await conn.query("SELECT count(*)::int AS n FROM orders WHERE buyer = $1", [user])).rows;
    if (Number(n) > 0) return "already";
    await sleep(c.payMs);
    // The run's first decision to sell (one app server wins the SET NX): stop here, between the reads and the
    // write, until the demo resumes this process.
    if (pauseLeft && (pauseLeft = false, await redis.set(`${prefix}:paused`, "1", { NX: true }) === "OK")) {
      counts.paused++;
      pause();
      process.kill(process.pid, "SIGSTOP");
    }
    if (fence === undefined) {
      await plainWrite(conn, user);
      return "bought";
    }
    try {
      await fencedSqlTransaction((t, p) => conn.query(t, p), fence, "sale", async (q) => {
        await q("UPDATE stock SET qty = qty - 1 WHERE sku = 'tee'", []);
        await q("INSERT INTO orders (buyer, sku) VALUES ($1, 'tee')", [user]);
      });
      return "bought";
    } catch (e) {
      if (isStaleFenceError(e)) return "refused";
      throw e;
    }
  };

  const naive = async (fn: () => Promise<Outcome>): Promise<Outcome> => {
    const deadline = performance.now() + c.waitMs;
    while (await redis.set(lockKey, "1", { NX: true, PX: c.ttlMs }) !== "OK") {
      if (performance.now() > deadline) throw new LockWaitTimeout();
      await sleep(5 + Math.random() * 5);
    }
    try {
      return await fn();
    } finally {
      await redis.del(lockKey);
    }
  };

  const one = async (user: string): Promise<Outcome> => {
    const conn = await connect();
    try {
      if (mode === "naive") return await naive(() => section(conn, user, undefined));
      let outcome: Outcome | undefined;
      try {
        return await withLock(redis, "sale", async (_signal, lease) => {
          // The lease itself is the fence source: its fence, checked not to have ended before the transaction.
          outcome = await section(conn, user, mode === "fenced" ? lease : undefined);
          return outcome;
        }, { prefix: `${prefix}:lease`, watchdogMs: c.ttlMs, waitMs: c.waitMs });
      } catch (e) {
        // The paused section's lease ended while it was stopped: its write was made (or refused) all the same.
        if (!(e instanceof LeaseLostError) || outcome === undefined) throw e;
        counts.leaseLost++;
        return outcome;
      }
    } finally {
      conn.release();
    }
  };

  let next = 0;
  const loop = async () => {
    while (next < users.length) {
      const user = `user-${users[next++]}`;
      try {
        const outcome = await one(user);
        if (outcome === "bought") counts.bought++;
        else if (outcome === "sold-out") counts.soldOut++;
        else if (outcome === "already") counts.alreadyBought++;
        else counts.refused++;
      } catch (e) {
        if (!(e instanceof LockWaitTimeout) && !(e instanceof LeaseLostError)) throw e;
        counts.errors++;
      }
      counts.handled++;
    }
  };
  await Promise.all(Array.from({ length: Math.min(c.concurrency, users.length) }, loop));
  return counts;
}
