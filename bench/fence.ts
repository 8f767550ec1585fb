/**
 * What a fenced write costs against the same plain write, in one run (issue 28). Prints markdown; never asserts.
 *
 *   node --import tsx bench/fence.ts [--n 20000] [--reps 5] [--sql-n 2000] [--no-sql] [--out bench/results/fence.md]
 *
 * Redis (a throwaway redis-server): fencedSet, fencedIncrBy and fencedHSet of `redlease/fence` against SET, INCRBY
 * and HSET, beside two hand-written floors of a fenced SET, run with EVALSHA: `floor` is the least Lua that checks
 * the fence against the mark, writes and records the fence in the mark; `floor+retain` also gives the mark the
 * resource's TTL plus a retention (PTTL, SET PX), as redlease's mark does.
 * - Round trips per write, counted at the client socket (bench/_wire.ts: a write after a read is a new round trip),
 *   with the commands written to it, and INFO commandstats beside them: the first call after SCRIPT FLUSH (the
 *   EVALSHA is refused with NOSCRIPT, then the script is sent) and the steady state (100 sequential writes).
 * - Redis CPU per write: N writes over 1,000 keys, one at a time and 64 in flight on one connection (pipelined:
 *   Redis's per-command socket I/O is then shared by many), CONFIG RESETSTAT before and
 *   INFO cpu / commandstats after: used_cpu_user + used_cpu_sys per write, and commandstats' usec per call of the
 *   write (for a script, the whole EVALSHA). Rows run interleaved, `reps` times; ratios are taken within each rep,
 *   and the median and the spread (min–max) over reps are printed.
 *
 * PostgreSQL (a throwaway server, the `pg` client, one connection, sequential): fencedSqlUpdate against the same
 * plain UPDATE of one row, and fencedSqlTransaction (an UPDATE and an INSERT) against the same plain transaction
 * (BEGIN, UPDATE, INSERT, COMMIT): latency p50/p99, ops/s and statements per op, `sql-n` ops per row and rep.
 *
 * redlease is `redlease/fence` as the package builds it (bench/_bundle.ts: the tree's tsup build, as bench/run.ts
 * loads mod.ts), made at the start in the git-ignored bench/results/tmp/. Fences are passed as numbers (a fence carried
 * elsewhere), so no lease is taken: the write alone is measured.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import process from "node:process";
import { fileURLToPath, pathToFileURL } from "node:url";
import pg from "pg";
import { createClient } from "redis";
import { bundleRedlease } from "./_bundle.ts";
import { median, parseCommandStats, parseCpuMicros, pct, r2, sortedF64 } from "./_stats.ts";
import { readWire, resetWire, startWire, stopWire } from "./_wire.ts";
import { startRedis } from "../harness/redis.ts";
import { hasPostgres, startPostgres } from "../harness/postgres.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const i = argv.indexOf(name);
  return i < 0 ? fallback : Number(argv[i + 1]);
};
const N = flag("--n", 20_000);
const REPS = flag("--reps", 5);
const SQL_N = flag("--sql-n", 2_000);
const SQL = !argv.includes("--no-sql");
const OUT = argv.includes("--out") ? argv[argv.indexOf("--out") + 1] : undefined;
const KEYS = 1_000;

// deno-lint-ignore no-explicit-any
type Any = any;
const bundle = join(root, "bench", "results", "tmp", "fence.js");
mkdirSync(dirname(bundle), { recursive: true });
await bundleRedlease(root, bundle, "src/fence.ts");
const fence: Any = await import(pathToFileURL(bundle).href);

const load0 = loadavg();
let out = "";
const say = (s = "") => {
  out += s + "\n";
  process.stdout.write(s + "\n");
};
const fmt = (xs: readonly number[]) => `${r2(median(xs))} (${r2(Math.min(...xs))}–${r2(Math.max(...xs))})`;

// ---------------------------------------------------------------------------------------------------------------
// Redis

const server = await startRedis([], { label: "bench" });
const c = createClient({ url: server.url });
const admin = createClient({ url: server.url });
for (const x of [c, admin]) x.on("error", () => {});
await Promise.all([c.connect(), admin.connect()]);
const redisVersion = /redis_version:(\S+)/.exec(String(await admin.info("server")))?.[1];

// The least a fenced SET does: refuse a lower fence than the mark's, write, record the fence in the mark.
const FLOOR = "local h = redis.call('GET', KEYS[2]) " +
  "if h and tonumber(h) > tonumber(ARGV[1]) then return {0, tonumber(h)} end " +
  "redis.call('SET', KEYS[1], ARGV[2]) redis.call('SET', KEYS[2], ARGV[1]) return {1, 1}";
// The same, with the mark outliving the resource by a retention (its TTL plus retain, none while it has none).
const FLOOR_RETAIN = "local h = redis.call('GET', KEYS[2]) " +
  "if h and tonumber(h) > tonumber(ARGV[1]) then return {0, tonumber(h)} end " +
  "redis.call('SET', KEYS[1], ARGV[2]) local t = redis.call('PTTL', KEYS[1]) " +
  "if t == -1 then redis.call('SET', KEYS[2], ARGV[1]) else " +
  "if t < 0 then t = 0 end redis.call('SET', KEYS[2], ARGV[1], 'PX', t + tonumber(ARGV[3])) end return {1, 1}";
const sha1 = (s: string) => createHash("sha1").update(s).digest("hex");
const FLOOR_SHA = sha1(FLOOR), FLOOR_RETAIN_SHA = sha1(FLOOR_RETAIN);

interface Row {
  id: string;
  /** The write's command in commandstats (its usec per call is the write's). */
  cmd: string;
  write: (i: number) => Promise<unknown>;
}
const F = 7; // every write carries fence 7: equal to the mark's after the first, so every write passes the check
const key = (p: string, i: number) => `{${p}}:${i % KEYS}`;
const ROWS: Row[] = [
  { id: "SET", cmd: "set", write: (i) => c.sendCommand(["SET", key("s", i), "v"]) },
  { id: "fencedSet", cmd: "evalsha", write: (i) => fence.fencedSet(c, F, key("fs", i), "v") },
  {
    id: "floor SET",
    cmd: "evalsha",
    write: (i) => c.sendCommand(["EVALSHA", FLOOR_SHA, "2", key("ls", i), `${key("ls", i)}:fence`, String(F), "v"]),
  },
  {
    id: "floor+retain SET",
    cmd: "evalsha",
    write: (i) =>
      c.sendCommand([
        "EVALSHA",
        FLOOR_RETAIN_SHA,
        "2",
        key("rs", i),
        `${key("rs", i)}:fence`,
        String(F),
        "v",
        "86400000",
      ]),
  },
  { id: "INCRBY", cmd: "incrby", write: (i) => c.sendCommand(["INCRBY", key("i", i), "1"]) },
  { id: "fencedIncrBy", cmd: "evalsha", write: (i) => fence.fencedIncrBy(c, F, key("fi", i), 1) },
  { id: "HSET", cmd: "hset", write: (i) => c.sendCommand(["HSET", key("h", i), "f", "v"]) },
  { id: "fencedHSet", cmd: "evalsha", write: (i) => fence.fencedHSet(c, F, key("fh", i), { f: "v" }) },
];
const PAIRS: [string, string][] = [
  ["fencedSet", "SET"],
  ["floor SET", "SET"],
  ["floor+retain SET", "SET"],
  ["fencedSet", "floor SET"],
  ["fencedSet", "floor+retain SET"],
  ["fencedIncrBy", "INCRBY"],
  ["fencedHSet", "HSET"],
];

