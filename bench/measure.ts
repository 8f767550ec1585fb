/**
 * Measurements (prints, never asserts) of redlease against a throwaway redis-server:
 *
 *   A  sequential uncontended acquire + release on fresh names: cycles/s, p50/p99 cycle latency, commands/cycle
 *   B  64 concurrent uncontended loops on one client: cycles/s
 *   C  8 worker processes contending for one name (1 ms critical section): acquisitions/s, handoff gap, fairness,
 *      commands/acquisition
 *
 *   node --import tsx bench/measure.ts
 *
 * Writes the results to bench/results/measure.json as well. Commands per cycle come from INFO commandstats
 * deltas (CONFIG RESETSTAT before, INFO after, both on a separate connection and excluded from the counts).
 * commandstats also counts the commands scripts call, so "total" includes the Lua-internal ones.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { acquire, inspect, release } from "../mod.ts";
import { type Client, type RedisServer, sleep, startRedis } from "../harness/redis.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const WORKER = join(root, "bench", "_measure_worker.ts");

const A_WARM_MS = 500, A_MS = 3_000;
const B_WARM_MS = 300, B_MS = 3_000, B_LOOPS = 64;
const C_MS = 4_000, C_WORKERS = 8;

const wall = () => performance.timeOrigin + performance.now();

// ---------------------------------------------------------------------------------------------------------------
// Statistics helpers

/** Nearest-rank percentile of an ascending array. */
function pct(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

function sortedF64(xs: number[]): Float64Array {
  return Float64Array.from(xs).sort();
}

const r2 = (x: number) => Math.round(x * 100) / 100;
const r3 = (x: number) => Math.round(x * 1000) / 1000;

// ---------------------------------------------------------------------------------------------------------------
// INFO commandstats

/** Commands a client sends to open/close/identify a connection: reported, but not counted per operation. */
const CONNECTION = /^(client(\|.*)?|hello|select|quit|ping|auth|command(\|.*)?)$/;
/** Commands the measuring script itself issues on its stats connection. */
const OWN = /^(info|config(\|.*)?)$/;
/** Commands that only a client (never a script) sends in this library's protocol. */
const CLIENT = /^(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro|script(\|.*)?|[ps]?subscribe|[ps]?unsubscribe)$/;

type Stats = Record<string, number>;

async function resetStats(stats: Client): Promise<void> {
  await stats.sendCommand(["CONFIG", "RESETSTAT"]);
}

async function readStats(stats: Client): Promise<Stats> {
  const text = String(await stats.sendCommand(["INFO", "commandstats"]));
  const out: Stats = {};
  for (const line of text.split(/\r?\n/)) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (m && !OWN.test(m[1])) out[m[1]] = Number(m[2]);
  }
  return out;
}

interface CommandCounts {
  /** Client-issued commands per operation (EVALSHA, SCRIPT, (UN)SUBSCRIBE). */
  clientPerOp: number;
  /** All commands per operation, including those called from Lua (connection commands excluded). */
  totalPerOp: number;
  /** Per command, calls per operation. */
  perOp: Record<string, number>;
  /** Connection management calls seen (absolute, not per operation). */
  connection: Record<string, number>;
}

function perOp(stats: Stats, ops: number): CommandCounts {
  let client = 0, total = 0;
  const per: Record<string, number> = {}, connection: Record<string, number> = {};
  for (const [cmd, calls] of Object.entries(stats).sort((a, b) => b[1] - a[1])) {
    if (CONNECTION.test(cmd)) {
      connection[cmd] = calls;
      continue;
    }
    per[cmd] = r3(calls / ops);
    total += calls;
    if (CLIENT.test(cmd)) client += calls;
  }
  return { clientPerOp: r3(client / ops), totalPerOp: r3(total / ops), perOp: per, connection };
}

function showCounts(c: CommandCounts, unit: string): string {
  const client = Object.entries(c.perOp).filter(([k]) => CLIENT.test(k)).map(([k, v]) => `${k} ${v}`).join(", ");
  const lua = Object.entries(c.perOp).filter(([k]) => !CLIENT.test(k)).map(([k, v]) => `${k} ${v}`).join(", ");
  const conn = Object.entries(c.connection).map(([k, v]) => `${k} ${v}`).join(", ");
  return `  client commands/${unit}: ${c.clientPerOp}  (${client || "none"})\n` +
    `  total commands/${unit} incl. Lua-internal: ${c.totalPerOp}  (Lua: ${lua || "none"})` +
    (conn ? `\n  connection commands (absolute, not counted): ${conn}` : "");
}

