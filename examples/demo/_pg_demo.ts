// The demo's side of the PostgreSQL flash sale (examples/demo/_pg_sale.ts): its database, its app-server processes
// (examples/demo/pg_buyer.ts), one run per mode with one app server paused, and the outcome read from the tables.
import type { ChildProcess } from "node:child_process";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { hasPostgres, startPostgres } from "../../harness/postgres.ts";
import { emptyPgCounts, type PgCounts, type PgMode, type PgSaleConfig, pgSchemaSql } from "./_pg_sale.ts";
import { AppServers } from "./_app_servers.ts";
import { DemoError } from "./_server.ts";

const BUYER = join(dirname(fileURLToPath(import.meta.url)), "pg_buyer.ts");

export const PG_INSTALL_HINT = "the PostgreSQL flash sale needs PostgreSQL: install it with " +
  "'apt-get install postgresql' (Debian/Ubuntu) or 'brew install postgresql' (macOS), or set " +
  "DATABASE_URL=postgres://…";

export interface DemoPostgres {
  readonly url: string;
  /** Whether the demo started this server itself. */
  readonly own: boolean;
  readonly port?: number;
  stop(): Promise<void>;
}

/** $DATABASE_URL when set; else a throwaway server; undefined when PostgreSQL is not installed. */
export async function demoPostgres(): Promise<DemoPostgres | undefined> {
  const given = process.env.DATABASE_URL;
  if (given) {
    const c = new pg.Client({ connectionString: given, connectionTimeoutMillis: 3_000 });
    try {
      await c.connect();
      await c.query("SELECT 1");
    } catch (e) {
      throw new DemoError(
        `cannot reach PostgreSQL at DATABASE_URL=${given.replace(/:[^:@/]*@/, ":***@")}: ${(e as Error).message}`,
      );
    } finally {
      await c.end().catch(() => {});
    }
    return { url: given, own: false, stop: async () => {} };
  }
  if (!hasPostgres()) return undefined;
  const server = await startPostgres({ label: "demo" }).catch((e: Error) => {
    throw new DemoError(`PostgreSQL did not start: ${e.message.split("\n")[1] ?? e.message}`);
  });
  return { url: server.url, own: true, port: server.port, stop: () => server.stop() };
}

export interface PgSaleResult {
  readonly mode: PgMode;
  readonly requests: number;
  readonly sold: number;
  readonly stockLeft: number;
  readonly oversold: number;
  readonly duplicateOrders: number;
  readonly usersWithDuplicates: number;
  /** Transactions the database refused as stale (fenced mode). */
  readonly refused: number;
  readonly leaseLost: number;
  readonly errors: number;
  /** How long the paused app server was stopped, ms. */
  readonly pausedMs: number;
  readonly seconds: number;
}

/**
 * Run the PostgreSQL flash sale in each of `modes`: its tables in a schema of their own (dropped afterwards), its
 * app servers started once for every mode.
 */
export async function runPgSale(
  redisUrl: string,
  dbUrl: string,
  ns: string,
  c: PgSaleConfig,
  modes: readonly PgMode[],
  kids: Set<ChildProcess>,
  say: (line: string) => void,
): Promise<PgSaleResult[]> {
  const schema = `redlease_demo_${ns.split(":").pop()!.replace(/[^a-z0-9]/g, "")}`;
  const admin = new pg.Client({ connectionString: dbUrl });
  await admin.connect();
  let servers: AppServers<PgCounts> | undefined;
  try {
    await admin.query(pgSchemaSql(schema).join(";\n"));
    servers = new AppServers<PgCounts>(
      BUYER,
      (i) => [redisUrl, dbUrl, schema, ns, String(i), JSON.stringify(c)],
      c.buyers,
      kids,
    );
    await servers.ready();

    const out: PgSaleResult[] = [];
    for (const mode of modes) {
      await admin.query(
        `TRUNCATE ${schema}.orders, ${schema}.redlease_fences; DELETE FROM ${schema}.stock; ` +
          `INSERT INTO ${schema}.stock VALUES ('tee', ${c.items})`,
      );
      let pausedMs = 0;
      const [results, seconds] = await servers.run(mode, (i, line) => {
        if (line !== "PAUSE") return;
        // The app server stopped itself mid-section: keep it stopped past its lease, and until the others have
        // sold the rest of the stock (on a loaded machine that may take longer than pauseMs: resumed earlier,
        // its late write could come before any newer holder's, and show nothing), then let it go on.
        const t0 = performance.now();
        const resume = () => {
          servers!.kill(i, "SIGCONT");
          pausedMs = performance.now() - t0;
        };
        const soldOut = async (): Promise<void> => {
          for (;;) {
            const { rows: [{ qty }] } = await admin.query(`SELECT qty FROM ${schema}.stock WHERE sku = 'tee'`);
            if (Number(qty) <= 0 || performance.now() - t0 > c.waitMs) return;
            await new Promise((r) => setTimeout(r, 20));
          }
        };
        setTimeout(() => void soldOut().then(resume, resume), c.pauseMs);
      });
      const total = emptyPgCounts();
      for (const r of results) for (const k of Object.keys(total) as (keyof PgCounts)[]) total[k] += r[k];
      const { rows: [{ sold }] } = await admin.query(`SELECT count(*)::int AS sold FROM ${schema}.orders`);
      const { rows: [{ qty }] } = await admin.query(`SELECT qty FROM ${schema}.stock WHERE sku = 'tee'`);
      const { rows: per } = await admin.query(
        `SELECT buyer, count(*)::int AS n FROM ${schema}.orders GROUP BY buyer HAVING count(*) > 1`,
      );
      const r: PgSaleResult = {
        mode,
        requests: total.handled,
        sold,
        stockLeft: qty,
        oversold: Math.max(0, sold - c.items),
        duplicateOrders: per.reduce((a, x) => a + x.n - 1, 0),
        usersWithDuplicates: per.length,
        refused: total.refused,
        leaseLost: total.leaseLost,
        errors: total.errors,
        pausedMs,
        seconds,
      };
      say(
        `  postgres sale: ${mode} done in ${seconds.toFixed(1)}s: sold ${r.sold}/${c.items}, oversold ${r.oversold}, ` +
          `duplicate orders ${r.duplicateOrders}, stale writes refused ${r.refused}\n`,
      );
      out.push(r);
    }
    await servers.close();
    return out;
  } finally {
    servers?.killAll();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
    await admin.end().catch(() => {});
  }
}