/** Client-issued commands in commandstats since the last reset (the scripts' own calls are not the client's). */
async function serverCommands(): Promise<Record<string, number>> {
  const stats = parseCommandStats(String(await admin.info("commandstats")));
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(stats)) {
    if (/^(evalsha|eval|script\|load|set|incrby|hset)$/.test(k)) out[k] = v.calls;
  }
  return out;
}

// Round trips: the first write after SCRIPT FLUSH (and what else a first use sends: redlease checks the eviction
// policy once per client, with a background INFO), then 100 sequential ones. Commands sent are parsed from the bytes
// written to the sockets (bench/_wire.ts): the admin connection sends nothing inside either window.
say(`## Round trips per write: counted at the client socket, and the commands sent\n`);
say(
  "| write | first call after SCRIPT FLUSH: round trips | commands sent | steady state: round trips / write | commands sent / write | commandstats / write (a script's own calls included) |",
);
say("|---|---:|---|---:|---|---|");
const settle = () => new Promise((r) => setTimeout(r, 50));
const show = (x: Record<string, number>, n: number) =>
  Object.entries(x).map(([k, v]) => `${k.toUpperCase()} ${r2(v / n)}`).join(", ");
startWire(server.port);
for (const row of ROWS) {
  await admin.sendCommand(["SCRIPT", "FLUSH"]);
  // (The floors are not redlease's: loaded beforehand, so their first call is their steady state.)
  for (const f of [FLOOR, FLOOR_RETAIN]) await admin.sendCommand(["SCRIPT", "LOAD", f]);
  resetWire();
  await row.write(1_000_000);
  await settle();
  const first = readWire();
  await admin.sendCommand(["CONFIG", "RESETSTAT"]);
  resetWire();
  for (let i = 0; i < 100; i++) await row.write(i);
  await settle();
  const steady = readWire();
  const steadyCmds = await serverCommands();
  say(
    `| ${row.id} | ${first.roundTrips} | ${show(first.commands, 1)} | ${r2(steady.roundTrips / 100)} | ` +
      `${show(steady.commands, 100)} | ${show(steadyCmds, 100)} |`,
  );
}
stopWire();

