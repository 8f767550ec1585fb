// Fenced writes to PostgreSQL, through the caller's own parameterised query function: no SQL client is a dependency.
import { checkKey, type FenceSource, resolveFence } from "./_fence.ts";
import { checkKeys, fail } from "./_validate.ts";
import { StaleFenceError } from "./errors.ts";

/**
 * What a query function resolves to: an object with the result rows (`pg`, PGlite), or the rows themselves
 * (postgres.js). `command` is the statement's command tag where the client gives one. The fenced SQL helpers read
 * the rows of their own statements only (each has a `RETURNING`), so no row count is needed from any client.
 */
export type SqlRows =
  | { readonly rows: readonly unknown[]; readonly command?: string }
  | readonly unknown[];

/**
 * A parameterised query function, as one line adapts it from any PostgreSQL client: it sends `text` with its `$1`,
 * `$2`, … placeholders bound to `params`, and resolves to the rows. For {@linkcode fencedSqlTransaction} it must
 * send every statement on one connection.
 *
 * @example From `pg`, postgres.js and PGlite
 * ```ts
 * const fromPg: SqlQuery = (text, params) => pool.query(text, params); // pg.Pool (a single statement only)
 * const fromPostgresJs: SqlQuery = (text, params) => sql.unsafe(text, params as never[]);
 * const fromPglite: SqlQuery = (text, params) => db.query(text, params);
 * ```
 *
 * @example For a transaction: one connection of its own
 * ```ts
 * const conn = await pool.connect(); // pg: a client of the pool, released after
 * await fencedSqlTransaction((text, params) => conn.query(text, params), lease, "sale", work).finally(() => conn.release());
 * // postgres.js: a reserved connection, which accepts the helper's BEGIN (sql.unsafe on the pool rejects it with
 * // UNSAFE_TRANSACTION unless `max: 1`); or sql.begin() with `{ begin: false }`.
 * const reserved = await sql.reserve();
 * await fencedSqlTransaction((text, params) => reserved.unsafe(text, params as never[]), lease, "sale", work)
 *   .finally(() => reserved.release());
 * ```
 */
export type SqlQuery = (text: string, params: unknown[]) => PromiseLike<SqlRows>;

/**
 * The table of the per-resource fence rows that {@linkcode fencedSqlTransaction} checks and records, as PostgreSQL
 * DDL: run it once, in a migration, before the first fenced transaction. One row per resource ever written (a few
 * dozen bytes); delete the rows of resources that are gone for good, once no writer of theirs can still be paused.
 *
 * @example
 * ```ts
 * await db.query(FENCE_TABLE_SQL);
 * ```
 */
export const FENCE_TABLE_SQL =
  "CREATE TABLE IF NOT EXISTS redlease_fences (resource text PRIMARY KEY, fence bigint NOT NULL)";

/** A table or column name, optionally schema-qualified: bare identifiers or "quoted" ones (no `"` inside). */
const IDENTIFIER = /^(?:[A-Za-z_][A-Za-z0-9_$]*|"[^"\0]+")(?:\.(?:[A-Za-z_][A-Za-z0-9_$]*|"[^"\0]+"))?$/;

function checkQuery(op: string, query: unknown): asserts query is SqlQuery {
  if (typeof query !== "function") {
    fail(op, "query", "must be a function (text, params) => Promise<rows>, as (t, p) => pool.query(t, p)", query);
  }
}

function checkIdentifier(op: string, what: string, v: unknown): asserts v is string {
  if (typeof v !== "string") fail(op, what, "must be a string", v);
  if (!IDENTIFIER.test(v)) fail(op, what, 'must be a table or column name (schema.name, or "quoted")', v, RangeError);
}

function rowsOf(result: SqlRows): readonly Record<string, unknown>[] {
  const rows = Array.isArray(result) ? result : (result as { rows?: unknown })?.rows;
  if (!Array.isArray(rows)) throw new TypeError("The query function resolved to neither rows nor { rows }");
  return rows as Record<string, unknown>[];
}

