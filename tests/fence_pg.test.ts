// Fenced writes to SQL (redlease/fence) against a real PostgreSQL server (one throwaway server for the file, tables
// of their own per test), through both `pg` and postgres.js: the guarded UPDATE and the fenced transaction, then
// concurrent transactions on several connections with explicit barriers, under READ COMMITTED and SERIALIZABLE, a
// flash sale raced from several connections, and child processes taking turns on one Redis lease, one of them
// SIGSTOPped past its lease. Leases come from a throwaway redis-server.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import pg from "pg";
import postgres from "postgres";
import { acquire, forceUnlock, isStaleFenceError, StaleFenceError, withLock } from "../mod.ts";
import { FENCE_TABLE_SQL, fencedSqlTransaction, fencedSqlUpdate, type SqlQuery, type SqlRows } from "../src/fence.ts";
import { type Client, type RedisServer, runtimeArgs, runtimeName, sleep, startRedis } from "./_redis.ts";
import { tryKill } from "../harness/cleanup.ts";
import { hasPostgres, type PostgresServer, startPostgres } from "../harness/postgres.ts";
import { pause, resume } from "../harness/redis.ts";
import { pollFor, withTimeout } from "../harness/wait.ts";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");

type Isolation = "read committed" | "repeatable read" | "serializable";
const ISOLATIONS = ["read committed", "serializable"] as const;

/** One connection of its own, for a transaction: its statements are never interleaved with anyone else's. */
interface Conn {
  readonly query: SqlQuery;
  /** Its server process, to see in pg_stat_activity whether it waits for a lock. */
  readonly pid: number;
  release(): void;
}

/** A client library, as the helpers see it: a query function for single statements, and dedicated connections. */
interface SqlClient {
  readonly name: string;
  readonly query: SqlQuery;
  connect(): Promise<Conn>;
  end(): Promise<void>;
}

async function withPid(query: SqlQuery, release: () => void): Promise<Conn> {
  const [{ pid }] = rowsOf(await query("SELECT pg_backend_pid() AS pid", []));
  return { query, pid: Number(pid), release };
}

function pgClient(url: string): SqlClient {
  const pool = new pg.Pool({ connectionString: url, max: 16 });
  return {
    name: "pg",
    query: (text, params) => pool.query(text, params),
    async connect() {
      const conn = await pool.connect();
      return withPid((text, params) => conn.query(text, params), () => conn.release());
    },
    end: () => pool.end(),
  };
}

function postgresJsClient(url: string): SqlClient {
  const sql = postgres(url, { max: 16, onnotice: () => {} });
  return {
    name: "postgres.js",
    query: (text, params) => sql.unsafe(text, params as never[]),
    async connect() {
      // A reserved connection: postgres.js accepts `BEGIN` there (on the pool it refuses it, UNSAFE_TRANSACTION).
      const reserved = await sql.reserve();
      return withPid((text, params) => reserved.unsafe(text, params as never[]), () => reserved.release());
    },
    end: () => sql.end({ timeout: 5 }),
  };
}

/** The rows, as a plain array (postgres.js resolves to an array of its own, with more properties). */
function rowsOf(result: SqlRows): Record<string, unknown>[] {
  return [...(Array.isArray(result) ? result : (result as { rows: unknown[] }).rows)] as Record<string, unknown>[];
}

let pgServer: PostgresServer;
let redisServer: RedisServer;
let redis: Client;
let admin: pg.Pool;
let clients: SqlClient[] = [];
let n = 0;

const NOT_INSTALLED = "PostgreSQL is not installed: these tests start a throwaway server from its binaries " +
  "(Debian: apt-get install postgresql; .ci/run installs it)";

/** Both clients, or a failure when the servers did not start (Bun goes on to run the tests after a failed before()). */
function bothClients(): SqlClient[] {
  if (clients.length !== 2) throw new Error(hasPostgres() ? "the servers did not start (see before())" : NOT_INSTALLED);
  return clients;
}
const fresh = (what: string) => `${what}_${++n}_${Math.random().toString(36).slice(2, 8)}`;

async function rows(text: string, params: unknown[] = []): Promise<Record<string, unknown>[]> {
  return (await admin.query(text, params)).rows;
}

