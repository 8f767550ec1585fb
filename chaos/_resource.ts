// Chaos at the resource (issue 28): inside each critical section a worker also sells one item of a flash sale
// through the fence helpers (`redlease/fence`), to a Redis resource or to a PostgreSQL one, and the checker counts
// the stale writes the resource accepted.
//
// - redis: `fencedEval` on the scenario's resource redis-server (never the lock server): one script that takes one
//   item from a stock counter (never below 0), sets the last writer, and appends "<fence> <writer> <server µs>" to
//   a log list. The log entry is written by the same script as the sale, so a sale the resource made is in the log,
//   in the order the server ran them, whatever the helper did: the helper only decides whether the body runs.
// - pg: `fencedSqlTransaction` (through a `pg` client) on a throwaway PostgreSQL server: `UPDATE stock … qty > 0`
//   then `INSERT INTO orders (fence, writer)`. The order row is the log: it commits with the sale or not at all,
//   and its id comes from a sequence read while the transaction holds the stock row's lock (taken by the UPDATE,
//   held until COMMIT), so ids are in commit order.
//
// Stale accepted = a log entry whose fence is lower than that of an entry before it (a write the resource took
// after it had taken one from a newer holder). Decided from the resource's own log, never from what the workers
// or the helpers reported. With `check: false` (the `-unchecked` scenarios, the checker's self-check) the same body
// runs as a plain EVAL / a plain BEGIN … COMMIT, and the same count must see the stale writes the faults cause.
// `check: "both"` writes each target twice per section, checked and unchecked, on separate keys / tables.
//
// The workers pass `lease.fence` (a number) to the helpers, not the lease: a Lease whose signal has aborted is
// refused before any command, and the question here is what the resource refuses. Whether the signal had aborted
// at the write is recorded too (Section.abortedAtWrite).
import type { RedisLike } from "../src/_client.ts";
import { FENCE_TABLE_SQL, fencedEval, fencedSqlTransaction, isStaleFenceError, type SqlQuery } from "../src/fence.ts";
import { isLost } from "./_analyze.ts";
import type { Section, WorkerResult } from "./_protocol.ts";

export type ResourceTarget = "redis" | "pg";

/** What a scenario writes at the resource (ScenarioSpec.resource). */
export interface ResourceSpec {
  /** Where each section sells, in this order (one report per sink: target × check). */
  targets: ResourceTarget[];
  /**
   * Through the fence helpers (true) or plain writes (false: the checker's self-check, stale writes expected), or
   * both, each on its own keys / tables ("both": the checked write first).
   */
  check: boolean | "both";
  /**
   * The scenario's lock delay (acquireOptions.lockDelayMs) outlasts each fault: nobody is granted the lease before
   * the paused holder's late write, so even unchecked writes must show 0 stale accepted, and the late writes must
   * have been made (accepted) after their lease ended.
   */
  lockDelayCovers?: boolean;
}

/** One place a section writes: a target, checked or not. Its id keys Section.sales: "redis", "pg-unchecked", … */
export interface Sink {
  target: ResourceTarget;
  check: boolean;
  id: SinkId;
}
export type SinkId = ResourceTarget | `${ResourceTarget}-unchecked`;

/** The sinks of a spec, in the order a section writes them. */
export function sinksOf(spec: ResourceSpec): Sink[] {
  const checks = spec.check === "both" ? [true, false] : [spec.check];
  return spec.targets.flatMap((target) =>
    checks.map((check) => ({ target, check, id: check ? target : `${target}-unchecked` as SinkId }))
  );
}

/** What a worker needs to write there (WorkerConfig.resource). */
export interface ResourceConfig extends ResourceSpec {
  /** Key prefix on the resource redis-server (redis). */
  prefix: string;
  /** The throwaway PostgreSQL server (pg). */
  pgUrl?: string;
}

/** The stock at the start: large enough never to sell out in a run (the floor is checked all the same). */
export const STOCK = 1_000_000;

/** The sale's keys on the resource redis-server: one hash tag, as fencedEval on a cluster would need. */
export function saleKeys(prefix: string, check: boolean) {
  const tag = `{${prefix}:${check ? "sale" : "plain-sale"}}`;
  return { stock: `${tag}:stock`, last: `${tag}:last`, log: `${tag}:log` };
}