/** The statement that {@linkcode fencedSqlUpdate} runs. */
export interface FencedSqlUpdate {
  /**
   * The table to update (a name, optionally schema-qualified; `"quoted"` names are kept as written).
   * @example
   * ```ts
   * await fencedSqlUpdate(query, lease, { table: "shop.stock", set: "qty = qty - 1", where: "sku = $1", params: [sku] });
   * ```
   */
  readonly table: string;
  /**
   * The `SET` list, without the fence column (the helper adds it): SQL with `$1`, `$2`, … bound to `params`.
   * @example
   * ```ts
   * await fencedSqlUpdate(query, lease, { table: "invoices", set: "status = $1", where: "id = $2", params: ["paid", 7] });
   * ```
   */
  readonly set: string;
  /**
   * Which rows to update, without the fence check (the helper adds it): an SQL condition with `$1`, `$2`, … bound
   * to `params`. Required, so that no table is updated whole by mistake (`"true"` says you mean it).
   * @example Take one item, never below zero
   * ```ts
   * await fencedSqlUpdate(query, lease, { table: "stock", set: "qty = qty - 1", where: "sku = $1 AND qty > 0", params: [sku] });
   * ```
   */
  readonly where: string;
  /**
   * The values of `$1`, `$2`, … in `set` and `where`. The fence is bound after them: a placeholder beyond
   * `params.length` is a `RangeError`.
   * @default {[]}
   * @example
   * ```ts
   * await fencedSqlUpdate(query, lease, { table: "stock", set: "qty = qty - $1", where: "sku = $2", params: [2, sku] });
   * ```
   */
  readonly params?: readonly unknown[];
  /**
   * What to return of each updated row: a `RETURNING` list (`"*"`, `"qty"`), in `rows` of the result.
   * @default {undefined (rows carry nothing of the table)}
   * @example
   * ```ts
   * const { rows } = await fencedSqlUpdate(query, lease, { table: "stock", set: "qty = qty - 1", where: "sku = $1", params: [sku], returning: "qty" });
   * ```
   */
  readonly returning?: string;
}

/** Options of {@linkcode fencedSqlUpdate}. */
export interface FencedSqlUpdateOptions {
  /**
   * Which of the lease's names guards the rows, for a lease over several names (required then); as in every
   * fenced write. Not with a fence given as a number or `{ fence }`.
   * @default {the lease's only name}
   * @example
   * ```ts
   * await fencedSqlUpdate(query, lease, { table: "accounts", set: "balance = balance - 100", where: "id = 1" }, { name: "account:1" });
   * ```
   */
  readonly name?: string;
  /**
   * The row's fence column: `bigint NOT NULL DEFAULT 0` (`ALTER TABLE t ADD COLUMN fence bigint NOT NULL DEFAULT 0`).
   * @default {"fence"}
   * @example
   * ```ts
   * await fencedSqlUpdate(query, lease, update, { fenceColumn: "writer_fence" });
   * ```
   */
  readonly fenceColumn?: string;
}

/** What {@linkcode fencedSqlUpdate} resolves to. */
export interface FencedSqlResult {
  /** How many rows were updated: 0 when no row matched `where` (none exists, or your condition was false). */
  readonly count: number;
  /** Per updated row, its `returning` columns (empty objects without `returning`). */
  readonly rows: readonly Record<string, unknown>[];
}