async function measure(row: Row, inFlight: number): Promise<{ cpuUs: number; usecPerCall: number }> {
  let next = 0;
  // Warm the row's keys and script outside the window.
  for (let i = 0; i < 64; i++) await row.write(i);
  await admin.sendCommand(["CONFIG", "RESETSTAT"]);
  const cpu0 = parseCpuMicros(String(await admin.info("cpu")));
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (next < N) await row.write(next++);
  }));
  const info = String(await admin.info("all"));
  const cpu = parseCpuMicros(info) - cpu0;
  const stats = parseCommandStats(info)[row.cmd];
  return { cpuUs: cpu / N, usecPerCall: stats ? stats.usec / stats.calls : NaN };
}

// One write in flight (each its own round trip, as inside a critical section), and 64 in flight on the connection
// (pipelined: Redis reads and answers many per event-loop turn, so its per-command I/O is shared).
const FLIGHTS = [1, 64];
const cpuPer: Record<string, number[]> = {}, usecPer: Record<string, number[]> = {};
const ratioCpu: Record<string, number[]> = {}, ratioUsec: Record<string, number[]> = {};
for (let rep = 0; rep < REPS; rep++) {
  for (const inFlight of FLIGHTS) {
    const cpuNow: Record<string, number> = {}, usecNow: Record<string, number> = {};
    for (const row of ROWS) {
      const m = await measure(row, inFlight);
      (cpuPer[`${inFlight} ${row.id}`] ??= []).push(m.cpuUs);
      (usecPer[`${inFlight} ${row.id}`] ??= []).push(m.usecPerCall);
      cpuNow[row.id] = m.cpuUs;
      usecNow[row.id] = m.usecPerCall;
    }
    for (const [a, b] of PAIRS) {
      (ratioCpu[`${inFlight} ${a} / ${b}`] ??= []).push(cpuNow[a] / cpuNow[b]);
      (ratioUsec[`${inFlight} ${a} / ${b}`] ??= []).push(usecNow[a] / usecNow[b]);
    }
  }
  process.stderr.write(`  redis rep ${rep + 1}/${REPS} done\n`);
}
say(`\n## Redis CPU per write: ${N} writes per row and rep over ${KEYS} keys, ${REPS} reps\n`);
say("Median over reps (min–max). Redis CPU: used_cpu_user + used_cpu_sys per write; usec per call: commandstats.\n");
say(
  "| write | CPU µs / write, 1 in flight | usec / call, 1 in flight | CPU µs / write, 64 in flight | usec / call, 64 in flight |",
);
say("|---|---:|---:|---:|---:|");
for (const row of ROWS) {
  say(
    `| ${row.id} | ${
      FLIGHTS.map((f) => `${fmt(cpuPer[`${f} ${row.id}`])} | ${fmt(usecPer[`${f} ${row.id}`])}`).join(" | ")
    } |`,
  );
}
say(
  "\n| ratio (within each rep) | Redis CPU, 1 in flight | usec / call, 1 in flight | Redis CPU, 64 in flight | usec / call, 64 in flight |",
);
say("|---|---:|---:|---:|---:|");
for (const [a, b] of PAIRS) {
  const k = `${a} / ${b}`;
  say(`| ${k} | ${FLIGHTS.map((f) => `${fmt(ratioCpu[`${f} ${k}`])} | ${fmt(ratioUsec[`${f} ${k}`])}`).join(" | ")} |`);
}
await Promise.all([c.quit(), admin.quit()]);
await server.stop();