/** The sale's tables in PostgreSQL: `stock` and `orders`, or `plain_stock` and `plain_orders` for unchecked writes. */
const tables = (
  check: boolean,
) => (check ? { stock: "stock", orders: "orders" } : { stock: "plain_stock", orders: "plain_orders" });

/**
 * The sale, as one Lua body (run by fencedEval, or by plain EVAL when unchecked). KEYS: stock, last writer, log.
 * ARGV: fence, writer tag. Returns the log's length after the write, or -1 when sold out (nothing written).
 */
export const SALE_LUA = `local t = redis.call('TIME')
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n < 1 then return -1 end
redis.call('DECRBY', KEYS[1], 1)
redis.call('SET', KEYS[2], ARGV[1] .. ' ' .. ARGV[2])
return redis.call('RPUSH', KEYS[3], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. t[1] .. string.format('%06d', tonumber(t[2])))`;

/** The PostgreSQL schema of the sale: both sets of tables, and the fence rows' table of fencedSqlTransaction. */
export const PG_SCHEMA = [true, false].map((check) => {
  const t = tables(check);
  return `CREATE TABLE ${t.stock} (sku text PRIMARY KEY, qty bigint NOT NULL CHECK (qty >= 0));
CREATE TABLE ${t.orders} (id bigserial PRIMARY KEY, fence bigint NOT NULL, writer text NOT NULL,
  at timestamptz NOT NULL DEFAULT clock_timestamp());
INSERT INTO ${t.stock} VALUES ('tee', ${STOCK});`;
}).join("\n") + `\n${FENCE_TABLE_SQL};`;

/** The outcome of one sale, as the worker saw it. */
export type SaleOutcome = "accepted" | "refused" | "sold out";

export interface ResourceWriter {
  /** Sell one item with this fence; "refused": StaleFenceError (only with the check on). Other errors throw. */
  sell(fence: number, tag: string): Promise<SaleOutcome>;
  close(): Promise<unknown>;
}

type EvalClient = RedisLike & {
  eval(script: string, opts: { keys: string[]; arguments: string[] }): Promise<unknown>;
};

/** A worker's writer for each sink, in order: `res` is its client of the resource redis-server. */
export async function connectWriters(cfg: ResourceConfig, res: EvalClient): Promise<Array<[SinkId, ResourceWriter]>> {
  const writers: Array<[SinkId, ResourceWriter]> = [];
  for (const sink of sinksOf(cfg)) writers.push([sink.id, await connectWriter(sink, cfg, res)]);
  return writers;
}

async function connectWriter(
  { target, check }: Sink,
  cfg: ResourceConfig,
  res: EvalClient,
): Promise<ResourceWriter> {
  const refused = (e: unknown): SaleOutcome => {
    if (isStaleFenceError(e)) return "refused";
    throw e;
  };
  if (target === "redis") {
    const k = saleKeys(cfg.prefix, check);
    const keys = [k.stock, k.last, k.log];
    return {
      async sell(fence, tag) {
        const r = check
          ? await fencedEval(res, fence, SALE_LUA, keys, [String(fence), tag]).catch(refused)
          : await res.eval(SALE_LUA, { keys, arguments: [String(fence), tag] });
        if (r === "refused") return r;
        return Number(r) < 0 ? "sold out" : "accepted";
      },
      close: async () => {},
    };
  }
  if (!cfg.pgUrl) throw new Error("a pg resource needs pgUrl");
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: cfg.pgUrl });
  client.on("error", () => {}); // a broken connection fails the next query, which the section records
  await client.connect();
  const query: SqlQuery = (text, params) => client.query(text, params);
  const t = tables(check);
  const work = async (q: SqlQuery, fence: number, tag: string): Promise<SaleOutcome> => {
    const taken = await q(`UPDATE ${t.stock} SET qty = qty - 1 WHERE sku = 'tee' AND qty > 0 RETURNING qty`, []);
    if ((taken as { rows: unknown[] }).rows.length === 0) return "sold out";
    await q(`INSERT INTO ${t.orders} (fence, writer) VALUES ($1, $2)`, [String(fence), tag]);
    return "accepted";
  };
  return {
    async sell(fence, tag) {
      if (check) {
        return await fencedSqlTransaction(query, fence, "sale", (q) => work(q, fence, tag)).catch(refused);
      }
      await query("BEGIN", []);
      try {
        const r = await work(query, fence, tag);
        await query("COMMIT", []);
        return r;
      } catch (e) {
        await Promise.resolve(query("ROLLBACK", [])).catch(() => {});
        throw e;
      }
    },
    close: () => client.end(),
  };
}