/** Expect a StaleFenceError for `key` carrying `fence`, refused by `highest`. */
function stale(key: string, fence: number, highest: number, lockName = "") {
  return (e: unknown) => {
    assert.ok(e instanceof StaleFenceError, String(e));
    assert.deepEqual([e.key, e.fence, e.highest, e.lockName], [key, fence, highest, lockName]);
    return true;
  };
}

/** A serialization failure, as both clients report it: SQLSTATE 40001 in `code`. */
const isSerializationFailure = (e: unknown) => (e as { code?: unknown } | null)?.code === "40001";

/** Run `attempt` again while it fails with a serialization failure (SERIALIZABLE), counting the retries. */
async function retrying<T>(attempt: () => Promise<T>, retries: { n: number }): Promise<T> {
  for (let i = 0;; i++) {
    try {
      return await attempt();
    } catch (e) {
      if (!isSerializationFailure(e) || i === 50) throw e;
      retries.n++;
    }
  }
}

/** Fences from the Redis lease `name`, increasing: each acquired, then force-unlocked (an expiry, in effect). */
async function fencesFrom(name: string, count: number): Promise<number[]> {
  const fences: number[] = [];
  for (let i = 0; i < count; i++) {
    const lease = await acquire(redis, name);
    fences.push(lease.fence);
    await forceUnlock(redis, name);
  }
  return fences;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** Resolves once the server process `pid` waits for a lock (a row lock: another transaction holds the row). */
function blockedOnLock(pid: number): Promise<true> {
  return pollFor(`backend ${pid} to wait for a lock`, async () => {
    const [row] = await rows("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", [pid]);
    return row?.wait_event_type === "Lock" ? true : undefined;
  }, 20_000);
}

/** The fences of a table of writes `(id bigserial, fence bigint)`, in the order they were written. */
async function written(table: string): Promise<number[]> {
  return (await rows(`SELECT fence::text FROM ${table} ORDER BY id`)).map((r) => Number(r.fence));
}

async function recordedFence(resource: string): Promise<number | undefined> {
  const [row] = await rows("SELECT fence::text FROM redlease_fences WHERE resource = $1", [resource]);
  return row === undefined ? undefined : Number(row.fence);
}

/**
 * A fenced transaction on `conn` that records its fence in `table`. Barriers: `beforeCheck` holds the fence check
 * (after `BEGIN` was answered; `onBegun` says when), `inWork` holds `work` (after the fence check; `onChecked`).
 */
function fencedWrite(
  conn: Conn,
  fence: number,
  resource: string,
  table: string,
  isolation: Isolation,
  hooks: { beforeCheck?: Promise<void>; onBegun?: () => void; inWork?: Promise<void>; onChecked?: () => void } = {},
): Promise<number> {
  const query: SqlQuery = async (text, params) => {
    if (text.startsWith("INSERT INTO redlease_fences")) { // the helper's fence check, the statement after BEGIN
      hooks.onBegun?.();
      await hooks.beforeCheck;
    }
    return conn.query(text, params);
  };
  return fencedSqlTransaction(query, fence, resource, async (q) => {
    hooks.onChecked?.();
    await hooks.inWork;
    await q(`INSERT INTO ${table} (fence) VALUES ($1)`, [String(fence)]);
    return fence;
  }, { isolation });
}

/** A stock table (qty never below 0) with one row, 'tee' × qty, and an orders table (one order per buyer). */
async function sale(qty: number): Promise<{ stock: string; orders: string }> {
  const stock = fresh("stock"), orders = fresh("orders");
  await admin.query(`CREATE TABLE ${stock} (sku text PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0))`);
  await admin.query(`CREATE TABLE ${orders} (buyer text PRIMARY KEY, sku text NOT NULL, fence bigint NOT NULL)`);
  await admin.query(`INSERT INTO ${stock} VALUES ('tee', $1)`, [qty]);
  return { stock, orders };
}

/** Buy one tee in a fenced transaction: "ordered", "already ordered", or "sold out" (the order rolled back). */
function buy(
  query: SqlQuery,
  t: { stock: string; orders: string },
  fence: Parameters<typeof fencedSqlTransaction>[1],
  resource: string,
  buyer: string,
  isolation?: Isolation,
): Promise<string> {
  return fencedSqlTransaction(query, fence, resource, async (q) => {
    const ordered = await q(
      `INSERT INTO ${t.orders} VALUES ($1, 'tee', $2) ON CONFLICT DO NOTHING RETURNING buyer`,
      [buyer, String(typeof fence === "number" ? fence : fence.fence)],
    );
    if (rowsOf(ordered).length === 0) return "already ordered";
    const taken = await q(`UPDATE ${t.stock} SET qty = qty - 1 WHERE sku = 'tee' AND qty > 0 RETURNING qty`, []);
    if (rowsOf(taken).length === 0) throw new Error("sold out"); // rolls the order back
    return "ordered";
  }, isolation ? { isolation } : undefined).catch((e) =>
    e instanceof Error && e.message === "sold out" ? "sold out" : Promise.reject(e)
  );
}

async function saleState(t: { stock: string; orders: string }) {
  const [{ qty }] = await rows(`SELECT qty FROM ${t.stock}`);
  const orders = await rows(`SELECT buyer, fence::text FROM ${t.orders} ORDER BY buyer`);
  return { qty: Number(qty), orders: orders.map((r) => ({ buyer: String(r.buyer), fence: Number(r.fence) })) };
}

describe(`fenced SQL writes on a PostgreSQL server (${runtimeName()})`, () => {
  before(async () => {
    if (!hasPostgres()) throw new Error(NOT_INSTALLED);
    [pgServer, redisServer] = await Promise.all([startPostgres({ label: "fence-pg" }), startRedis()]);
    redis = await redisServer.client();
    admin = new pg.Pool({ connectionString: pgServer.url, max: 4 });
    await admin.query(FENCE_TABLE_SQL);
    clients = [pgClient(pgServer.url), postgresJsClient(pgServer.url)];
  });
  after(async () => {
    await Promise.all(clients.map((c) => withTimeout(c.end(), 10_000, `${c.name} end`).catch(() => {})));
    await admin?.end().catch(() => {});
    await Promise.all([pgServer?.stop(), redisServer?.stop()]);
  });

  test("fencedSqlUpdate() through pg and postgres.js: accepted, stale refused (row unchanged), equal accepted, rows returned, count 0", async () => {
    for (const c of bothClients()) {
      const table = fresh("items");
      await admin.query(
        `CREATE TABLE ${table} (id int PRIMARY KEY, qty int NOT NULL, fence bigint NOT NULL DEFAULT 0)`,
      );
      await admin.query(`INSERT INTO ${table} (id, qty) VALUES (1, 5)`);
      const name = fresh("lock");
      await using lease = await acquire(redis, name);
      const take = { table, set: "qty = qty - $1", where: "id = $2", params: [1, 1], returning: "qty, fence::text" };
      assert.deepEqual(
        await fencedSqlUpdate(c.query, lease, take),
        { count: 1, rows: [{ qty: 4, fence: String(lease.fence) }] },
        c.name,
      );
      await assert.rejects(fencedSqlUpdate(c.query, lease.fence - 1, take), stale(table, lease.fence - 1, lease.fence));
      assert.deepEqual(await rows(`SELECT qty, fence::text FROM ${table}`), [{ qty: 4, fence: String(lease.fence) }]);
      assert.equal((await fencedSqlUpdate(c.query, lease.fence, take)).count, 1, `${c.name}: an equal fence passes`);
      assert.equal((await fencedSqlUpdate(c.query, lease.fence + 5, take)).count, 1);
      await assert.rejects(fencedSqlUpdate(c.query, lease, take), stale(table, lease.fence, lease.fence + 5, name));
      const none = { table, set: "qty = 0", where: "id = $1", params: [2] };
      assert.deepEqual(await fencedSqlUpdate(c.query, lease.fence + 9, none), { count: 0, rows: [] }, "no such row");
      assert.deepEqual(await rows(`SELECT qty, fence::text FROM ${table}`), [{
        qty: 2,
        fence: String(lease.fence + 5),
      }]);
    }
  });

  test("fencedSqlUpdate() that waited for a row lock: READ COMMITTED re-checks (refused if a higher fence committed, written if a lower one did); SERIALIZABLE fails with 40001", async () => {
    for (const c of bothClients()) {
      const [holder, waiter] = [await c.connect(), await c.connect()];
      try {
        for (const isolation of ISOLATIONS) {
          // The waiter's statement runs alone, in a transaction of the session's isolation level.
          await waiter.query(
            `SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL ${isolation.toUpperCase()}`,
            [],
          );
          for (const [other, expected] of [[20, "refused"], [8, "written"]] as const) {
            const table = fresh("items");
            await admin.query(
              `CREATE TABLE ${table} (id int PRIMARY KEY, qty int NOT NULL, fence bigint NOT NULL DEFAULT 0)`,
            );
            await admin.query(`INSERT INTO ${table} (id, qty, fence) VALUES (1, 10, 5)`);
            // Another writer (plain SQL, as a fenced write would) holds the row; ours (fence 10) waits for its lock.
            await holder.query("BEGIN", []);
            await holder.query(`UPDATE ${table} SET qty = qty - 1, fence = $1 WHERE id = 1`, [String(other)]);
            let sent = 0;
            const counting: SqlQuery = (text, params) => (sent++, waiter.query(text, params));
            const update = fencedSqlUpdate(counting, 10, {
              table,
              set: "qty = qty - 1",
              where: "id = $1",
              params: [1],
            });
            update.catch(() => {});
            await blockedOnLock(waiter.pid);
            await holder.query("COMMIT", []);
            const what = `${c.name}, ${isolation}, ${expected}`;
            if (isolation === "serializable") {
              await assert.rejects(update, isSerializationFailure, what);
              assert.deepEqual(await rows(`SELECT qty, fence::text FROM ${table}`), [{ qty: 9, fence: String(other) }]);
            } else if (expected === "refused") {
              // Nothing written, and the statement's snapshot (taken before the COMMIT) showed fence 5: sent again.
              await assert.rejects(update, stale(table, 10, 20), what);
              assert.equal(sent, 2, `${what}: the statement is sent once more to tell a refusal from no row`);
              assert.deepEqual(await rows(`SELECT qty, fence::text FROM ${table}`), [{ qty: 9, fence: "20" }]);
            } else {
              assert.deepEqual(await update, { count: 1, rows: [{}] }, what);
              assert.equal(sent, 1);
              assert.deepEqual(await rows(`SELECT qty, fence::text FROM ${table}`), [{ qty: 8, fence: "10" }]);
            }
          }
        }
        await waiter.query("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED", []);
      } finally {
        holder.release();
        waiter.release();
      }
    }
  });

  test("fencedSqlTransaction() through pg and postgres.js: the flash sale commits both statements; a stale one is refused as a whole; an upsert", async () => {
    for (const c of bothClients()) {
      const conn = await c.connect();
      try {
        const t = await sale(2);
        const name = fresh("sale");
        const older = await acquire(redis, name);
        await forceUnlock(redis, name); // stands in for an expiry while `older` was paused
        await using lease = await acquire(redis, name);
        assert.equal(await buy(conn.query, t, lease, name, "ada"), "ordered", c.name);
        assert.equal(await buy(conn.query, t, lease, name, "ada"), "already ordered");
        assert.equal(await recordedFence(name), lease.fence);
        // The paused holder wakes up with the fence it was granted: refused before its statements run.
        let ran = false;
        await assert.rejects(
          fencedSqlTransaction(conn.query, older.fence, name, () => Promise.resolve(void (ran = true))),
          stale(name, older.fence, lease.fence),
        );
        await assert.rejects(buy(conn.query, t, older.fence, name, "bob"), stale(name, older.fence, lease.fence));
        assert.equal(ran, false);
        assert.deepEqual(await saleState(t), { qty: 1, orders: [{ buyer: "ada", fence: lease.fence }] });
        assert.equal(await recordedFence(name), lease.fence);
        // The connection is out of the transaction: no open transaction after the refusal.
        assert.deepEqual(rowsOf(await conn.query("SELECT now() = statement_timestamp() AS idle", [])), [{
          idle: true,
        }]);
        // Inserts and upserts go in a fenced transaction (fencedSqlUpdate updates existing rows only).
        const prices = fresh("prices");
        await admin.query(`CREATE TABLE ${prices} (sku text PRIMARY KEY, cents int NOT NULL)`);
        const upsert = (fence: number, cents: number) =>
          fencedSqlTransaction(conn.query, fence, `${name}:prices`, (q) =>
            q(
              `INSERT INTO ${prices} VALUES ('tee', $1) ON CONFLICT (sku) DO UPDATE SET cents = EXCLUDED.cents RETURNING cents`,
              [cents],
            ));
        assert.deepEqual(rowsOf(await upsert(lease.fence, 2000)), [{ cents: 2000 }]);
        assert.deepEqual(rowsOf(await upsert(lease.fence, 1500)), [{ cents: 1500 }]);
        await assert.rejects(upsert(older.fence, 1), isStaleFenceError);
        assert.deepEqual(await rows(`SELECT cents FROM ${prices}`), [{ cents: 1500 }]);
      } finally {
        conn.release();
      }
    }
  });

  test("fencedSqlTransaction() through pg and postgres.js rolls back on an error in work, and on a failed statement it caught", async () => {
    for (const c of bothClients()) {
      const conn = await c.connect();
      try {
        const t = await sale(3);
        const resource = fresh("sale");
        const boom = new Error("boom");
        await assert.rejects(
          fencedSqlTransaction(conn.query, 10, resource, async (q) => {
            await q(`UPDATE ${t.stock} SET qty = qty - 1`, []);
            await q(`INSERT INTO ${t.orders} VALUES ('ada', 'tee', 10)`, []);
            throw boom;
          }),
          (e) => e === boom,
        );
        assert.deepEqual(await saleState(t), { qty: 3, orders: [] }, c.name);
        assert.equal(await recordedFence(resource), undefined, "the fence row rolled back too");
        await assert.rejects(
          fencedSqlTransaction(conn.query, 10, resource, async (q) => {
            await q(`UPDATE ${t.stock} SET qty = qty - 1`, []);
            await q(`UPDATE ${t.stock} SET qty = qty - 10`, []).catch(() => {}); // CHECK (qty >= 0) fails; caught
            return "done";
          }),
          /check constraint/,
        );
        assert.deepEqual(await saleState(t), { qty: 3, orders: [] }, c.name);
        assert.equal(await recordedFence(resource), undefined);
        if (c.name === "postgres.js") {
          // Its pool refuses the helper's BEGIN: a transaction needs a reserved connection (or sql.begin()).
          await assert.rejects(
            fencedSqlTransaction(c.query, 10, resource, () => Promise.resolve()),
            /UNSAFE_TRANSACTION/,
          );
          assert.equal(await recordedFence(resource), undefined);
        }
        assert.deepEqual(rowsOf(await conn.query("SELECT now() = statement_timestamp() AS idle", [])), [{
          idle: true,
        }]);
      } finally {
        conn.release();
      }
    }
  });

  for (const isolation of [...ISOLATIONS, "repeatable read"] as const) {
    test(`fencedSqlTransaction() interleaved on two connections under ${isolation.toUpperCase()}: a lower fence never commits after a higher one`, async () => {
      const serializable = isolation !== "read committed"; // (REPEATABLE READ behaves as SERIALIZABLE here)
      for (const c of bothClients()) {
        const [a, b] = [await c.connect(), await c.connect()];
        try {
          // 1. The older transaction has begun (BEGIN answered) but not checked its fence when the newer one commits.
          {
            const resource = fresh("res"), table = fresh("writes");
            await admin.query(`CREATE TABLE ${table} (id bigserial PRIMARY KEY, fence bigint NOT NULL)`);
            const [older, newer] = await fencesFrom(resource, 2);
            const gate = deferred(), begun = deferred();
            const late = fencedWrite(a, older, resource, table, isolation, {
              beforeCheck: gate.promise,
              onBegun: begun.resolve,
            });
            late.catch(() => {});
            await begun.promise;
            assert.equal(await fencedWrite(b, newer, resource, table, isolation), newer);
            gate.resolve();
            // Refused, at both levels: the snapshot of the older one is taken by its first statement, the check.
            await assert.rejects(late, stale(resource, older, newer), `${c.name}, case 1`);
            assert.deepEqual(await written(table), [newer]);
            assert.equal(await recordedFence(resource), newer);
          }
          // 2. The older one has checked its fence (and holds the fence row) when the newer one checks: the newer one
          // waits for the row lock, and the older one commits first. Both writes are in fence order.
          {
            const resource = fresh("res"), table = fresh("writes");
            await admin.query(`CREATE TABLE ${table} (id bigserial PRIMARY KEY, fence bigint NOT NULL)`);
            const [older, newer] = await fencesFrom(resource, 2);
            const gate = deferred(), checked = deferred();
            const first = fencedWrite(a, older, resource, table, isolation, {
              inWork: gate.promise,
              onChecked: checked.resolve,
            });
            await checked.promise;
            const second = fencedWrite(b, newer, resource, table, isolation);
            second.catch(() => {});
            await blockedOnLock(b.pid);
            gate.resolve();
            assert.equal(await first, older, `${c.name}, case 2: it checked first, it commits first`);
            if (serializable) {
              // The row it waited for was changed by a transaction that committed meanwhile: 40001, nothing written.
              await assert.rejects(second, isSerializationFailure, `${c.name}, case 2`);
              assert.deepEqual(await written(table), [older]);
              assert.equal(await fencedWrite(b, newer, resource, table, isolation), newer, "retried, it commits");
            } else {
              assert.equal(await second, newer, `${c.name}, case 2: it re-checks the row it waited for, and commits`);
            }
            assert.deepEqual(await written(table), [older, newer]);
            assert.equal(await recordedFence(resource), newer);
          }
          // 3. The newer one has checked its fence when the older one checks: the older one waits for the row lock,
          // then finds the newer fence committed.
          {
            const resource = fresh("res"), table = fresh("writes");
            await admin.query(`CREATE TABLE ${table} (id bigserial PRIMARY KEY, fence bigint NOT NULL)`);
            const [older, newer] = await fencesFrom(resource, 2);
            const gate = deferred(), checked = deferred();
            const first = fencedWrite(a, newer, resource, table, isolation, {
              inWork: gate.promise,
              onChecked: checked.resolve,
            });
            await checked.promise;
            const late = fencedWrite(b, older, resource, table, isolation);
            late.catch(() => {});
            await blockedOnLock(b.pid);
            gate.resolve();
            assert.equal(await first, newer);
            if (serializable) {
              await assert.rejects(late, isSerializationFailure, `${c.name}, case 3`);
              await assert.rejects(
                fencedWrite(b, older, resource, table, isolation),
                stale(resource, older, newer),
                "retried, it is refused",
              );
            } else {
              await assert.rejects(late, stale(resource, older, newer), `${c.name}, case 3`);
            }
            assert.deepEqual(await written(table), [newer]);
            assert.equal(await recordedFence(resource), newer);
          }
          // Both connections are usable: no transaction left open on either.
          for (const conn of [a, b]) {
            assert.deepEqual(rowsOf(await conn.query("SELECT now() = statement_timestamp() AS idle", [])), [{
              idle: true,
            }]);
          }
        } finally {
          a.release();
          b.release();
        }
      }
    });
  }

  for (const isolation of ISOLATIONS) {
    test(`12 connections race with shuffled fences under ${isolation.toUpperCase()}: the committed writes are in fence order`, async () => {
      for (const c of bothClients()) {
        const conns = await Promise.all(Array.from({ length: 12 }, () => c.connect()));
        try {
          for (let round = 0; round < 2; round++) {
            const resource = fresh("res"), table = fresh("writes");
            await admin.query(
              `CREATE TABLE ${table} (id bigserial PRIMARY KEY, fence bigint NOT NULL, before bigint NOT NULL)`,
            );
            const fences = await fencesFrom(resource, conns.length);
            const shuffled = [...fences].sort(() => Math.random() - 0.5);
            const retries = { n: 0 };
            const outcomes = await Promise.all(conns.map(async (conn, i) => {
              const fence = shuffled[i];
              await sleep(Math.floor(Math.random() * 15));
              try {
                await retrying(() =>
                  fencedSqlTransaction(conn.query, fence, resource, async (q) => {
                    // What was committed before this one: read under the fence row's lock, then written alongside.
                    const [row] = rowsOf(await q(`SELECT coalesce(max(fence), 0)::text AS f FROM ${table}`, []));
                    await sleep(Math.floor(Math.random() * 5));
                    await q(`INSERT INTO ${table} (fence, before) VALUES ($1, $2)`, [String(fence), row.f]);
                  }, { isolation }), retries);
                return { fence, accepted: true as const };
              } catch (e) {
                if (!(e instanceof StaleFenceError)) throw e;
                return { fence, accepted: false as const, highest: e.highest };
              }
            }));
            const log = (await rows(`SELECT fence::text, before::text FROM ${table} ORDER BY id`)).map((r) => ({
              fence: Number(r.fence),
              before: Number(r.before),
            }));
            const what = `${c.name}, round ${round}: ${JSON.stringify(log)} ${JSON.stringify(outcomes)}`;
            const accepted = outcomes.filter((o) => o.accepted).map((o) => o.fence);
            assert.deepEqual(log.map((w) => w.fence), [...accepted].sort((x, y) => x - y), what);
            for (const w of log) assert.ok(w.before <= w.fence, `a write saw a higher fence committed: ${what}`);
            assert.ok(accepted.includes(Math.max(...fences)), `the highest fence is never refused: ${what}`);
            for (const o of outcomes) {
              if (!o.accepted) {
                assert.ok(o.highest > o.fence && accepted.includes(o.highest), `refused by a committed fence: ${what}`);
              }
            }
            assert.equal(await recordedFence(resource), Math.max(...fences));
            if (isolation === "read committed") {
              assert.equal(retries.n, 0, "no serialization failure under READ COMMITTED");
            }
          }
        } finally {
          for (const conn of conns) conn.release();
        }
      }
    });
  }

  for (const isolation of ISOLATIONS) {
    test(`the flash sale raced from 8 connections under ${isolation.toUpperCase()}: never oversold, one order per buyer, stale buyers refused`, async () => {
      for (const c of bothClients()) {
        const t = await sale(5);
        const name = fresh("sale");
        // Three holders whose leases passed on (force-unlocked: an expiry, in effect) before the sale opened.
        const staleFences = await fencesFrom(name, 3);
        const retries = { n: 0 };
        const buyers = ["u1", "u2", "u3", "u1", "u4", "u5", "u2", "u6", "u7", "u3", "u8", "u9", "u1", "u10"];
        const legit = buyers.map((buyer) =>
          withLock(redis, name, async (_signal, lease) => {
            const conn = await c.connect(); // taken under the lease: a connection never waits for a lease
            try {
              return await retrying(() => buy(conn.query, t, lease, name, buyer, isolation), retries);
            } finally {
              conn.release();
            }
          }, { waitMs: 60_000 })
        );
        // The stale holders wake up once a newer fence is recorded, and buy with the fence they were granted,
        // racing the buyers that are still queued.
        const late = staleFences.map(async (fence, i) => {
          await pollFor("a newer fence recorded", async () => ((await recordedFence(name)) ?? 0) > fence || undefined);
          const conn = await c.connect();
          try {
            return await retrying(() => buy(conn.query, t, fence, name, `stale${i}`, isolation), retries)
              .then((outcome) => ({ fence, outcome }), (e) => {
                if (!(e instanceof StaleFenceError)) throw e;
                return { fence, outcome: "refused" };
              });
          } finally {
            conn.release();
          }
        });
        const outcomes = await Promise.all(legit);
        const staleOutcomes = await Promise.all(late);
        const what = `${c.name}: ${JSON.stringify(outcomes)} ${JSON.stringify(staleOutcomes)}`;
        assert.deepEqual(staleOutcomes.map((o) => o.outcome), ["refused", "refused", "refused"], what);
        assert.equal(outcomes.filter((o) => o === "ordered").length, 5, what);
        const { qty, orders } = await saleState(t);
        assert.equal(qty, 0, what);
        assert.equal(orders.length, 5);
        assert.equal(new Set(orders.map((o) => o.buyer)).size, 5);
        assert.ok(orders.every((o) => !o.buyer.startsWith("stale") && !staleFences.includes(o.fence)), what);
      }
    });
  }

  test("child processes take turns on one Redis lease; one SIGSTOPped past its lease is refused by the database", async () => {
    bothClients();
    const name = fresh("turns");
    await admin.query(
      "CREATE TABLE IF NOT EXISTS ledger (id bigserial PRIMARY KEY, lease text, worker text, " +
        "fence bigint NOT NULL, before bigint NOT NULL)",
    );
    await admin.query("CREATE TABLE IF NOT EXISTS counters (lease text PRIMARY KEY, n int NOT NULL)");
    await admin.query("INSERT INTO counters VALUES ($1, 0)", [name]);
    const workers: { child: ChildProcess; out: string; err: string; exit: Promise<number | null> }[] = [];
    const start = (worker: string, turns: number, client: string, pause: boolean) => {
      const [cmd, pre] = runtimeArgs(join(here, "fixtures", "fence_pg_worker.ts"));
      const args = [redisServer.url, pgServer.url, name, worker, String(turns), client, pause ? "pause" : "wait"];
      const child = spawn(cmd, [...pre, ...args], {
        cwd: root,
        stdio: ["pipe", "pipe", "pipe"],
      });
      const w = { child, out: "", err: "", exit: new Promise<number | null>((r) => child.on("close", r)) };
      child.stdout!.on("data", (d) => (w.out += d));
      child.stderr!.on("data", (d) => (w.err += d));
      workers.push(w);
      return w;
    };
    try {
      // The first worker takes the lease and announces it, then waits for a line on its stdin before writing; the
      // others wait for a line before they start.
      const paused = start("w0", 2, "pg", true);
      const others = [start("w1", 4, "pg", false), start("w2", 4, "postgres.js", false)];
      const held = await pollFor("w0 to hold the lease", () => {
        const m = /holding (\d+)/.exec(paused.out);
        return Promise.resolve(m ? Number(m[1]) : undefined);
      }, 60_000).catch((e) => Promise.reject(new Error(`${e.message}; w0 stderr: ${paused.err}`)));
      // (By pid: on Deno, a ChildProcess's kill() sends nothing more once it has sent SIGSTOP.)
      pause(paused.child.pid!); // its watchdog cannot renew the lease: it expires in Redis
      paused.child.stdin!.end("go\n"); // read once it runs again
      for (const w of others) w.child.stdin!.end("go\n");
      // Resume it once the others have taken the lease and committed a newer fence.
      await pollFor(
        "a newer fence committed",
        async () => ((await recordedFence(name)) ?? 0) > held || undefined,
        60_000,
      )
        .catch((e) => Promise.reject(new Error(`${e.message}; ${others.map((w) => w.err).join("\n")}`)));
      resume(paused.child.pid!);
      const report = () => workers.map((w, i) => `w${i}: ${w.out}\n${w.err}`).join("\n---\n");
      const codes = await withTimeout(Promise.all(workers.map((w) => w.exit)), 60_000, "the workers to exit")
        .catch((e) => Promise.reject(new Error(`${e.message}\n${report()}`)));
      assert.deepEqual(codes, [0, 0, 0], report());
      const results = workers.map((w) =>
        JSON.parse(w.out.trim().split("\n").at(-1)!) as {
          accepted: number[];
          refused: { fence: number; highest: number }[];
        }
      );
      // The paused worker's write with its old fence was refused by the database, by a fence committed meanwhile.
      assert.equal(results[0].refused.length, 1, report());
      assert.equal(results[0].refused[0].fence, held);
      assert.ok(results[0].refused[0].highest > held, report());
      assert.equal(results[0].accepted.length, 1, "its next turn, with a new lease, is accepted");
      assert.deepEqual([results[1].refused, results[2].refused], [[], []], report());
      const ledger = await rows("SELECT worker, fence::text, before::text FROM ledger WHERE lease = $1 ORDER BY id", [
        name,
      ]);
      const staleAccepted = ledger.filter((r) => Number(r.fence) === held).length;
      assert.equal(staleAccepted, 0, "no stale write accepted");
      assert.equal(ledger.length, 9, report());
      const fences = ledger.map((r) => Number(r.fence));
      assert.deepEqual(fences, [...fences].sort((x, y) => x - y), "written in fence order");
      for (const r of ledger) assert.ok(Number(r.before) < Number(r.fence), JSON.stringify(ledger));
      assert.deepEqual(
        fences,
        results.flatMap((r) => r.accepted).sort((x, y) => x - y),
        "the ledger holds exactly the accepted writes",
      );
      assert.deepEqual(await rows("SELECT n FROM counters WHERE lease = $1", [name]), [{ n: 9 }]);
      assert.equal(await recordedFence(name), Math.max(...fences));
    } finally {
      for (const w of workers) {
        if (w.child.exitCode === null && w.child.signalCode === null) {
          tryKill(w.child.pid!, "SIGCONT");
          tryKill(w.child.pid!, "SIGKILL");
        }
      }
    }
  });
});