/**
 * `UPDATE table SET set, fence = $F WHERE (where) AND fence <= $F` in one PostgreSQL statement: the rows are
 * updated only if no higher fence wrote them before, and record the fence. The helper writes the fence check and the
 * fence's record itself, from your `set` and `where`, so neither can be left out; values go in `params`, never in
 * the text. The row lock the `UPDATE` takes serialises concurrent writers (under READ COMMITTED a writer that waited
 * re-checks the fence of the row it then finds; in a REPEATABLE READ or SERIALIZABLE transaction it fails instead
 * with SQLSTATE 40001 if the holder committed, to be retried).
 *
 * Three outcomes: rows updated (`count` ≥ 1); refused, `StaleFenceError`, when nothing was written because the rows
 * matching `where` carry a higher fence; `count: 0` when no row matches `where` at all (none exists, or your condition in
 * it is false, such as `qty > 0` on a sold-out row). The same statement reads the highest fence among the rows of
 * `where`, so telling them apart costs no second statement, except once after a concurrent writer changed the rows
 * while this one waited (the statement is then sent again: it wrote nothing the first time). A row to be created is
 * inserted with fence 0 first, or in a {@linkcode fencedSqlTransaction}.
 *
 * Each row carries its own fence: when `where` matches several rows, those that a higher fence wrote are left as
 * they are and the others are written (`count` says how many); the call rejects only when none was written. Write
 * several rows all or none with {@linkcode fencedSqlTransaction}. A table's fence column and the fence rows of
 * `fencedSqlTransaction` are separate marks: write each table only under one of them.
 *
 * @param query Your query function (see {@linkcode SqlQuery}).
 * @param lease The lease whose fence guards the rows, or a fence carried elsewhere (`{ fence }` or the number).
 * @param update The table, `set`, `where`, `params` and `returning`.
 * @param options `name` and `fenceColumn`.
 * @returns The number of rows updated and their `returning` columns.
 * @throws {StaleFenceError} when no row was written because a higher fence wrote the rows of `where` before.
 * @throws {TypeError | RangeError} for invalid arguments, before any statement.
 *
 * @example Sell one item: refused once the lease has passed to another buyer, `count: 0` when sold out
 * ```ts
 * import { withLock } from "redlease";
 * import { fencedSqlUpdate } from "redlease/fence";
 *
 * const { count } = await withLock(client, "sale", (_signal, lease) =>
 *   fencedSqlUpdate((text, params) => pool.query(text, params), lease, {
 *     table: "stock",
 *     set: "qty = qty - 1",
 *     where: "sku = $1 AND qty > 0",
 *     params: ["tee"],
 *   }));
 * console.log(count === 1 ? "sold" : "sold out");
 * ```
 */
export async function fencedSqlUpdate(
  query: SqlQuery,
  lease: FenceSource,
  update: FencedSqlUpdate,
  options?: FencedSqlUpdateOptions,
): Promise<FencedSqlResult> {
  const op = "make a fenced SQL write";
  checkQuery(op, query);
  checkOptions(op, options, ["name", "fenceColumn"]);
  const { fence, lockName, leaseSignal } = resolveFence(op, lease, options?.name);
  if (typeof update !== "object" || update === null) fail(op, "update", "must be an object", update);
  const { table, set, where, returning } = update;
  const params = update.params ?? [];
  const column = options?.fenceColumn ?? "fence";
  checkIdentifier(op, "table", table);
  checkKey(op, "set", set);
  checkKey(op, "where", where);
  if (returning !== undefined) checkKey(op, "returning", returning);
  if (!Array.isArray(params)) fail(op, "params", "must be an array", params);
  checkIdentifier(op, "fenceColumn", column);
  checkPlaceholders(op, "set", set, params.length);
  checkPlaceholders(op, "where", where, params.length);
  leaseSignal?.throwIfAborted();
  const fenceParam = `$${params.length + 1}`;
  const text =
    `WITH redlease_w AS (UPDATE ${table} SET ${set}, ${column} = ${fenceParam} WHERE (${where}) AND ${column} <= ` +
    `${fenceParam} RETURNING true AS redleasewritten${returning === undefined ? "" : `, ${returning}`}) ` +
    `SELECT redlease_w.*, redlease_h.redleasehighest FROM (SELECT max(${column})::text AS redleasehighest ` +
    `FROM ${table} WHERE (${where})) AS redlease_h LEFT JOIN redlease_w ON true`;
  const values = [...params, String(fence)];
  for (let attempt = 0;; attempt++) {
    const rows = rowsOf(await query(text, values));
    // (Column names without '_' or capitals, so that a client that renames columns, such as postgres.js with
    // `transform: postgres.camel`, keeps them; and "written" is whatever is not NULL, however a client parses a boolean.)
    const highest = rows.length > 0 && rows[0].redleasehighest != null ? Number(rows[0].redleasehighest) : 0;
    const written = rows.filter((row) => row.redleasewritten != null);
    if (written.length > 0) {
      return {
        count: written.length,
        rows: written.map(({ redleasewritten: _w, redleasehighest: _h, ...row }) => row),
      };
    }
    if (highest > fence) throw new StaleFenceError(lockName, table, fence, highest);
    // Nothing written, yet no higher fence in the statement's snapshot: either nothing matched, or (READ COMMITTED)
    // a writer committed a change to the rows while this one waited for their lock, after the snapshot. Once more,
    // with a new snapshot, tells them apart; the first attempt wrote nothing, so this one writes at most once.
    if (attempt === 1 || rows.length === 0 || rows[0].redleasehighest == null) return { count: 0, rows: [] };
  }
}