/** One accepted write, as the resource logged it, in the resource's order. */
export interface LoggedWrite {
  fence: number;
  writer: string;
  /** Server time of the write, µs (redis: TIME in the script; pg: clock_timestamp() of the INSERT). */
  us: number;
}

/** The runner's client of the resource redis-server, as far as the sale needs it. */
interface AdminClient {
  set(key: string, value: string): Promise<unknown>;
  get(key: string): Promise<string | null>;
  lRange(key: string, from: number, to: number): Promise<string[]>;
}

/** Before the workers start: the stocks (redis), or the schema (pg, on the run's own throwaway server). */
export async function setupResource(target: ResourceTarget, res: AdminClient, prefix: string, pgUrl?: string) {
  if (target === "redis") {
    for (const check of [true, false]) await res.set(saleKeys(prefix, check).stock, String(STOCK));
  } else await withPg(pgUrl!, (c) => c.query(PG_SCHEMA));
}

/** After the workers exited: what the resource itself recorded (its log, in its own order) and its stock. */
export async function readResource(
  { target, check }: Sink,
  res: AdminClient,
  prefix: string,
  pgUrl?: string,
): Promise<{ log: LoggedWrite[]; stock: number }> {
  if (target === "redis") {
    const k = saleKeys(prefix, check);
    // Entries "<fence> <writer tag> <µs>" (SALE_LUA).
    const log = (await res.lRange(k.log, 0, -1)).map((e) => {
      const [fence, writer, us] = e.split(" ");
      return { fence: Number(fence), writer, us: Number(us) };
    });
    return { log, stock: Number(await res.get(k.stock)) };
  }
  const t = tables(check);
  return await withPg(pgUrl!, async (c) => {
    // In id order: the commit order (ids are taken under the stock row's lock, held until COMMIT).
    const orders = await c.query(
      "SELECT fence::text AS fence, writer, (extract(epoch FROM at) * 1000000)::bigint::text AS us " +
        `FROM ${t.orders} ORDER BY id`,
    );
    const stock = await c.query(`SELECT qty::text AS qty FROM ${t.stock} WHERE sku = 'tee'`);
    return {
      log: orders.rows.map((r: Record<string, string>) => ({
        fence: Number(r.fence),
        writer: r.writer,
        us: Number(r.us),
      })),
      stock: Number(stock.rows[0].qty),
    };
  });
}

/** One `pg` client on `url` for `fn` (the runner's: schema, then the read-back). */
async function withPg<T>(url: string, fn: (c: import("pg").Client) => Promise<T>): Promise<T> {
  const pg = (await import("pg")).default;
  const c = new pg.Client({ connectionString: url });
  c.on("error", () => {});
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end().catch(() => {});
  }
}

/** What the resource recorded, and what the workers saw of it. */
export interface ResourceReport {
  target: ResourceTarget;
  check: boolean;
  /** Writes the resource accepted (its log). */
  accepted: number;
  /** Of these, stale: a fence lower than that of a write accepted before it (must be 0 with the check on). */
  staleAccepted: number;
  staleDetails: string[];
  /** Writes refused with StaleFenceError, as the workers saw them (with the check on, > 0: the faults produced stale attempts). */
  refused: number;
  /** Refused writes of holders that had not lost their lease (must be 0). */
  refusedLive: number;
  /** Sales refused by the floor (sold out: never in these runs). */
  soldOut: number;
  /** Sections whose sale threw something else (by class). */
  errors: Record<string, number>;
  /** Sections that reported the sale accepted (must equal `accepted`). */
  workerAccepted: number;
  /** Final stock + accepted = STOCK (every logged sale took one item, and only those did). */
  stockFinal: number;
  /**
   * The late writes of the paused / blocked / partitioned holders (and of other lost holds of faulted workers):
   * "<worker>#<section> <fault>: <outcome>", noting a signal that had not aborted by the write.
   */
  lateWrites: string[];
  problems: string[];
  /**
   * Check on: stale accepted 0 and refused > 0; check off: stale accepted > 0 (the count can see them), or, with a
   * lock delay that covers the fault, 0 and a late write made after its lease ended.
   */
  ok: boolean;
}

