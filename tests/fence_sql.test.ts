// Fenced writes to SQL (redlease/fence) on PostgreSQL compiled to WASM (PGlite, one instance for the file, tables of
// their own per test): one guarded UPDATE, and a fenced transaction of several statements, both or neither. Leases
// come from a throwaway redis-server.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { PGlite } from "@electric-sql/pglite";
import { acquire, forceUnlock, isStaleFenceError, release, StaleFenceError, withLock } from "../mod.ts";
import { FENCE_TABLE_SQL, fencedSqlTransaction, fencedSqlUpdate, type SqlQuery } from "../src/fence.ts";
import { type Client, type RedisServer, startRedis } from "./_redis.ts";

let db: PGlite;
let srv: RedisServer;
let client: Client;
let n = 0;
const fresh = (what: string) => `${what}_${++n}_${Math.random().toString(36).slice(2, 8)}`;
const query = (text: string, params: unknown[]) => db.query<Record<string, unknown>>(text, params);
// deno-lint-ignore no-explicit-any
const anyArgs = (f: (...args: any[]) => unknown, ...args: unknown[]) => Promise.resolve().then(() => f(...args));

/** Expect a StaleFenceError for `key` carrying `fence`, refused by `highest`. */
function stale(key: string, fence: number, highest: number, lockName = "") {
  return (e: unknown) => {
    assert.ok(e instanceof StaleFenceError, String(e));
    assert.ok(isStaleFenceError(e));
    assert.deepEqual([e.key, e.fence, e.highest, e.lockName], [key, fence, highest, lockName]);
    return true;
  };
}

async function rows(text: string, params: unknown[] = []): Promise<Record<string, unknown>[]> {
  return (await db.query<Record<string, unknown>>(text, params)).rows;
}

/** A stock table (qty never below 0) with one row, 'tee' × qty, and an orders table (one order per buyer). */
async function sale(qty: number): Promise<{ stock: string; orders: string }> {
  const stock = fresh("stock"), orders = fresh("orders");
  await db.query(
    `CREATE TABLE ${stock} (sku text PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0), fence bigint NOT NULL DEFAULT 0)`,
  );
  await db.query(`CREATE TABLE ${orders} (buyer text PRIMARY KEY, sku text NOT NULL)`);
  await db.query(`INSERT INTO ${stock} (sku, qty) VALUES ('tee', $1)`, [qty]);
  return { stock, orders };
}

/** Buy one tee for `buyer` in a fenced transaction: false when sold out or when the buyer has an order already. */
function buy(
  t: { stock: string; orders: string },
  lease: Parameters<typeof fencedSqlTransaction>[1],
  buyer: string,
  resource = t.stock,
): Promise<boolean> {
  return fencedSqlTransaction(query, lease, resource, async (q) => {
    const ordered = await q(`INSERT INTO ${t.orders} VALUES ($1, 'tee') ON CONFLICT DO NOTHING RETURNING buyer`, [
      buyer,
    ]);
    if (ordered.rows.length === 0) return false;
    const taken = await q(`UPDATE ${t.stock} SET qty = qty - 1 WHERE sku = 'tee' AND qty > 0 RETURNING qty`, []);
    if (taken.rows.length === 0) throw new Error("sold out"); // rolls the order back too
    return true;
  }).catch((e) => e instanceof Error && e.message === "sold out" ? false : Promise.reject(e));
}

async function state(t: { stock: string; orders: string }) {
  const [{ qty }] = await rows(`SELECT qty FROM ${t.stock}`);
  const buyers = (await rows(`SELECT buyer FROM ${t.orders} ORDER BY buyer`)).map((r) => r.buyer);
  return { qty, buyers };
}