// ---------------------------------------------------------------------------------------------------------------
// A: sequential, uncontended

async function measureA(client: Client, stats: Client) {
  let n = 0;
  const warmEnd = performance.now() + A_WARM_MS;
  while (performance.now() < warmEnd) await release(await acquire(client, `a:warm:${n++}`));

  await resetStats(stats);
  const lat: number[] = [];
  const t0 = performance.now();
  const end = t0 + A_MS;
  let i = 0;
  for (;;) {
    const s = performance.now();
    const lease = await acquire(client, `a:${i++}`);
    await release(lease);
    const e = performance.now();
    lat.push(e - s);
    if (e >= end) break;
  }
  const elapsed = performance.now() - t0;
  const counts = perOp(await readStats(stats), lat.length);
  const sorted = sortedF64(lat);
  const res = {
    cycles: lat.length,
    seconds: r3(elapsed / 1000),
    cyclesPerSec: Math.round(lat.length / (elapsed / 1000)),
    p50Ms: r3(pct(sorted, 50)),
    p99Ms: r3(pct(sorted, 99)),
    maxMs: r3(sorted[sorted.length - 1]),
    commands: counts,
  };
  console.log(
    `A sequential uncontended: ${res.cycles} cycles in ${res.seconds} s → ${res.cyclesPerSec} cycles/s, ` +
      `p50 ${res.p50Ms} ms, p99 ${res.p99Ms} ms, max ${res.maxMs} ms`,
  );
  console.log(showCounts(counts, "cycle"));
  return res;
}

// ---------------------------------------------------------------------------------------------------------------
// B: 64 concurrent loops, uncontended (distinct names), one client

async function measureB(client: Client, stats: Client) {
  const run = async (ms: number, tag: string, lat: number[] | undefined) => {
    const end = performance.now() + ms;
    let cycles = 0;
    await Promise.all(Array.from({ length: B_LOOPS }, async (_, loop) => {
      let i = 0;
      while (performance.now() < end) {
        const s = performance.now();
        await release(await acquire(client, `b:${tag}:${loop}:${i++}`));
        lat?.push(performance.now() - s);
        cycles++;
      }
    }));
    return cycles;
  };
  await run(B_WARM_MS, "warm", undefined);

  await resetStats(stats);
  const lat: number[] = [];
  const t0 = performance.now();
  const cycles = await run(B_MS, "m", lat);
  const elapsed = performance.now() - t0;
  const counts = perOp(await readStats(stats), cycles);
  const sorted = sortedF64(lat);
  const res = {
    loops: B_LOOPS,
    cycles,
    seconds: r3(elapsed / 1000),
    cyclesPerSec: Math.round(cycles / (elapsed / 1000)),
    p50Ms: r3(pct(sorted, 50)),
    p99Ms: r3(pct(sorted, 99)),
    commands: counts,
  };
  console.log(
    `B concurrent uncontended (${B_LOOPS} loops, 1 client): ${cycles} cycles in ${res.seconds} s → ` +
      `${res.cyclesPerSec} cycles/s, cycle p50 ${res.p50Ms} ms, p99 ${res.p99Ms} ms`,
  );
  console.log(showCounts(counts, "cycle"));
  return res;
}

// ---------------------------------------------------------------------------------------------------------------
// C: handoff between 8 worker processes contending for one name

interface Worker {
  index: number;
  proc: ChildProcess;
  ready: Promise<void>;
  result: Promise<{ worker: number; records: [number, number][] }>;
  exited: Promise<number | null>;
}