/**
 * The report of one sink: `log` is what the resource recorded (in its order), `stockFinal` its stock after the run,
 * `faultedWorkers` the ids of the workers the scenario faulted.
 */
export function analyzeResource(
  { target, check, id }: Sink,
  log: LoggedWrite[],
  stockFinal: number,
  workers: WorkerResult[],
  faultedWorkers: string[],
  lockDelayCovers = false,
): ResourceReport {
  const problems: string[] = [];
  let max = -Infinity;
  let maxBy = "";
  let staleAccepted = 0;
  const staleDetails: string[] = [];
  for (const [i, w] of log.entries()) {
    if (w.fence < max) {
      staleAccepted++;
      if (staleDetails.length < 5) {
        staleDetails.push(`#${i} fence ${w.fence} by ${w.writer} after fence ${max} by ${maxBy}`);
      }
    } else {
      max = w.fence;
      maxBy = w.writer;
    }
  }
  const sections = workers.flatMap((w) => w.sections);
  const sale = (s: Section) => s.sales?.[id];
  const saleErr = (s: Section) => s.saleErrs?.[id];
  const refused = sections.filter((s) => sale(s) === "refused");
  const refusedLive = refused.filter((s) => !isLost(s)).length;
  const errors: Record<string, number> = {};
  for (const s of sections) {
    const e = saleErr(s);
    if (e) errors[e] = (errors[e] ?? 0) + 1;
  }
  const workerAccepted = sections.filter((s) => sale(s) === "accepted").length;
  const faulted = new Set(faultedWorkers);
  const lateWrites = sections
    .filter((s) => s.fault || (faulted.has(s.w) && isLost(s)))
    .map((s) =>
      `${s.w}#${s.seq}${s.fault ? ` ${s.fault.kind}` : ""}: ${sale(s) ?? saleErr(s) ?? "no write"}${
        s.abortedAtWrite ? "" : " (signal not aborted at the write)"
      }`
    );
  if (workerAccepted !== log.length) {
    problems.push(`the resource logged ${log.length} writes, the workers saw ${workerAccepted} accepted`);
  }
  if (stockFinal + log.length !== STOCK) {
    problems.push(`stock ${stockFinal} + ${log.length} logged sales ≠ ${STOCK}`);
  }
  if (log.length === 0) problems.push("no write reached the resource");
  if (check) {
    if (staleAccepted > 0) problems.push(`${staleAccepted} stale writes accepted: ${staleDetails.join("; ")}`);
    if (refused.length === 0) problems.push("no write was refused: the faults produced no stale attempt");
    if (refusedLive > 0) problems.push(`${refusedLive} writes of live holders refused`);
  } else if (lockDelayCovers) {
    // The lock delay kept the lease from everyone until the paused holder had written: its late write is not stale.
    if (staleAccepted > 0) {
      problems.push(`${staleAccepted} stale writes accepted within the lock delay: ${staleDetails.join("; ")}`);
    }
    const late = sections.filter((s) => s.fault && isLost(s) && sale(s) === "accepted").length;
    if (late === 0) problems.push("no paused holder wrote after losing its lease: the delay was not put to the test");
  } else if (staleAccepted === 0) {
    problems.push("check off, yet no stale write accepted: the checker did not see the stale writes");
  }
  return {
    target,
    check,
    accepted: log.length,
    staleAccepted,
    staleDetails,
    refused: refused.length,
    refusedLive,
    soldOut: sections.filter((s) => sale(s) === "sold out").length,
    errors,
    workerAccepted,
    stockFinal,
    lateWrites,
    problems,
    ok: problems.length === 0,
  };
}
