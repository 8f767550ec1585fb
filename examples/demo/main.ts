/**
 * `npm run demo`: why a lease needs an owner, renewal and fencing, shown on Redis.
 *
 * 1. The flash sale: several app-server processes serve many requests from many users racing for a few items;
 *    each user may buy once. Three modes: no lock, a naive SET NX lock (constant value, plain DEL, fixed TTL
 *    shorter than the slow steps) and redlease. Prints sold, oversold, duplicate orders, locks released by the
 *    wrong owner and throughput per mode.
 * 2. The Redis in Action market: sellers list and buyers buy, with WATCH/MULTI retries, with one coarse market
 *    lease, and with a lease per item. Prints listings, purchases, retries and purchase latency.
 * 3. An upstream limited to n concurrent calls, called by many callers: with no limit, with a polling semaphore
 *    (redis-semaphore) and with redlease permits. Prints calls served and refused, the most in flight, fairness.
 * 4. A leader-elected scheduler: several processes campaign; the leader runs one job per time slot, committed with
 *    its term as fence. The leader is paused past its lease, then another is killed. Prints terms, jobs, refused
 *    late commits and the handover time.
 * 5. The paused app server, with stock and orders in PostgreSQL: the flash sale again, its tables in PostgreSQL, one
 *    app server stopped (SIGSTOP) between deciding to sell and writing, for several lease TTLs, then resumed (SIGCONT).
 *    Three modes: a naive SET NX lock and a redlease lease without a fence check, both writing plain SQL, and
 *    redlease writing through fencedSqlTransaction. Prints sold, oversold, duplicate orders and the stale writes the
 *    database refused.
 *
 *   node --import tsx examples/demo/main.ts [--quick] [--buyers 4] [--items 50] [--users 200] [--requests 2000]
 *        [--concurrency 16] [--mode no-lock,naive,redlease] [--market-seconds 3] [--no-market] [--no-sale]
 *        [--no-upstream] [--no-scheduler] [--no-pg-sale] [--seed 1] [--json-out FILE]
 *
 * Uses $REDIS_URL when set (its own keys only, under `redlease-demo:<run id>:`, deleted afterwards); otherwise
 * starts a throwaway redis-server on a free port and stops it at the end. Scene 5 uses $DATABASE_URL when set (its
 * own tables only, in a schema `redlease_demo_<run id>`, dropped afterwards); otherwise a throwaway PostgreSQL
 * server (harness/postgres.ts), or, where PostgreSQL is not installed, says how to install it and skips it.
 */