/** An options object (or undefined) with none but the `keys` given. */
function checkOptions(op: string, options: unknown, keys: readonly string[]): void {
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    fail(op, "options", "must be an object", options);
  }
  checkKeys(op, options as object | undefined, keys);
}

/** `text` (the `set` or `where` of an update) may use only the placeholders of `params`: the fence is bound after. */
function checkPlaceholders(op: string, what: string, text: string, params: number): void {
  for (const [, n] of text.matchAll(/\$(\d+)/g)) {
    if (Number(n) > params) {
      fail(
        op,
        what,
        `must use only $1 to $${params} (the values in params; the fence is bound after)`,
        text,
        RangeError,
      );
    }
  }
}

/** Options of {@linkcode fencedSqlTransaction}. */
export interface FencedSqlTransactionOptions {
  /**
   * Which of the lease's names guards the resource, for a lease over several names (required then); as in every
   * fenced write. Not with a fence given as a number or `{ fence }`.
   * @default {the lease's only name}
   * @example
   * ```ts
   * await fencedSqlTransaction(query, lease, "account:1", work, { name: "account:1" });
   * ```
   */
  readonly name?: string;
  /**
   * The table of the fence rows (see {@linkcode FENCE_TABLE_SQL}), optionally schema-qualified.
   * @default {"redlease_fences"}
   * @example
   * ```ts
   * await fencedSqlTransaction(query, lease, "sale", work, { table: "locks.fences" });
   * ```
   */
  readonly table?: string;
  /**
   * Whether the helper opens and ends the transaction (`BEGIN`, then `COMMIT`, or `ROLLBACK` on any error). `false`
   * when `query` already runs inside one that you end, such as postgres.js's `sql.begin()` or PGlite's
   * `db.transaction()`: the helper then sends only the fence check and your statements, and a refusal or an error
   * rejects, for your transaction to roll back as it propagates.
   * @default {true}
   * @example Inside postgres.js's transaction
   * ```ts
   * await sql.begin((tx) => fencedSqlTransaction((t, p) => tx.unsafe(t, p as never[]), lease, "sale", work, { begin: false }));
   * ```
   */
  readonly begin?: boolean;
  /**
   * The isolation level of the transaction the helper begins (not with `begin: false`). At every level the fence
   * check row-locks the resource's fence row until the transaction ends, so the transactions of one resource that
   * pass the check commit one after another, in fence order; a lower fence is refused (`StaleFenceError`, nothing
   * written) once a higher one has committed, even if its transaction had begun before (its snapshot is taken by the
   * check, its first statement).
   *
   * - READ COMMITTED: a transaction that waited for the fence row re-checks it once the holder ends: it is refused if
   *   the holder committed a higher fence, and goes on otherwise. No serialization error comes from the fence row.
   * - REPEATABLE READ and SERIALIZABLE: a transaction that waited for the fence row while the holder committed fails
   *   instead, whatever its fence, with the client's error for SQLSTATE 40001 (`err.code === "40001"` with `pg` and
   *   postgres.js); the helper has rolled it back, nothing is written. Retry the whole call on a 40001, whichever
   *   statement it came from: a stale fence is then refused, a newer one goes through.
   * @default {the server's default (READ COMMITTED unless configured)}
   * @example
   * ```ts
   * await fencedSqlTransaction(query, lease, "sale", work, { isolation: "serializable" });
   * ```
   * @example Retry on a serialization failure
   * ```ts
   * for (;;) {
   *   try {
   *     return await fencedSqlTransaction(query, fence, "sale", work, { isolation: "serializable" });
   *   } catch (err) {
   *     if ((err as { code?: string }).code !== "40001") throw err; // StaleFenceError included: refused, stop
   *   }
   * }
   * ```
   */
  readonly isolation?: "read committed" | "repeatable read" | "serializable";
}