describe("fenced SQL writes (PGlite)", () => {
  before(async () => {
    [db, srv] = await Promise.all([PGlite.create(), startRedis()]);
    client = await srv.client();
    await db.query(FENCE_TABLE_SQL);
  });
  after(async () => {
    await Promise.all([db.close(), srv.stop()]);
  });

  test("fencedSqlUpdate() writes under a live lease, refuses a lower fence (row unchanged), accepts an equal one", async () => {
    const table = fresh("items");
    await db.query(`CREATE TABLE ${table} (id int PRIMARY KEY, qty int NOT NULL, fence bigint NOT NULL DEFAULT 0)`);
    await db.query(`INSERT INTO ${table} (id, qty) VALUES (1, 5)`);
    const name = fresh("lock");
    await using lease = await acquire(client, name);
    const take = { table, set: "qty = qty - $1", where: "id = $2", params: [1, 1], returning: "qty, fence::text" };
    assert.deepEqual(await fencedSqlUpdate(query, lease, take), {
      count: 1,
      rows: [{ qty: 4, fence: String(lease.fence) }],
    });
    await assert.rejects(fencedSqlUpdate(query, lease.fence - 1, take), stale(table, lease.fence - 1, lease.fence));
    await assert.rejects(fencedSqlUpdate(query, { fence: 1 }, take), stale(table, 1, lease.fence));
    assert.deepEqual(await rows(`SELECT qty, fence::text FROM ${table}`), [{ qty: 4, fence: String(lease.fence) }]);
    assert.equal((await fencedSqlUpdate(query, lease.fence, take)).count, 1, "an equal fence passes");
    assert.equal((await fencedSqlUpdate(query, lease.fence + 5, take)).count, 1);
    await assert.rejects(fencedSqlUpdate(query, lease, take), stale(table, lease.fence, lease.fence + 5, name));
    assert.deepEqual(await rows(`SELECT qty, fence::text FROM ${table}`), [{ qty: 2, fence: String(lease.fence + 5) }]);
  });

  test("fencedSqlUpdate() resolves count 0 when no row matches (none, or the condition is false), never stale", async () => {
    const table = fresh("items");
    await db.query(`CREATE TABLE ${table} (id int PRIMARY KEY, qty int NOT NULL, fence bigint NOT NULL DEFAULT 0)`);
    await db.query(`INSERT INTO ${table} (id, qty, fence) VALUES (1, 0, 100)`);
    const none = { table, set: "qty = qty - 1", where: "id = $1", params: [2] };
    assert.deepEqual(await fencedSqlUpdate(query, 200, none), { count: 0, rows: [] }, "no such row");
    const soldOut = { table, set: "qty = qty - 1", where: "id = $1 AND qty > 0", params: [1] };
    assert.deepEqual(await fencedSqlUpdate(query, 200, soldOut), { count: 0, rows: [] }, "the condition is false");
    // A stale writer is refused when the row matches its where; a where that matches nothing is count 0 for anyone.
    assert.deepEqual(await fencedSqlUpdate(query, 50, soldOut), { count: 0, rows: [] });
    await assert.rejects(
      fencedSqlUpdate(query, 50, { table, set: "qty = 9", where: "id = $1", params: [1] }),
      stale(table, 50, 100),
    );
    assert.deepEqual(await rows(`SELECT qty, fence::text FROM ${table}`), [{ qty: 0, fence: "100" }]);
    // Several rows: each is guarded by its own fence; those a higher fence wrote are left as they are.
    await db.query(`INSERT INTO ${table} (id, qty, fence) VALUES (2, 1, 10), (3, 1, 300)`);
    const all = { table, set: "qty = qty + 1", where: "id >= $1", params: [2], returning: "id" };
    assert.deepEqual(await fencedSqlUpdate(query, 200, all), { count: 1, rows: [{ id: 2 }] });
    await assert.rejects(fencedSqlUpdate(query, 100, all), stale(table, 100, 300), "no row written: refused");
    const now = await rows(`SELECT id, qty, fence::text FROM ${table} ORDER BY id`);
    assert.deepEqual(now, [{ id: 1, qty: 0, fence: "100" }, { id: 2, qty: 2, fence: "200" }, {
      id: 3,
      qty: 1,
      fence: "300",
    }]);
  });

  test("fencedSqlTransaction() with a live lease commits every statement and records the fence", async () => {
    const t = await sale(3);
    const name = fresh("sale");
    await using lease = await acquire(client, name);
    let late: ((text: string, params: unknown[]) => Promise<unknown>) | undefined;
    const left = await fencedSqlTransaction(query, lease, name, async (q) => {
      late = q;
      await q(`INSERT INTO ${t.orders} VALUES ($1, 'tee')`, ["ada"]);
      const r = await q(`UPDATE ${t.stock} SET qty = qty - 1 RETURNING qty`, []);
      return r.rows[0].qty;
    });
    assert.equal(left, 2);
    assert.deepEqual(await state(t), { qty: 2, buyers: ["ada"] });
    assert.deepEqual(await rows(`SELECT fence::text FROM redlease_fences WHERE resource = $1`, [name]), [{
      fence: String(lease.fence),
    }]);
    await assert.rejects(late!("SELECT 1", []), /transaction has ended/);
    assert.equal(await buy(t, lease, "bob", name), true, "an equal fence passes");
    assert.deepEqual(await state(t), { qty: 1, buyers: ["ada", "bob"] });
  });

  test("a lease over several names writes with the fence of the name it gives", async () => {
    const [one, two] = [fresh("account"), fresh("account")];
    await using lease = await acquire(client, [one, two]);
    await assert.rejects(fencedSqlTransaction(query, lease, two, () => Promise.resolve()), /must say which/);
    await fencedSqlTransaction(query, lease, two, () => Promise.resolve(), { name: two });
    assert.deepEqual(await rows(`SELECT fence::text FROM redlease_fences WHERE resource = $1`, [two]), [{
      fence: String(lease.fences[1]),
    }]);
    const table = fresh("accounts");
    await db.query(
      `CREATE TABLE ${table} (id text PRIMARY KEY, balance int NOT NULL, fence bigint NOT NULL DEFAULT 0)`,
    );
    await db.query(`INSERT INTO ${table} (id, balance) VALUES ($1, 100)`, [one]);
    const debit = { table, set: "balance = balance - 40", where: "id = $1", params: [one], returning: "fence::text" };
    assert.deepEqual((await fencedSqlUpdate(query, lease, debit, { name: one })).rows, [{
      fence: String(lease.fences[0]),
    }]);
  });

  test("fencedSqlTransaction() refuses a stale fence as a whole: work never runs, stock and orders unchanged", async () => {
    const t = await sale(3);
    const resource = fresh("sale");
    assert.equal(await buy(t, 1_000, "ada", resource), true);
    let ran = false;
    await assert.rejects(
      fencedSqlTransaction(query, 999, resource, () => Promise.resolve(void (ran = true))),
      stale(resource, 999, 1_000),
    );
    await assert.rejects(buy(t, { fence: 5 }, "bob", resource), stale(resource, 5, 1_000));
    assert.equal(ran, false);
    assert.deepEqual(await state(t), { qty: 2, buyers: ["ada"] });
    assert.deepEqual(await rows(`SELECT fence::text FROM redlease_fences WHERE resource = $1`, [resource]), [{
      fence: "1000",
    }]);
    // The connection is out of the transaction: a plain statement after the refusal is not inside an aborted one.
    assert.deepEqual(await rows("SELECT 1 AS one"), [{ one: 1 }]);
  });

  test("fencedSqlTransaction() rolls back and rethrows a user error, and a failed statement even if caught", async () => {
    const t = await sale(3);
    const resource = fresh("sale");
    const boom = new Error("boom");
    await assert.rejects(
      fencedSqlTransaction(query, 10, resource, async (q) => {
        await q(`UPDATE ${t.stock} SET qty = qty - 1`, []);
        await q(`INSERT INTO ${t.orders} VALUES ('ada', 'tee')`, []);
        throw boom;
      }),
      (e) => e === boom,
    );
    assert.deepEqual(await state(t), { qty: 3, buyers: [] });
    assert.deepEqual(
      await rows(`SELECT * FROM redlease_fences WHERE resource = $1`, [resource]),
      [],
      "fence rolled back",
    );
    await assert.rejects(
      fencedSqlTransaction(query, 10, resource, async (q) => {
        await q(`UPDATE ${t.stock} SET qty = qty - 1`, []);
        await q(`UPDATE ${t.stock} SET qty = qty - 10`, []).catch(() => {}); // CHECK (qty >= 0) fails; caught
        return "done";
      }),
      /check constraint/,
    );
    assert.deepEqual(await state(t), { qty: 3, buyers: [] });
    assert.deepEqual(await rows("SELECT 1 AS one"), [{ one: 1 }], "the connection is usable again");
  });

  test("fencedSqlTransaction() with begin: false runs inside PGlite's db.transaction(), which a refusal rolls back", async () => {
    const t = await sale(3);
    const resource = fresh("sale");
    const inTx = (lease: number, buyer: string) =>
      db.transaction((tx) =>
        fencedSqlTransaction((text, params) => tx.query(text, params), lease, resource, async (q) => {
          await q(`INSERT INTO ${t.orders} VALUES ($1, 'tee')`, [buyer]);
          await q(`UPDATE ${t.stock} SET qty = qty - 1`, []);
        }, { begin: false })
      );
    await Promise.all([inTx(20, "ada"), inTx(21, "bob")]); // concurrent callers, one transaction at a time
    await assert.rejects(inTx(19, "cy"), stale(resource, 19, 21));
    assert.deepEqual(await state(t), { qty: 1, buyers: ["ada", "bob"] });
    await fencedSqlTransaction(query, 22, resource, async (q) => {
      await q(`UPDATE ${t.stock} SET qty = 0`, []);
    }, { isolation: "serializable" });
    assert.deepEqual(await state(t), { qty: 0, buyers: ["ada", "bob"] });
  });

  test("a real handover: A's lease is force-unlocked, B writes through the helper, A's late writes are refused", async () => {
    const t = await sale(5);
    const name = fresh("sale");
    const a = await acquire(client, name);
    await forceUnlock(client, name); // stands in for an expiry while A was paused
    await withLock(client, name, async (_signal, b) => {
      assert.ok(b.fence > a.fence);
      assert.equal(await buy(t, b, "bob", name), true);
      await fencedSqlUpdate(query, b, { table: t.stock, set: "qty = qty + 10", where: "sku = 'tee'" });
    });
    // A wakes up with the fence it was granted (carried by its in-flight work, as a queue message would carry it).
    await assert.rejects(buy(t, a.fence, "ada", name), isStaleFenceError);
    await assert.rejects(
      fencedSqlUpdate(query, a.fence, { table: t.stock, set: "qty = 0", where: "sku = 'tee'" }),
      isStaleFenceError,
    );
    assert.deepEqual(await state(t), { qty: 14, buyers: ["bob"] });
    await release(a).catch(() => {}); // lost: its release may reject
  });

  test("the flash sale in miniature: stock never below 0, one order per buyer, a stale buyer refused", async () => {
    const t = await sale(3);
    const name = fresh("sale");
    const stalled = await acquire(client, name);
    const stalledFence = stalled.fence;
    await release(stalled);
    const buyers = ["u1", "u2", "u1", "u3", "u4", "u2", "u5", "u6"];
    const results = await Promise.all(
      buyers.map((buyer) => withLock(client, name, (_signal, lease) => buy(t, lease, buyer, name))),
    );
    assert.deepEqual(results.filter(Boolean).length, 3);
    await assert.rejects(buy(t, stalledFence, "u7", name), isStaleFenceError);
    const { qty, buyers: ordered } = await state(t);
    assert.equal(qty, 0);
    assert.equal(ordered.length, 3);
    assert.equal(new Set(ordered).size, 3);
  });

  test("what one connection cannot show, against a scripted query function: a writer that waited, a failed COMMIT", async () => {
    // fencedSqlUpdate: nothing written, and the snapshot's highest fence (5) is not above 10: a writer that committed
    // while this one waited for the row lock. The statement is sent once more, with a new snapshot, and tells.
    const sent: string[] = [];
    const scripted = (...replies: (string | null)[]) => (text: string) => {
      sent.push(text);
      return Promise.resolve({ rows: [{ redleasewritten: null, redleasehighest: replies.shift() ?? null }] });
    };
    const update = { table: "items", set: "qty = 0", where: "id = 1" };
    await assert.rejects(fencedSqlUpdate(scripted("5", "20"), 10, update), stale("items", 10, 20));
    assert.equal(sent.length, 2);
    assert.equal(sent[0], sent[1]);
    sent.length = 0;
    assert.deepEqual(await fencedSqlUpdate(scripted("5", "5", "30"), 10, update), { count: 0, rows: [] }, "only once");
    assert.equal(sent.length, 2);
    sent.length = 0;
    assert.deepEqual(await fencedSqlUpdate(scripted(null), 10, update), { count: 0, rows: [] }, "no row: no retry");
    assert.equal(sent.length, 1);
    // fencedSqlTransaction: a COMMIT that the server answers with ROLLBACK (the transaction had failed) rejects.
    const commands: string[] = [];
    const rolledBack = (text: string) => {
      commands.push(text.split(" ")[0]);
      return Promise.resolve(text === "COMMIT" ? { rows: [], command: "ROLLBACK" } : { rows: [{ fence: "10" }] });
    };
    await assert.rejects(fencedSqlTransaction(rolledBack, 10, "r", () => Promise.resolve(1)), /rolled back at COMMIT/);
    assert.deepEqual(commands, ["BEGIN", "INSERT", "COMMIT"]);
  });

  test("bad input is rejected before any statement is sent", async () => {
    const calls: string[] = [];
    const recording: SqlQuery = (text) => {
      calls.push(text);
      return Promise.resolve({ rows: [] });
    };
    const update = { table: "items", set: "qty = 1", where: "id = $1", params: [1] };
    const work = () => Promise.resolve();
    const released = await acquire(client, fresh("lock"));
    await release(released);
    const reason = (e: unknown) => e === released.signal.reason;
    // No query function.
    await assert.rejects(anyArgs(fencedSqlUpdate, undefined, 5, update), TypeError);
    await assert.rejects(anyArgs(fencedSqlTransaction, null, 5, "r", work), TypeError);
    // A released lease: its signal's reason.
    await assert.rejects(fencedSqlUpdate(recording, released, update), reason);
    await assert.rejects(fencedSqlTransaction(recording, released, "r", work), reason);
    // Fences that are not positive safe integers.
    await assert.rejects(fencedSqlUpdate(recording, 1.5, update), RangeError);
    await assert.rejects(fencedSqlTransaction(recording, { fence: 0 }, "r", work), RangeError);
    await assert.rejects(anyArgs(fencedSqlTransaction, recording, "12", "r", work), TypeError);
    await assert.rejects(fencedSqlTransaction(recording, 2 ** 53, "r", work), RangeError);
    // An empty resource, work that is not a function, and options that do not fit.
    await assert.rejects(fencedSqlTransaction(recording, 5, "", work), RangeError);
    await assert.rejects(anyArgs(fencedSqlTransaction, recording, 5, 7, work), TypeError);
    await assert.rejects(anyArgs(fencedSqlTransaction, recording, 5, "r", "work"), TypeError);
    await assert.rejects(fencedSqlTransaction(recording, 5, "r", work, { table: "x; DROP TABLE y" }), RangeError);
    await assert.rejects(
      fencedSqlTransaction(recording, 5, "r", work, { begin: false, isolation: "serializable" }),
      TypeError,
    );
    await assert.rejects(anyArgs(fencedSqlTransaction, recording, 5, "r", work, { isolation: "snapshot" }), RangeError);
    await assert.rejects(fencedSqlTransaction(recording, 5, "r", work, { name: "r" }), TypeError);
    // An update without a table, a set or a where, with a placeholder beyond its params, or a bad fence column.
    await assert.rejects(fencedSqlUpdate(recording, 5, { ...update, table: "items where 1=1" }), RangeError);
    await assert.rejects(fencedSqlUpdate(recording, 5, { ...update, where: "" }), RangeError);
    await assert.rejects(anyArgs(fencedSqlUpdate, recording, 5, { table: "items", set: "qty = 1" }), TypeError);
    await assert.rejects(fencedSqlUpdate(recording, 5, { ...update, where: "id = $2" }), /only \$1 to \$1/);
    await assert.rejects(fencedSqlUpdate(recording, 5, { ...update, params: [] }), RangeError);
    await assert.rejects(fencedSqlUpdate(recording, 5, update, { fenceColumn: "fence = 0, x" }), RangeError);
    await assert.rejects(anyArgs(fencedSqlUpdate, recording, 5, { ...update, params: "1" }), TypeError);
    assert.deepEqual(calls, []);
  });

  // What other clients return, on PGlite: booleans as text (pg with its type parsers off), rows as an array carrying
  // `command` (postgres.js), columns renamed (postgres.js with `transform: postgres.camel`).
  const asText: SqlQuery = (t, p) => db.query(t, p, { parsers: { 16: (v: string) => v } });
  const asArray: SqlQuery = async (t, p) => {
    const r = await query(t, p);
    return Object.assign([...r.rows], { command: r.command });
  };
  const camel = (k: string) => k.replace(/_(.)/g, (_m, c: string) => c.toUpperCase());
  const asCamel: SqlQuery = async (t, p) => {
    const r = await query(t, p);
    const rows = r.rows.map((row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [camel(k), v])));
    return Object.assign(rows, { command: r.command });
  };

  test("fencedSqlUpdate() through clients that parse booleans as text or rename columns: one write, told right", async () => {
    for (const [how, q] of [["booleans as text", asText], ["camelCased columns", asCamel]] as const) {
      const table = fresh("stock");
      await query(
        `CREATE TABLE ${table} (sku text PRIMARY KEY, qty int NOT NULL, fence bigint NOT NULL DEFAULT 0)`,
        [],
      );
      await query(`INSERT INTO ${table} VALUES ('tee', 10, 0)`, []);
      const update = { table, set: "qty = qty - 1", where: "sku = $1", params: ["tee"] };
      assert.equal((await fencedSqlUpdate(q, 100, update)).count, 1, how);
      assert.equal((await query(`SELECT qty FROM ${table}`, [])).rows[0].qty, 9, `${how}: written once`);
      await assert.rejects(fencedSqlUpdate(q, 99, update), StaleFenceError, how);
      assert.equal((await query(`SELECT qty FROM ${table}`, [])).rows[0].qty, 9, `${how}: the stale write refused`);
    }
  });

  test("fencedSqlTransaction() through a client returning row arrays: a failed statement fails the whole, awaited or not", async () => {
    for (const awaited of [true, false]) {
      const table = fresh("orders");
      await query(`CREATE TABLE ${table} (buyer text PRIMARY KEY)`, []);
      await assert.rejects(
        fencedSqlTransaction(asArray, 5, fresh("sale"), async (q) => {
          await q(`INSERT INTO ${table} VALUES ('ada')`, []);
          // The same buyer again: a statement that fails, its error caught by the caller (sent by the query function
          // itself), or one that work does not await.
          if (awaited) await asArray(`INSERT INTO ${table} VALUES ('ada')`, []).then(undefined, () => {});
          else void q(`INSERT INTO ${table} VALUES ('ada')`, []).then(undefined, () => {});
          return "ok";
        }),
        Error,
        awaited ? "COMMIT answered ROLLBACK" : "a q() not awaited failed",
      );
      assert.equal((await query(`SELECT count(*)::int AS n FROM ${table}`, [])).rows[0].n, 0, "nothing committed");
    }
  });
});