// ---------------------------------------------------------------------------------------------------------------
// PostgreSQL

let pgVersion = "";
if (SQL && !hasPostgres()) say("\nPostgreSQL is not installed (Debian: apt-get install postgresql): SQL rows skipped.");
if (SQL && hasPostgres()) {
  const db = await startPostgres({ label: "bench" });
  pgVersion = db.version;
  const conn = new pg.Client({ connectionString: db.url });
  await conn.connect();
  await conn.query(
    "CREATE TABLE stock (sku text PRIMARY KEY, qty bigint NOT NULL, fence bigint NOT NULL DEFAULT 0);" +
      "CREATE TABLE orders (id bigserial PRIMARY KEY, buyer text NOT NULL, sku text NOT NULL);" +
      fence.FENCE_TABLE_SQL + ";" +
      "INSERT INTO stock (sku, qty) VALUES ('plain', 0), ('fenced', 0), ('tx-plain', 0), ('tx-fenced', 0)",
  );
  let statements = 0;
  const query = (text: string, params: unknown[]) => {
    statements++;
    return conn.query(text, params);
  };
  const sqlRows: { id: string; op: (i: number) => Promise<unknown> }[] = [
    { id: "UPDATE", op: () => query("UPDATE stock SET qty = qty + 1 WHERE sku = $1", ["plain"]) },
    {
      id: "fencedSqlUpdate",
      op: () =>
        fence.fencedSqlUpdate(query, F, {
          table: "stock",
          set: "qty = qty + 1",
          where: "sku = $1",
          params: ["fenced"],
        }),
    },
    {
      id: "transaction",
      op: async (i) => {
        await query("BEGIN", []);
        await query("UPDATE stock SET qty = qty + 1 WHERE sku = $1", ["tx-plain"]);
        await query("INSERT INTO orders (buyer, sku) VALUES ($1, $2)", [`u${i}`, "tx-plain"]);
        await query("COMMIT", []);
      },
    },
    {
      id: "fencedSqlTransaction",
      op: (i) =>
        fence.fencedSqlTransaction(query, F, "sale", async (q: Any) => {
          await q("UPDATE stock SET qty = qty + 1 WHERE sku = $1", ["tx-fenced"]);
          await q("INSERT INTO orders (buyer, sku) VALUES ($1, $2)", [`u${i}`, "tx-fenced"]);
        }),
    },
  ];
  const SQL_PAIRS: [string, string][] = [["fencedSqlUpdate", "UPDATE"], ["fencedSqlTransaction", "transaction"]];
  const p50: Record<string, number[]> = {}, p99: Record<string, number[]> = {}, ops: Record<string, number[]> = {};
  const stmts: Record<string, number> = {};
  const rP50: Record<string, number[]> = {}, rP99: Record<string, number[]> = {}, rOps: Record<string, number[]> = {};
  for (const row of sqlRows) for (let i = 0; i < 200; i++) await row.op(i); // warm-up
  for (let rep = 0; rep < REPS; rep++) {
    const now: Record<string, [number, number, number]> = {};
    for (const row of sqlRows) {
      const lat = new Float64Array(SQL_N);
      statements = 0;
      const t0 = performance.now();
      for (let i = 0; i < SQL_N; i++) {
        const t = performance.now();
        await row.op(i);
        lat[i] = performance.now() - t;
      }
      const secs = (performance.now() - t0) / 1_000;
      stmts[row.id] = statements / SQL_N;
      const s = sortedF64(lat);
      now[row.id] = [pct(s, 50), pct(s, 99), SQL_N / secs];
      (p50[row.id] ??= []).push(now[row.id][0]);
      (p99[row.id] ??= []).push(now[row.id][1]);
      (ops[row.id] ??= []).push(now[row.id][2]);
    }
    for (const [a, b] of SQL_PAIRS) {
      const k = `${a} / ${b}`;
      (rP50[k] ??= []).push(now[a][0] / now[b][0]);
      (rP99[k] ??= []).push(now[a][1] / now[b][1]);
      (rOps[k] ??= []).push(now[a][2] / now[b][2]);
    }
    process.stderr.write(`  sql rep ${rep + 1}/${REPS} done\n`);
  }
  say(
    `\n## PostgreSQL ${db.version}: ${SQL_N} ops per row and rep, one connection, sequential, ${REPS} reps\n`,
  );
  say("Median over reps (min–max). Statements per op counted at the query function.\n");
  say("| op | statements / op | latency p50 ms | latency p99 ms | ops/s |");
  say("|---|---:|---:|---:|---:|");
  const ms = (xs: number[]) => `${median(xs).toFixed(3)} (${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)})`;
  for (const row of sqlRows) {
    say(
      `| ${row.id} | ${r2(stmts[row.id])} | ${ms(p50[row.id])} | ${ms(p99[row.id])} | ${
        fmt(ops[row.id].map(Math.round))
      } |`,
    );
  }
  say("\n| ratio (within each rep) | p50 | p99 | ops/s |");
  say("|---|---:|---:|---:|");
  for (const [a, b] of SQL_PAIRS) {
    const k = `${a} / ${b}`;
    say(`| ${k} | ${fmt(rP50[k])} | ${fmt(rP99[k])} | ${fmt(rOps[k])} |`);
  }
  await conn.end();
  await db.stop();
}

const load1 = loadavg();
const commit = (() => {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).trim();
  } catch {
    return "?";
  }
})();
const header = `# Fenced writes against plain writes (bench/fence.ts)\n\n` +
  `\`node --import tsx bench/fence.ts ${argv.filter((a, i) => a !== "--out" && argv[i - 1] !== "--out").join(" ")}\`` +
  ` at ${commit}, ${new Date().toISOString()}; Redis ${redisVersion}` + (pgVersion ? `, PostgreSQL ${pgVersion}` : "") +
  `; ${cpus().length} cores (${cpus()[0]?.model ?? "?"}); load average ${load0.map((x) => x.toFixed(2)).join(" ")} ` +
  `before, ${load1.map((x) => x.toFixed(2)).join(" ")} after (the machine is shared).\n\n`;
process.stdout.write(`\n${header}`);
if (OUT) writeFileSync(OUT, header + out);