const ISOLATIONS = ["read committed", "repeatable read", "serializable"];

/**
 * Run several statements as one fenced PostgreSQL transaction, all or none: `BEGIN`, then one statement that both
 * checks the fence against the highest recorded for `resource` in the fence table and records it, row-locking the
 * resource's fence row until the end; then `work(q)`, your statements; then `COMMIT`. A higher fence recorded
 * before refuses the whole transaction (`ROLLBACK`, then `StaleFenceError`) before `work` runs; an error in `work`
 * (or in any of its statements, even one it caught: PostgreSQL has then aborted the transaction) rolls back and
 * rejects with it. A newer holder's transaction waits on the fence row until this one ends, so the two commit in
 * fence order and the older one cannot commit after the newer one (under REPEATABLE READ and SERIALIZABLE the one
 * that waited fails with SQLSTATE 40001 instead, to be retried: see `isolation`).
 *
 * `query` must send every statement on one connection, which no one else uses meanwhile: a client from
 * `pool.connect()` for `pg`, `sql.reserve()` or `sql.begin()` (with `begin: false`) for postgres.js, the database
 * itself for PGlite (one connection; from concurrent callers in one process, pass `db.transaction()`'s `tx` with
 * `begin: false` so that their statements do not interleave). The fence table is created by
 * {@linkcode FENCE_TABLE_SQL}.
 *
 * The fence row of `resource` and a fence column of {@linkcode fencedSqlUpdate} are separate marks, and neither
 * checks the other: write each table only under one of them (every write of `stock` through this helper, say).
 *
 * @param query Your query function, bound to one connection (see {@linkcode SqlQuery}).
 * @param lease The lease whose fence guards the resource, or a fence carried elsewhere (`{ fence }` or the number).
 * @param resource The name of what the transaction writes, the key of its fence row (such as the lease's name).
 * @param work Your statements, sent with `q`: your `query` (resolving to what it resolves to), refused once the
 *   transaction has ended.
 * @param options `name`, `table`, `begin` and `isolation`.
 * @returns What `work` resolves to, once committed.
 * @throws {StaleFenceError} when a higher fence was recorded for `resource` before; nothing was written.
 * @throws {TypeError | RangeError} for invalid arguments, before any statement.
 *
 * @example The flash sale: take one item and record the order, both or neither
 * ```ts
 * import { withLock } from "redlease";
 * import { fencedSqlTransaction } from "redlease/fence";
 *
 * const conn = await pool.connect();
 * try {
 *   await withLock(client, "sale", (_signal, lease) =>
 *     fencedSqlTransaction((text, params) => conn.query(text, params), lease, "sale", async (q) => {
 *       await q("UPDATE stock SET qty = qty - 1 WHERE sku = $1 AND qty > 0", ["tee"]);
 *       await q("INSERT INTO orders (buyer, sku) VALUES ($1, $2)", ["ada", "tee"]);
 *     }));
 * } finally {
 *   conn.release();
 * }
 * ```
 */