function startWorker(url: string, name: string, index: number): Worker {
  const proc = spawn(process.execPath, ["--import", "tsx", WORKER, url, name, String(index)], {
    cwd: root,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  let onReady!: () => void, onResult!: (r: { worker: number; records: [number, number][] }) => void;
  let fail!: (e: Error) => void;
  const ready = new Promise<void>((res, rej) => {
    onReady = res;
    fail = rej;
  });
  let failResult!: (e: Error) => void;
  const result = new Promise<{ worker: number; records: [number, number][] }>((res, rej) => {
    onResult = res;
    failResult = rej;
  });
  // Avoid unhandled rejections when the caller gives up early.
  ready.catch(() => {});
  result.catch(() => {});
  createInterface({ input: proc.stdout! }).on("line", (line) => {
    if (line === "READY") onReady();
    else if (line.startsWith("RESULT ")) onResult(JSON.parse(line.slice(7)));
    else if (line.trim()) console.error(`worker ${index}: ${line}`);
  });
  void exited.then((code) => {
    const e = new Error(`worker ${index} exited with code ${code}`);
    fail(e);
    failResult(e);
  });
  return { index, proc, ready, result, exited };
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  return Promise.race([
    p,
    new Promise<never>((_, rej) => timer = setTimeout(() => rej(new Error(`timed out after ${ms} ms: ${what}`)), ms)),
  ]).finally(() => clearTimeout(timer));
}

async function measureC(server: RedisServer, client: Client, stats: Client, workers: Worker[]) {
  const name = "c:handoff";

  // Warm-up: hold `<name>:warm` until all workers queue for it, so each opens its subscriber connection, then let
  // the lease pass through all of them.
  const warm = await acquire(client, `${name}:warm`);
  for (let i = 0; i < C_WORKERS; i++) workers.push(startWorker(server.url, name, i));
  const queued = (async () => {
    while ((await inspect(client, `${name}:warm`)).waiters < C_WORKERS) await sleep(20);
  })();
  await withTimeout(
    Promise.race([
      queued,
      ...workers.map((w) =>
        w.exited.then(() => {
          throw new Error(`worker ${w.index} exited during warm-up`);
        })
      ),
    ]),
    20_000,
    "workers queueing for the warm-up lease",
  );
  await release(warm);
  await withTimeout(Promise.all(workers.map((w) => w.ready)), 20_000, "workers READY");
  await sleep(50); // let the warm-up UNSUBSCRIBEs land before the stats reset

  await resetStats(stats);
  const startWall = wall() + 100;
  const endWall = startWall + C_MS;
  for (const w of workers) w.proc.stdin!.end(`GO ${startWall} ${endWall}\n`);
  const results = await withTimeout(Promise.all(workers.map((w) => w.result)), C_MS + 20_000, "worker results");
  const codes = await withTimeout(Promise.all(workers.map((w) => w.exited)), 10_000, "workers exiting");
  const raw = await readStats(stats);

  const all: { w: number; a: number; r: number }[] = [];
  for (const res of results) for (const [a, r] of res.records) all.push({ w: res.worker, a, r });
  all.sort((x, y) => x.a - y.a);
  const inWindow = (x: { a: number }) => x.a >= startWall && x.a < endWall;
  const win = all.filter(inWindow);

  const gaps: number[] = [];
  let same = 0, pairs = 0, overlaps = 0;
  const sameAt: number[] = [];
  for (let i = 1; i < all.length; i++) {
    const prev = all[i - 1], next = all[i];
    if (!inWindow(next)) continue;
    pairs++;
    // next.a < prev.r would mean two holders at once (or clock disagreement between processes).
    if (next.a < prev.r) overlaps++;
    if (next.w === prev.w) {
      same++;
      sameAt.push(r2(next.a - startWall));
    } else gaps.push(next.a - prev.r);
  }
  const perWorker = Array.from({ length: C_WORKERS }, (_, i) => win.filter((x) => x.w === i).length);
  const holdMs = sortedF64(win.map((x) => x.r - x.a));
  const sortedGaps = sortedF64(gaps);
  const counts = perOp(raw, all.length);
  const res = {
    workers: C_WORKERS,
    seconds: C_MS / 1000,
    acquisitions: win.length,
    acquisitionsTotal: all.length,
    acquisitionsPerSec: Math.round(win.length / (C_MS / 1000)),
    gapP50Ms: r3(pct(sortedGaps, 50)),
    gapP99Ms: r3(pct(sortedGaps, 99)),
    gapMaxMs: r3(sortedGaps[sortedGaps.length - 1]),
    gapMinMs: r3(sortedGaps[0]),
    holdP50Ms: r3(pct(holdMs, 50)),
    sameWorkerShare: r3(pairs ? same / pairs : NaN),
    /** When (ms after the start) a worker followed itself: the queue held no live waiter at its release. */
    sameWorkerAtMs: sameAt,
    overlaps,
    minPerWorker: Math.min(...perWorker),
    maxPerWorker: Math.max(...perWorker),
    perWorker,
    workerExitCodes: codes,
    commands: counts,
  };
  console.log(
    `C handoff, ${C_WORKERS} worker processes on one name, 1 ms critical section: ${res.acquisitions} ` +
      `acquisitions in ${res.seconds} s → ${res.acquisitionsPerSec}/s (held p50 ${res.holdP50Ms} ms)`,
  );
  console.log(
    `  handoff gap (release call → next holder's acquire resolved, other worker): p50 ${res.gapP50Ms} ms, ` +
      `p99 ${res.gapP99Ms} ms, min ${res.gapMinMs} ms, max ${res.gapMaxMs} ms`,
  );
  console.log(
    `  same-worker re-acquisitions: ${(res.sameWorkerShare * 100).toFixed(1)} % of ${pairs} successions` +
      (sameAt.length ? ` (at ${sameAt.slice(0, 8).join(", ")}${sameAt.length > 8 ? ", …" : ""} ms after start)` : "") +
      `; ` +
      `overlapping holds: ${overlaps}; per worker: ${perWorker.join(" ")} (min ${res.minPerWorker}, ` +
      `max ${res.maxPerWorker}); exit codes: ${codes.join(" ")}`,
  );
  console.log(`  (commands per acquisition over all ${all.length} acquisitions, incl. the end-of-run tail)`);
  console.log(showCounts(counts, "acquisition"));
  return res;
}

// ---------------------------------------------------------------------------------------------------------------

function table(
  a: Awaited<ReturnType<typeof measureA>>,
  b: Awaited<ReturnType<typeof measureB>>,
  c: Awaited<ReturnType<typeof measureC>>,
): string {
  const rows: [string, string, string, string, string][] = [
    [
      "A sequential uncontended (1 loop)",
      `${a.cyclesPerSec} cycles/s`,
      `p50 ${a.p50Ms} / p99 ${a.p99Ms} ms cycle`,
      String(a.commands.clientPerOp),
      String(a.commands.totalPerOp),
    ],
    [
      `B concurrent uncontended (${b.loops} loops, 1 client)`,
      `${b.cyclesPerSec} cycles/s`,
      `p50 ${b.p50Ms} / p99 ${b.p99Ms} ms cycle`,
      String(b.commands.clientPerOp),
      String(b.commands.totalPerOp),
    ],
    [
      `C handoff (${c.workers} processes, 1 name, 1 ms hold)`,
      `${c.acquisitionsPerSec} acq/s`,
      `gap p50 ${c.gapP50Ms} / p99 ${c.gapP99Ms} ms; same-worker ${(c.sameWorkerShare * 100).toFixed(1)} %; ` +
      `per worker ${c.minPerWorker}–${c.maxPerWorker}`,
      String(c.commands.clientPerOp),
      String(c.commands.totalPerOp),
    ],
  ];
  return [
    "| measure | throughput | latency / fairness | client cmds/op | total cmds/op (incl. Lua) |",
    "|---|---|---|---|---|",
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ].join("\n");
}

async function main() {
  const t0 = performance.now();
  const server = await startRedis();
  const workers: Worker[] = [];
  const stopAll = async () => {
    for (const w of workers) if (w.proc.exitCode === null && w.proc.signalCode === null) w.proc.kill("SIGKILL");
    await Promise.all(workers.map((w) => w.exited));
    await server.stop();
  };
  const onSignal = () => {
    console.error("interrupted: stopping workers and redis-server");
    void stopAll().finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const client = await server.client();
    const stats = await server.client();
    const loadavgAtStart = loadavg().map(r2);
    const version = /redis_version:(\S+)/.exec(String(await stats.sendCommand(["INFO", "server"])))?.[1];
    console.log(
      `redis-server ${version} on port ${server.port} (pid ${server.pid}); node ${process.version}; ` +
        `${availableParallelism()} CPUs (${cpus()[0]?.model ?? "?"}); load average ${loadavg().map(r2).join(" ")}\n`,
    );

    const a = await measureA(client, stats);
    const b = await measureB(client, stats);
    const c = await measureC(server, client, stats, workers);

    console.log("\n" + table(a, b, c));
    const out = join(root, "bench", "results", "measure.json");
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(
      out,
      JSON.stringify(
        {
          date: new Date().toISOString(),
          env: {
            node: process.version,
            redis: version,
            cpus: availableParallelism(),
            cpu: cpus()[0]?.model,
            loadavgAtStart,
            loadavgAtEnd: loadavg().map(r2),
          },
          A: a,
          B: b,
          C: c,
        },
        null,
        2,
      ) + "\n",
    );
    await client.quit();
    await stats.quit();
    console.log(
      `\nwrote ${out} (total run ${((performance.now() - t0) / 1000).toFixed(1)} s; ` +
        `load average ${loadavg().map(r2).join(" ")})`,
    );
  } finally {
    await stopAll();
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

await main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