import type { ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { createClient } from "redis";
import {
  type Client,
  type Contention,
  emptyCounts,
  type Mode,
  MODES,
  type SaleConfig,
  saleKeys,
  type WorkerCounts,
} from "./_flash_sale.ts";
import { type MarketConfig, type MarketResult, runMarket, VARIANTS } from "./_market.ts";
import { runScheduler, type SchedulerConfig, type SchedulerResult, WORK_MS } from "./_scheduler.ts";
import { runUpstream, UPSTREAM_VARIANTS, type UpstreamConfig, type UpstreamResult } from "./_upstream.ts";
import { int, markdown, ms, Progress } from "./_report.ts";
import { AppServers } from "./_app_servers.ts";
import { DemoError, type DemoRedis, demoRedis } from "./_server.ts";
import { type DemoPostgres, demoPostgres, PG_INSTALL_HINT, type PgSaleResult, runPgSale } from "./_pg_demo.ts";
import { PG_LABEL, PG_MODES, type PgSaleConfig } from "./_pg_sale.ts";

const BUYER = join(dirname(fileURLToPath(import.meta.url)), "buyer.ts");

const HELP = `Usage: node --import tsx examples/demo/main.ts [options]   (npm run demo -- [options])

Flash sale (three modes), the Redis in Action market simulation (three variants), a limited upstream, a
leader-elected scheduler, and the flash sale in PostgreSQL with a paused app server (three modes), against
$REDIS_URL or a throwaway redis-server, and $DATABASE_URL or a throwaway PostgreSQL.

  --buyers N          app-server processes (default 4)
  --items N           units in stock (default 50)
  --users N           distinct users; each may buy once (default 200)
  --requests N        requests in total, spread over the users and app servers (default 2000)
  --concurrency N     requests in flight per app server (default 16)
  --mode LIST         flash-sale modes to run: no-lock,naive,redlease (default all)
  --market-seconds S  duration of each market variant (default 3)
  --no-market         skip the market simulation
  --no-sale           skip the flash sale
  --no-upstream       skip the limited upstream (permits)
  --no-scheduler      skip the leader-elected scheduler
  --no-pg-sale        skip the PostgreSQL flash sale with the paused app server
  --quick             a smaller, faster run (3 app servers, 20 items, 60 users, 360 requests, 1 s markets)
  --seed N            seed of the request plan (default 1)
  --json-out FILE     also write the results as JSON to FILE
  -h, --help          this help
`;

interface Options {
  sale: SaleConfig;
  modes: Mode[];
  market: MarketConfig;
  runSale: boolean;
  runMarket: boolean;
  upstream: UpstreamConfig;
  scheduler: SchedulerConfig;
  runUpstream: boolean;
  runScheduler: boolean;
  pgSale: PgSaleConfig;
  runPgSale: boolean;
  jsonOut?: string;
}

function parseOptions(argv: string[]): Options | undefined {
  const quick = argv.includes("--quick");
  const sale = {
    buyers: quick ? 3 : 4,
    items: quick ? 20 : 50,
    users: quick ? 60 : 200,
    requests: quick ? 360 : 2_000,
    concurrency: quick ? 12 : 16,
    payMs: 5,
    writeMs: 2,
    slowMs: 150,
    slowRate: 0.2,
    naiveTtlMs: 100,
    waitMs: 60_000,
    seed: 1,
  };
  const market = { sellers: 5, buyers: 5, seconds: quick ? 1 : 3 };
  let modes: Mode[] = [...MODES];
  let runSale = true, runMarketSim = true, runUp = true, runSched = true, runPg = true;
  const pgSale: PgSaleConfig = {
    buyers: quick ? 2 : 4,
    items: quick ? 10 : 30,
    users: quick ? 30 : 80,
    // One request at a time per app server: a stopped app server's own queued requests would be handed the lease
    // in turn and hold it up for a claim window each (claimMs, 1 s) before it passed on to a live waiter.
    concurrency: 1,
    payMs: 2,
    ttlMs: 200,
    // Long enough for the others to sell the rest of the stock meanwhile (with 4 app servers and 30 items, 600 ms
    // was not always).
    pauseMs: quick ? 600 : 1_000,
    waitMs: 30_000,
  };
  const upstream = { callers: 12, limit: 4, heavy: 3, callMs: 5, seconds: quick ? 1 : 3 };
  const scheduler = { processes: 3, leaseMs: 300, slotMs: 100, seconds: quick ? 4.5 : 6 };
  let jsonOut: string | undefined;
  const num = (flag: string, v: string | undefined, min: number): number => {
    const n = Number(v);
    if (v === undefined || !Number.isFinite(n) || n < min) throw new DemoError(`${flag} needs a number ≥ ${min}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    switch (a) {
      case "-h":
      case "--help":
        return undefined;
      case "--quick":
        break;
      case "--buyers":
        sale.buyers = Math.floor(num(a, argv[++i], 1));
        break;
      case "--items":
        sale.items = Math.floor(num(a, argv[++i], 1));
        break;
      case "--users":
        sale.users = Math.floor(num(a, argv[++i], 1));
        break;
      case "--requests":
        sale.requests = Math.floor(num(a, argv[++i], 1));
        break;
      case "--concurrency":
        sale.concurrency = Math.floor(num(a, argv[++i], 1));
        break;
      case "--seed":
        sale.seed = Math.floor(num(a, argv[++i], 0));
        break;
      case "--market-seconds":
        market.seconds = num(a, argv[++i], 0.1);
        break;
      case "--mode": {
        const list = (argv[++i] ?? "").split(",").filter(Boolean);
        const bad = list.find((m) => !MODES.includes(m as Mode));
        if (list.length === 0 || bad !== undefined) throw new DemoError(`--mode takes a list of ${MODES.join(", ")}`);
        modes = MODES.filter((m) => list.includes(m));
        break;
      }
      case "--no-market":
        runMarketSim = false;
        break;
      case "--no-sale":
        runSale = false;
        break;
      case "--no-upstream":
        runUp = false;
        break;
      case "--no-scheduler":
        runSched = false;
        break;
      case "--no-pg-sale":
        runPg = false;
        break;
      case "--json-out":
        jsonOut = argv[++i];
        if (!jsonOut) throw new DemoError("--json-out needs a file name");
        break;
      default:
        throw new DemoError(`unknown option '${a}' (see --help)`);
    }
  }
  return {
    sale,
    modes,
    market,
    runSale,
    runMarket: runMarketSim,
    upstream,
    scheduler,
    runUpstream: runUp,
    runScheduler: runSched,
    pgSale,
    runPgSale: runPg,
    jsonOut,
  };
}

export interface SaleResult {
  readonly mode: Mode;
  readonly requests: number;
  readonly sold: number;
  readonly stockLeft: number;
  readonly oversold: number;
  readonly duplicateOrders: number;
  /** Users with more than one order. */
  readonly usersWithDuplicates: number;
  readonly wrongOwnerReleases: number;
  readonly expiredMidSection: number;
  readonly fencedOut: number;
  readonly errors: number;
  readonly seconds: number;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** redlease: the contention its event hook told, per lease (the item, and users' leases together). */
  readonly contention?: WorkerCounts["contention"];
}

function pct(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const LABEL: Record<Mode, string> = {
  "no-lock": "no lock",
  naive: "naive SET NX lock",
  redlease: "redlease",
};

/** One flash-sale mode: reset the stock, run it on every app server, and read the outcome from Redis. */
async function runSale(
  servers: AppServers<WorkerCounts>,
  admin: Client,
  ns: string,
  mode: Mode,
  c: SaleConfig,
): Promise<SaleResult> {
  const k = saleKeys(ns, mode);
  await admin.del([k.stock, k.orders, k.byUser, k.fence]);
  await admin.set(k.stock, String(c.items));
  const progress = new Progress(`flash sale: ${LABEL[mode]}`, c.requests, "requests");
  const handled = new Array<number>(c.buyers).fill(0);
  const [results, seconds] = await servers.run(mode, (i, line, result) => {
    if (result) handled[i] = result.handled;
    else if (line.startsWith("PROGRESS ")) handled[i] = Number(line.slice(9));
    else return;
    progress.update(handled.reduce((a, b) => a + b, 0));
  });

  const total = emptyCounts();
  for (const r of results) {
    for (const key of Object.keys(total) as (keyof WorkerCounts)[]) {
      if (key === "latenciesMs") total.latenciesMs.push(...r.latenciesMs);
      else if (key === "contention") {
        for (const lease of ["item", "user"] as const) {
          const t = total.contention[lease], w = r.contention[lease];
          for (const f of Object.keys(t) as (keyof Contention)[]) {
            if (f === "waitsMs") t.waitsMs.push(...w.waitsMs);
            else t[f] += w[f];
          }
        }
      } else total[key] += r[key];
    }
  }
  const sold = await admin.lLen(k.orders);
  const perUser = (await admin.hVals(k.byUser)).map(Number);
  const lat = total.latenciesMs.sort((a, b) => a - b);
  const r: SaleResult = {
    mode,
    requests: total.handled,
    sold,
    stockLeft: Number(await admin.get(k.stock)),
    oversold: Math.max(0, sold - c.items),
    duplicateOrders: perUser.reduce((a, n) => a + Math.max(0, n - 1), 0),
    usersWithDuplicates: perUser.filter((n) => n > 1).length,
    wrongOwnerReleases: total.wrongOwnerReleases,
    expiredMidSection: total.expiredMidSection,
    fencedOut: total.fencedOut,
    errors: total.errors,
    seconds,
    requestsPerSecond: total.handled / seconds,
    p50Ms: pct(lat, 50),
    p99Ms: pct(lat, 99),
    contention: mode === "redlease" ? total.contention : undefined,
  };
  progress.finish(
    `sold ${r.sold}/${c.items}, oversold ${r.oversold}, duplicate orders ${r.duplicateOrders}` +
      (mode === "no-lock" ? "" : `, released by wrong owner ${r.wrongOwnerReleases}`),
  );
  return r;
}

function saleTable(rs: readonly SaleResult[], c: SaleConfig): string {
  const lockCell = (r: SaleResult, n: number) => (r.mode === "no-lock" ? "–" : int(n));
  const rows = rs.map((r) => [
    LABEL[r.mode] + (r.mode === "naive" ? ` (TTL ${c.naiveTtlMs} ms)` : ""),
    int(r.requests),
    `${int(r.sold)} / ${int(c.items)}`,
    int(r.oversold),
    int(r.duplicateOrders),
    lockCell(r, r.wrongOwnerReleases),
    lockCell(r, r.expiredMidSection),
    int(r.errors),
    `${int(r.requestsPerSecond)} req/s`,
    `${ms(r.p50Ms)} / ${ms(r.p99Ms)}`,
  ]);
  return markdown(
    [
      "mode",
      "requests",
      "sold / stock",
      "oversold",
      "duplicate orders",
      "released by wrong owner",
      "lock expired mid-section",
      "errors",
      "throughput",
      "latency p50 / p99",
    ],
    rows,
    [false, true, true, true, true, true, true, true, true, true],
  );
}

/** The redlease mode's contention, from its event hook: one row per lease (the item; users' leases together). */
function contentionTable(c: NonNullable<SaleResult["contention"]>): string {
  const row = (label: string, x: Contention) => {
    const waits = x.waitsMs.sort((a, b) => a - b);
    return [
      label,
      int(x.acquired),
      `${int(x.waited)} (${x.acquired ? Math.round((100 * x.waited) / x.acquired) : 0} %)`,
      int(x.handedOff),
      waits.length ? `${ms(pct(waits, 50))} / ${ms(pct(waits, 99))}` : "–",
      int(x.passedOn),
      int(x.failed),
      int(x.lost),
    ];
  };
  return markdown(
    ["lease", "acquired", "waited", "handed off", "wait p50 / p99", "passed on", "gave up", "lost"],
    [row("item", c.item), row("user:<id> (all)", c.user)],
    [false, true, true, true, true, true, true, true],
  );
}

function marketTable(rs: readonly MarketResult[]): string {
  return markdown(
    [
      "variant",
      "listings",
      "purchases",
      "misses",
      "retries",
      "retries / purchase",
      "purchase p50",
      "purchase p99",
      "consistent",
    ],
    rs.map((r) => [
      r.variant === "watch"
        ? "WATCH/MULTI retries"
        : r.variant === "coarse lock"
        ? "one market lease"
        : "lease per item",
      int(r.listings),
      int(r.purchases),
      int(r.misses),
      int(r.retries),
      r.retriesPerPurchase.toFixed(2),
      ms(r.purchaseP50Ms),
      ms(r.purchaseP99Ms),
      r.consistent ? "yes" : "NO",
    ]),
    [false, true, true, true, true, true, true, true, false],
  );
}

/** Delete every key of this run (the only keys the demo touches on a shared Redis). */
async function cleanup(admin: Client, ns: string): Promise<void> {
  let cursor = 0;
  do {
    const r = await admin.scan(cursor, { MATCH: `${ns}:*`, COUNT: 1_000 });
    cursor = r.cursor;
    if (r.keys.length > 0) await admin.unlink(r.keys);
  } while (cursor !== 0);
}

async function main(): Promise<number> {
  const o = parseOptions(process.argv.slice(2));
  if (!o) {
    process.stdout.write(HELP);
    return 0;
  }
  const kids = new Set<ChildProcess>();
  let redis: DemoRedis | undefined;
  // Scene 5's PostgreSQL starts while the other scenes run (its start takes a couple of seconds).
  let database: Promise<DemoPostgres | undefined> | undefined;
  let admin: Client | undefined;
  const ns = `redlease-demo:${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const stopAll = async () => {
    for (const k of kids) k.kill("SIGKILL");
    if (admin?.isOpen) {
      await cleanup(admin, ns).catch(() => {});
      await admin.quit().catch(() => {});
    }
    await redis?.stop();
    await (await database?.catch(() => undefined))?.stop();
  };
  process.once("SIGINT", () => {
    void stopAll().finally(() => process.exit(130));
  });
  try {
    redis = await demoRedis();
    process.stderr.write(
      redis.own
        ? `using a throwaway redis-server on port ${redis.port} (removed afterwards)\n`
        : `using REDIS_URL (keys under ${ns}:, deleted afterwards)\n`,
    );
    if (o.runPgSale) {
      database = demoPostgres();
      database.catch(() => {}); // (awaited in scene 5; a failure is reported there)
    }
    admin = createClient({ url: redis.url });
    admin.on("error", () => {});
    await admin.connect();
    const version = /redis_version:(\d+)/.exec(String(await admin.info("server")))?.[1];
    if (version !== undefined && Number(version) < 7) {
      throw new DemoError(`redlease needs Redis 7 or later; this one is ${version}`);
    }

    const sale: SaleResult[] = [];
    const market: MarketResult[] = [];
    const upstream: UpstreamResult[] = [];
    let scheduler: SchedulerResult | undefined;
    if (o.runSale) {
      process.stderr.write(`  starting ${o.sale.buyers} app servers\n`);
      const url = redis.url;
      const servers = new AppServers<WorkerCounts>(
        BUYER,
        (i) => [url, ns, String(i), JSON.stringify(o.sale)],
        o.sale.buyers,
        kids,
      );
      await servers.ready();
      for (const mode of o.modes) sale.push(await runSale(servers, admin, ns, mode, o.sale));
      await servers.close();
    }
    if (o.runMarket) {
      for (const v of VARIANTS) {
        const p = new Progress(`market: ${v}`, Math.round(o.market.seconds * 10) / 10, "s");
        const r = await runMarket(redis.url, ns, v, o.market, (f) => p.update(f * o.market.seconds));
        p.finish(`${int(r.purchases)} purchases, ${int(r.retries)} retries`);
        market.push(r);
      }
    }

    if (o.runUpstream) {
      for (const v of UPSTREAM_VARIANTS) {
        process.stderr.write(`  upstream: ${v} (${o.upstream.seconds} s)\n`);
        upstream.push(await runUpstream(redis.url, ns, v, o.upstream));
      }
    }
    if (o.runScheduler) {
      process.stderr.write(`  scheduler: ${o.scheduler.processes} processes (${o.scheduler.seconds} s)\n`);
      scheduler = await runScheduler(redis.url, ns, o.scheduler, kids);
    }
    let pgSale: PgSaleResult[] | undefined;
    let pgSkipped: string | undefined;
    if (database) {
      const db = await database;
      if (!db) {
        pgSkipped = PG_INSTALL_HINT;
        process.stderr.write(`demo: ${PG_INSTALL_HINT}; skipping it\n`);
      } else {
        const p = o.pgSale;
        process.stderr.write(
          db.own
            ? `  postgres sale: a throwaway PostgreSQL on port ${db.port} (removed afterwards), `
            : `  postgres sale: DATABASE_URL (its own schema, dropped afterwards), `,
        );
        process.stderr.write(`${p.buyers} app servers, one paused for ${p.pauseMs} ms\n`);
        pgSale = await runPgSale(redis.url, db.url, ns, p, PG_MODES, kids, (l) => process.stderr.write(l));
        await db.stop();
      }
    }

    const c = o.sale;
    let out = "";
    if (sale.length > 0) {
      out += `\n## Flash sale: ${c.buyers} app servers × ${c.concurrency} requests in flight, ` +
        `${int(c.requests)} requests from ${int(c.users)} users for ${int(c.items)} items\n\n`;
      out += saleTable(sale, c);
      out += `\nEach user may buy once. Payments take ${c.payMs} ms and order writes ${c.writeMs} ms, except that ` +
        `${Math.round(c.slowRate * 50)} % of payments and ${Math.round(c.slowRate * 100)} % of order writes take ` +
        `${c.slowMs} ms.\n` +
        `- oversold: orders beyond the stock. duplicate orders: orders beyond the first of each user.\n` +
        `- released by wrong owner: a lock's DEL removed a lock that another request had taken after the ` +
        `first one's TTL ran out. The naive lock is SET key "1" NX PX ${c.naiveTtlMs} and DEL key; for ` +
        `measurement only, each acquisition also stores a token in a side key (written and read in the same ` +
        `Lua call as the SET and the DEL), so the demo can tell whose lock a DEL removed. A redlease release ` +
        `removes only the caller's own hold (the owner is checked in Lua), so it cannot release another ` +
        `owner's lease; its column counts none by construction.\n` +
        `- lock expired mid-section: naive, releases that found the lock no longer theirs; redlease, leases ` +
        `lost (the watchdog renews them, so none).\n` +
        `- redlease also fences the order write: it is refused if a newer lease's token has written ` +
        `(${int(sale.find((s) => s.mode === "redlease")?.fencedOut ?? 0)} refused).\n`;
      const contention = sale.find((s) => s.mode === "redlease")?.contention;
      if (contention) {
        out += `\nredlease's contention in the sale, as its event hook told it (configure(client, { onEvent })):\n\n`;
        out += contentionTable(contention);
        out += `\nwaited: acquisitions that queued first. handed off: granted by a release's message (one per ` +
          `handoff), rather than by the waiter's own call. passed on: grants a waiter never claimed within its ` +
          `claim window. gave up: acquires whose wait ran out.\n`;
      }
    }
    if (market.length > 0) {
      out += `\n## Market (Redis in Action §6.2): ${o.market.sellers} sellers and ${o.market.buyers} buyers ` +
        `trading for ${o.market.seconds} s per variant\n\n`;
      out += marketTable(market);
      out += `\nretries: WATCH transactions that had to start again because a watched key changed. misses: ` +
        `another buyer bought the item first. consistent: funds are conserved and every purchase put one item ` +
        `in one inventory.\n`;
    }
    if (upstream.length > 0) {
      const u = o.upstream;
      out += `\n## An upstream that takes ${u.limit} calls at once: ${u.callers} callers, ${u.callMs} ms calls, ` +
        `${u.seconds} s per variant\n\n`;
      out += markdown(
        [
          "variant",
          "calls served",
          "refused (429)",
          "most in flight",
          "per caller (min–max)",
          `heavy caller's rounds`,
          "call p50 / p99",
        ],
        upstream.map((r) => [
          r.variant,
          int(r.served),
          int(r.rejected),
          String(r.maxInFlight),
          `${int(r.minPerCaller)}–${int(r.maxPerCaller)}`,
          int(r.heavyRounds),
          `${ms(r.p50Ms)} / ${ms(r.p99Ms)}`,
        ]),
        [false, true, true, true, true, true, true],
      );
      out += `\nEach caller has its own Redis connection, as separate processes would. The first caller is heavy: ` +
        `each of its rounds makes ${u.heavy} calls at once (per caller counts the others; calls served counts a ` +
        `heavy round as one). no limit: callers call at once and retry a 429 after 10 ms; the upstream refuses ` +
        `every call beyond ${u.limit} (most in flight counts the refused ones that arrived). polling semaphore: ` +
        `redis-semaphore Semaphore(${u.limit}), and MultiSemaphore(${u.limit}, ${u.heavy}) for the heavy caller, ` +
        `with their defaults (they retry every 10 ms). redlease permits: withLock(..., { permits: ${u.limit} }), ` +
        `with weight: ${u.heavy} for the heavy caller: waiters queue, first come first served, and a release wakes ` +
        `the waiters that now fit.\n`;
    }
    if (scheduler) {
      const s = o.scheduler;
      out += `\n## A leader-elected scheduler: ${s.processes} processes, one job per ${s.slotMs} ms slot, ` +
        `${s.leaseMs} ms leadership lease, ${s.seconds} s\n\n`;
      out += markdown(
        [
          "terms",
          "jobs run",
          "slots missed",
          "late commits refused",
          "stale commits accepted",
          "handover after SIGKILL",
        ],
        [[
          String(scheduler.terms),
          int(scheduler.jobs),
          int(scheduler.missedSlots),
          int(scheduler.refused),
          int(scheduler.staleAccepted),
          ms(scheduler.handoverMs),
        ]],
        [true, true, true, true, true, true],
      );
      out +=
        `\nEvery process campaigns (campaign()); the leader runs each slot's job (${WORK_MS} ms of work) and commits ` +
        `it fenced by its term: a commit whose term is below the highest seen is refused. A third of the way in, ` +
        `the leader is SIGSTOPped in a job's work for ${3 * s.leaseMs} ms (three leases): another is elected, and ` +
        `the paused one's commit when it resumes is refused (late commits refused). Two thirds in, the leader is ` +
        `SIGKILLed: the next candidate is elected when its lease's TTL ends (handover). Slots missed are those ` +
        `of the two handovers. Stale commits accepted must be 0.\n`;
    }
    if (pgSale) {
      const p = o.pgSale;
      out += `\n## The paused app server, with stock and orders in PostgreSQL: ${p.buyers} app servers, ` +
        `${p.users} users × 2 requests for ${p.items} items, one app server stopped for ${p.pauseMs} ms or more ` +
        `(lease TTL ${p.ttlMs} ms)\n\n`;
      out += markdown(
        ["mode", "requests", "sold / stock", "stock left", "oversold", "duplicate orders", "stale writes refused"],
        pgSale.map((r) => [
          PG_LABEL[r.mode],
          int(r.requests),
          `${int(r.sold)} / ${int(p.items)}`,
          String(r.stockLeft),
          int(r.oversold),
          int(r.duplicateOrders),
          r.mode === "fenced" ? int(r.refused) : "–",
        ]),
        [false, true, true, true, true, true, true],
      );
      out += `\nEach user sends two requests at once, to two app servers, and may buy once. Under the sale's lock a ` +
        `request reads the stock and the user's orders, "authorises payment" (${p.payMs} ms), then writes ` +
        `UPDATE stock SET qty = qty - 1 and INSERT INTO orders in one transaction. The app server that makes the ` +
        `run's first decision to sell stops itself (SIGSTOP) right after it, before the write, and the demo resumes it (SIGCONT) ` +
        `${p.pauseMs} ms later, or once the others have sold the rest of the stock if that takes longer: its ` +
        `lock expired meanwhile (the naive lock's PX ${p.ttlMs}; redlease's watchdog, ` +
        `stopped with the process, did not renew its ${p.ttlMs} ms lease), the other app servers sold on, and ` +
        `its write came after theirs.\n` +
        `- naive SET NX lock and redlease without a fence check: the late write is plain SQL and lands: one sale ` +
        `too many, and the paused request's user, whose twin request bought meanwhile, has two orders.\n` +
        `- redlease + fencedSqlTransaction: the transaction first records the lease's fence in the sale's fence ` +
        `row; the newer holders recorded higher fences, so the database refuses it (stale writes refused) and ` +
        `nothing of it is written.\n`;
    } else if (pgSkipped) {
      out += `\n## The paused app server, with stock and orders in PostgreSQL\n\nSkipped: ${pgSkipped}.\n`;
    }
    process.stdout.write(out);
    if (o.jsonOut) {
      writeFileSync(
        o.jsonOut,
        JSON.stringify(
          {
            sale: { config: c, results: sale },
            market: { config: o.market, results: market },
            upstream: { config: o.upstream, results: upstream },
            scheduler: { config: o.scheduler, result: scheduler ?? null },
            pgSale: { config: o.pgSale, results: pgSale ?? null, skipped: pgSkipped ?? null },
          },
          null,
          2,
        ),
      );
    }
    return 0;
  } finally {
    await stopAll();
  }
}

let code: number;
try {
  code = await main();
} catch (e) {
  if (!(e instanceof DemoError)) throw e;
  process.stderr.write(`demo: ${e.message}\n`);
  code = 1;
}
process.exit(code);