export async function fencedSqlTransaction<Q extends SqlQuery, T>(
  query: Q,
  lease: FenceSource,
  resource: string,
  work: (q: (text: string, params: unknown[]) => Promise<Awaited<ReturnType<Q>>>) => Promise<T>,
  options?: FencedSqlTransactionOptions,
): Promise<T> {
  const op = "run a fenced SQL transaction";
  checkQuery(op, query);
  checkOptions(op, options, ["name", "table", "begin", "isolation"]);
  const { fence, lockName, leaseSignal } = resolveFence(op, lease, options?.name);
  checkKey(op, "resource", resource);
  if (typeof work !== "function") fail(op, "work", "must be a function (q) => Promise", work);
  const { table, begin, isolation } = checkTransactionOptions(op, options);
  leaseSignal?.throwIfAborted();

  let ended = false;
  let failed: { error: unknown } | undefined;
  const q = (text: string, params: unknown[]) => {
    if (ended) return Promise.reject(new TypeError(`Cannot ${op} as the transaction has ended: q was used after it`));
    return Promise.resolve(query(text, params) as Awaited<ReturnType<Q>>).catch((error: unknown) => {
      failed ??= { error };
      throw error;
    });
  };
  if (begin) await query(isolation ? `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}` : "BEGIN", []);
  try {
    await claimFence(query, table, resource, fence, lockName);
    const result = await work(q);
    if (failed) throw failed.error;
    ended = true;
    if (begin) {
      // (A client may return the rows as an array that carries `command`, as postgres.js does.)
      const done = await query("COMMIT", []);
      if ((done as { command?: string } | undefined)?.command === "ROLLBACK") {
        throw new Error("The fenced SQL transaction was rolled back at COMMIT: one of its statements had failed");
      }
    }
    // A statement of `work` that it did not await, and that failed meanwhile, failed the transaction too.
    const late = failed as { error: unknown } | undefined; // (set by a q() that settled meanwhile)
    if (late) throw late.error;
    return result;
  } catch (e) {
    const rollBack = begin && !ended;
    ended = true;
    // (A failed ROLLBACK is ignored: the error that led here says more.)
    if (rollBack) await Promise.resolve(query("ROLLBACK", [])).then(undefined, () => {});
    throw e;
  }
}

/** The `table`, `begin` and `isolation` options of fencedSqlTransaction, checked, with their defaults. */
function checkTransactionOptions(
  op: string,
  options: FencedSqlTransactionOptions | undefined,
): { table: string; begin: boolean; isolation: FencedSqlTransactionOptions["isolation"] } {
  const table = options?.table ?? "redlease_fences";
  checkIdentifier(op, "table", table);
  const begin = options?.begin ?? true;
  if (typeof begin !== "boolean") fail(op, "begin", "must be a boolean", begin);
  const isolation = options?.isolation;
  if (isolation !== undefined) {
    if (!ISOLATIONS.includes(isolation)) {
      fail(op, "isolation", `must be one of ${ISOLATIONS.map((i) => `"${i}"`).join(", ")}`, isolation, RangeError);
    }
    if (!begin) fail(op, "isolation", "must be omitted with 'begin: false' (the transaction is yours)", isolation);
  }
  return { table, begin, isolation };
}

/**
 * Record `fence` in the fence row of `resource`, which stays locked until the transaction ends; a StaleFenceError
 * when a higher one is recorded there.
 */
async function claimFence(
  query: SqlQuery,
  table: string,
  resource: string,
  fence: number,
  lockName: string,
): Promise<void> {
  const taken = rowsOf(
    await query(
      `INSERT INTO ${table} (resource, fence) VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE ` +
        `SET fence = EXCLUDED.fence WHERE ${table}.fence <= EXCLUDED.fence RETURNING fence`,
      [resource, String(fence)],
    ),
  );
  if (taken.length === 0) {
    // Refused, the row locked: the fence that refused it, read in the same transaction.
    const [row] = rowsOf(await query(`SELECT fence::text AS fence FROM ${table} WHERE resource = $1`, [resource]));
    throw new StaleFenceError(lockName, resource, fence, Number(row?.fence ?? 0));
  }
}
