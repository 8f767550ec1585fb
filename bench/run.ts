/**
 * Side-by-side benchmark of redlease against the raw node-redis floor and the peer lock libraries, on one throwaway
 * redis-server. Prints; never asserts.
 *
 *   npm run bench                     full run (B3: 3 runs, 7 at W = 2; B1/B2/B5: 5 runs; ~20 min on 2 cores)
 *   npm run bench -- --quick          1 repetition, shorter windows
 *   npm run bench -- --only redlease,raw    only these libraries (or variant ids such as redlock@1ms)
 *   other flags: --reps N, --w2-reps N (B3 runs at W = 2; default --reps + 4, or --reps with --quick),
 *   --ws 2,8,32, --phases b1,b3,b5, --window <B3 ms>, --out <results basename>,
 *   --pause <ms> (diagnostic: B3 workers wait this long after each release before queueing again),
 *   --render <results.json> (rewrite the .md, -b3.svg and -summary.svg from a results file)
 *
 * B1 sequential uncontended cycles, B2 64 concurrent uncontended loops, B3 contended handoff between W worker
 * processes, B4 Redis commands and CPU per acquisition (from B1 and B3), B5 cold start and bundle size.
 * Writes bench/results/<out>.md, <out>.json, <out>-b3.svg and <out>-summary.svg. See bench/README.md for the method.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism, cpus, loadavg } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { gzipSync } from "node:zlib";
import { createClient } from "redis";
import {
  CLIENT_COMMANDS,
  FLOORS,
  HEAVY,
  LABEL,
  type LibId,
  LIBS,
  ON_GLIDE,
  PERMIT_LIBS,
  PERMITS,
  type Seat,
  settingsText,
  TUNABLE,
  UNCONTENDED_ONLY,
  WAIT_MS,
  WEIGHTED_LIBS,
  weightOfSeat,
} from "./_libs.ts";
import { killAllChildren, runOnce, Worker } from "./_proc.ts";
import { type B3Rep, type ColdRep, render, type Run, type Size, type UncRep, type Variant } from "./report/render.ts";
import { type RedisServer as Server, sleep, startRedis } from "../harness/redis.ts";
import { bundleRedlease } from "./_bundle.ts";
import {
  clockSkewMs,
  machineBusyUs,
  parseCommandStats,
  parseCpuMicros,
  pct,
  perOp,
  r2,
  r3,
  sortedF64,
} from "./_stats.ts";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const WORKER = join(root, "bench", "_worker.ts");
const COLD = join(root, "bench", "_cold.ts");
const COLD_HTTP = join(root, "bench", "_cold_http.ts");
const RESULTS = join(root, "bench", "results");
const TMP = join(RESULTS, "tmp"); // git-ignored

// ---------------------------------------------------------------------------------------------------------------
// Options

function parseArgs(argv: string[]) {
  const o = {
    quick: false,
    only: undefined as string[] | undefined,
    reps: undefined as number | undefined,
    w2Reps: undefined as number | undefined,
    ws: [2, 8, 32],
    phases: ["b1", "b3", "b5", "b6", "b7"],
    window: undefined as number | undefined,
    out: undefined as string | undefined,
    pause: 0,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === "--quick") o.quick = true;
    else if (a === "--only") o.only = val().split(",").map((s) => s.trim()).filter(Boolean);
    else if (a === "--reps") o.reps = Number(val());
    else if (a === "--w2-reps") o.w2Reps = Number(val());
    else if (a === "--ws") o.ws = val().split(",").map(Number);
    else if (a === "--phases") o.phases = val().split(",").map((s) => s.trim().toLowerCase());
    else if (a === "--window") o.window = Number(val());
    else if (a === "--out") o.out = val();
    else if (a === "--pause") o.pause = Number(val());
    else throw new Error(`unknown argument ${a}`);
  }
  const reps = o.reps ?? (o.quick ? 1 : 3);
  return {
    ...o,
    reps,
    /** B1/B2 and B5 are cheap and noisier: two more runs than B3. */
    uncReps: o.quick ? reps : reps + 2,
    /**
     * B3 at W = 2 has the shortest gaps, and its ring floor varies most from run to run (0.10 to 0.27 ms p50 on the
     * same machine): four more runs than the other W (about 4 min more of a full run); with --quick, as many.
     */
    w2Reps: o.w2Reps ?? (o.quick ? reps : reps + 4),
    out: o.out ?? (o.quick ? "bench-quick" : "bench"),
    b1Ms: o.quick ? 1_000 : 2_500,
    b2Ms: o.quick ? 1_000 : 2_500,
    uncWarmMs: 300,
    probeCycles: 200,
    b3Ms: o.window ?? (o.quick ? 1_500 : 4_000),
    b3WarmMs: o.quick ? 300 : 400,
    b2Loops: 64,
  };
}
type Opts = ReturnType<typeof parseArgs>;

const wall = () => performance.timeOrigin + performance.now();
let parentSkew: number | undefined;
const skew = () => parentSkew ??= clockSkewMs();
const load3 = () => loadavg().map(r2);

function variants(only: string[] | undefined): Variant[] {
  const out: Variant[] = [];
  for (const lib of [...LIBS, ON_GLIDE, ...UNCONTENDED_ONLY, ...FLOORS, ...PERMIT_LIBS, ...WEIGHTED_LIBS]) {
    const add = (tuned: boolean) => {
      const id = tuned ? `${lib}@1ms` : lib;
      if (only && !only.includes(id) && !only.includes(lib)) return;
      const label = TUNABLE[lib] ? `${LABEL[lib]} (${tuned ? "1 ms retry" : "default retry"})` : LABEL[lib];
      out.push({ id, lib, tuned, label, settings: settingsText(lib, tuned) });
    };
    add(false);
    if (TUNABLE[lib]) add(true);
  }
  return out;
}

/** Rotate `xs` by `k`, so that no library is always measured first or last. */
const rotate = <T>(xs: readonly T[], k: number) => xs.map((_, i) => xs[(i + k) % xs.length]);

// ---------------------------------------------------------------------------------------------------------------
// Redis stats (admin connection; its own INFO/CONFIG calls are never counted)

type Admin = ReturnType<typeof createClient>;

async function resetStats(admin: Admin): Promise<number> {
  await admin.sendCommand(["CONFIG", "RESETSTAT"]);
  return parseCpuMicros(String(await admin.sendCommand(["INFO", "cpu"])));
}

async function readStats(admin: Admin, cpu0: number) {
  const info = String(await admin.sendCommand(["INFO", "cpu", "commandstats"]));
  return { stats: parseCommandStats(info), redisCpuUs: parseCpuMicros(info) - cpu0 };
}

// ---------------------------------------------------------------------------------------------------------------
// B1 + B2: one fresh worker process per library and repetition

/**
 * What the rest of the machine took during a window starting now: call the result with the CPU µs the measured
 * processes used (Redis and the worker) and the window's ms; it gives the CPU every other process used (this parent
 * excluded) in % of one core, rounded. A quiet machine reads about 0; another engineer's build or test run reads tens.
 */
function othersFrom(): (measuredUs: number, ms: number) => number {
  const busy0 = machineBusyUs(), own0 = process.cpuUsage();
  return (measuredUs, ms) => {
    const own = process.cpuUsage(own0);
    const others = machineBusyUs() - busy0 - measuredUs - own.user - own.system;
    return Math.round(Math.max(0, others) / (ms * 10));
  };
}

async function uncontended(o: Opts, server: Server, admin: Admin, lib: LibId, rep: number, moduleUrl: string) {
  const w = new Worker(WORKER, [moduleUrl], `${lib} b1/b2`, root);
  try {
    const s = await w.request({ op: "setup", lib, tuned: false, url: server.url }, 60_000);
    w.offset = s.skew - skew();
    const re = CLIENT_COMMANDS[lib];
    const loadAvg = load3();

    // B1: one sequential loop
    await w.request({ op: "loops", loops: 1, ms: o.uncWarmMs }, 60_000);
    let cpu0 = await resetStats(admin);
    let others = othersFrom();
    const b1 = await w.request({ op: "uncontended", loops: 1, until: wall() + o.b1Ms + w.offset }, o.b1Ms + 60_000);
    let st = await readStats(admin, cpu0);
    const b1Others = others(st.redisCpuUs + b1.cpuUs, b1.ms);
    const wire = await w.request({ op: "probe", port: server.port, cycles: o.probeCycles }, 60_000);
    const wireCommands: Record<string, number> = {};
    for (const [k, v] of Object.entries(wire.commands as Record<string, number>)) {
      wireCommands[k] = r3(v / o.probeCycles);
    }
    const B1 = {
      cycles: b1.cycles,
      cyclesPerSec: Math.round(b1.cycles / (b1.ms / 1000)),
      p50Ms: r3(b1.p50),
      p99Ms: r3(b1.p99),
      commands: perOp(st.stats, b1.cycles, re),
      redisCpuUs: r2(st.redisCpuUs / b1.cycles),
      clientCpuUs: r2(b1.cpuUs / b1.cycles),
      roundTrips: r3(wire.roundTrips / o.probeCycles),
      wireCommands,
      othersCpuPct: b1Others,
    };

    // B2: 64 concurrent loops, distinct names, one client
    await w.request({ op: "loops", loops: o.b2Loops, ms: o.uncWarmMs }, 60_000);
    cpu0 = await resetStats(admin);
    others = othersFrom();
    const b2 = await w.request(
      { op: "uncontended", loops: o.b2Loops, until: wall() + o.b2Ms + w.offset },
      o.b2Ms + 60_000,
    );
    st = await readStats(admin, cpu0);
    const b2Others = others(st.redisCpuUs + b2.cpuUs, b2.ms);
    const B2 = {
      cycles: b2.cycles,
      cyclesPerSec: Math.round(b2.cycles / (b2.ms / 1000)),
      p50Ms: r3(b2.p50),
      p99Ms: r3(b2.p99),
      commands: perOp(st.stats, b2.cycles, re),
      redisCpuUs: r2(st.redisCpuUs / b2.cycles),
      clientCpuUs: r2(b2.cpuUs / b2.cycles),
      othersCpuPct: b2Others,
    };
    await w.request({ op: "teardown" }, 10_000);
    const r: UncRep = { lib, rep, loadAvg, b1: B1, b2: B2 };
    console.log(
      `  ${
        lib.padEnd(10)
      } B1 ${B1.cyclesPerSec} cycles/s (p50 ${B1.p50Ms} / p99 ${B1.p99Ms} ms, ${B1.roundTrips} RT, ` +
        `${B1.commands.clientPerOp}/${B1.commands.totalPerOp} cmds)  B2 ${B2.cyclesPerSec} cycles/s  ` +
        `[load ${loadAvg[0]}; others' CPU in B2 ${B2.othersCpuPct}% of a core]`,
    );
    return r;
  } finally {
    await w.stop();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// B3: contended handoff between W worker processes (a pool of max(W) processes per repetition)

async function spawnPool(n: number, moduleUrl: string, libs: LibId[]): Promise<Worker[]> {
  const pool = Array.from({ length: n }, (_, i) => new Worker(WORKER, [moduleUrl], `w${i}`, root));
  await Promise.all(pool.map((w) => w.request({ op: "preload", libs }, 180_000)));
  return pool;
}

/** Connect each worker of `ws` to the variant's library, and correct its clock offset onto ours. */
async function setUp(server: Server, ws: Worker[], v: Variant, seat: (i: number) => Seat): Promise<void> {
  const setups = await Promise.all(
    ws.map((w, i) => w.request({ op: "setup", lib: v.lib, tuned: v.tuned, url: server.url, seat: seat(i) }, 60_000)),
  );
  const mine = skew();
  setups.forEach((s, i) => ws[i].offset = s.skew - mine);
}

/**
 * JIT warm-up, unmeasured: every worker of the pool contends in pairs, each pair on a name of its own, for `ms`.
 * In a measured round at W = 32 each worker acquires only a few dozen times, so without this a library's contended
 * path would still be running as cold (interpreted, unoptimised) code, and a library with more code to warm up
 * would pay for that in the measured window instead of for its handoff. Not for the ring: its workers pass one
 * token around channels named by seat, not by name.
 */
async function warmInPairs(o: Opts, server: Server, pool: Worker[], v: Variant, ms: number): Promise<void> {
  const ws = pool.slice(0, pool.length - (pool.length % 2));
  await setUp(server, ws, v, (i) => ({ index: i % 2, of: 2 }));
  const name = `b3:jit:${v.id}:${randomBytes(3).toString("hex")}`;
  const start = wall() + 100;
  await Promise.all(ws.map((w, i) =>
    w.request(
      {
        op: "contend",
        name: `${name}:${i >> 1}`,
        start: start + w.offset,
        end: start + ms + w.offset,
        port: server.port,
      },
      ms + WAIT_MS + 30_000,
    )
  ));
  await Promise.all(ws.map((w) => w.request({ op: "teardown" }, 10_000)));
}

async function round(
  o: Opts,
  server: Server,
  admin: Admin,
  pool: Worker[],
  v: Variant,
  W: number,
  rep: number,
  quiet = false,
): Promise<B3Rep> {
  const ws = pool.slice(0, W);
  const loadAvg = load3();
  await setUp(server, ws, v, (i) => ({ index: i, of: W }));
  const name = `b3:${v.id}:${W}:${rep}:${randomBytes(3).toString("hex")}`;
  const budget = WAIT_MS + 30_000;

  // Contended warm-up on another name: every worker waits at least once (redlease opens its subscriber).
  let start = wall() + 100;
  const warm = await Promise.all(ws.map((w) =>
    w.request(
      {
        op: "contend",
        name: `${name}:warm`,
        start: start + w.offset,
        end: start + o.b3WarmMs + w.offset,
        port: server.port,
      },
      o.b3WarmMs + budget,
    )
  ));
  const warmFailures = warm.reduce((s, r) => s + r.failures, 0);
  await sleep(50);

  const cpu0 = await resetStats(admin);
  start = wall() + 50;
  const end = start + o.b3Ms;
  const replies = await Promise.all(ws.map((w) =>
    w.request(
      { op: "contend", name, start: start + w.offset, end: end + w.offset, port: server.port, pauseMs: o.pause },
      o.b3Ms + budget,
    )
  ));
  const st = await readStats(admin, cpu0);
  await Promise.all(ws.map((w) => w.request({ op: "teardown" }, 10_000)));

  const all: { w: number; c: number; a: number; r: number; d: number; wr: number }[] = [];
  let failures = 0, clientCpu = 0, wakeups = 0;
  let firstError: string | undefined;
  replies.forEach((rp, i) => {
    const off = ws[i].offset;
    const recs = rp.recs as number[];
    for (let k = 0; k < recs.length; k += 5) {
      all.push({
        w: i,
        c: recs[k] - off,
        a: recs[k + 1] - off,
        r: recs[k + 2] - off,
        d: recs[k + 3] - off,
        wr: recs[k + 4] - off,
      });
    }
    failures += rp.failures;
    clientCpu += rp.cpuUs;
    wakeups += rp.wakeups ?? NaN;
    firstError ??= rp.firstError;
  });
  all.sort((x, y) => x.a - y.a);
  const inWindow = (x: { a: number }) => x.a >= start && x.a < end;
  const gaps: number[] = [], relW: number[] = [], transit: number[] = [], wake: number[] = [];
  let same = 0, pairs = 0, overlaps = 0;
  for (let i = 1; i < all.length; i++) {
    const prev = all[i - 1], next = all[i];
    if (!inWindow(next)) continue;
    pairs++;
    if (next.a < prev.r) overlaps++; // two holders at once (or clock disagreement)
    if (next.w === prev.w) same++;
    else {
      gaps.push(next.a - prev.r);
      // Where the gap goes: release() called → its command written (releaser) → the reply/message that unblocked
      // the next holder read from its socket (Redis, loopback, scheduling; polling delay) → its acquire resolved.
      if (Number.isFinite(prev.wr)) relW.push(prev.wr - prev.r);
      if (Number.isFinite(prev.wr) && Number.isFinite(next.d)) transit.push(next.d - prev.wr);
      if (Number.isFinite(next.d)) wake.push(next.a - next.d);
    }
  }
  const weighted = WEIGHTED_LIBS.includes(v.lib);
  if (PERMIT_LIBS.includes(v.lib) || weighted) {
    // n permits: an overlap is a moment with more than n taken at once (consecutive holds overlap by design); in B7
    // each hold takes its worker's weight.
    overlaps = 0;
    let now = 0;
    const weight = (x: { w: number }) => weighted ? weightOfSeat(x.w) : 1;
    const events = all.flatMap((x) => [[x.a, weight(x)], [x.r, -weight(x)]] as const)
      .sort((p, q) => p[0] - q[0] || p[1] - q[1]);
    for (const [, d] of events) if ((now += d) > PERMITS && d > 0) overlaps++;
  }
  const perWorker = Array.from({ length: W }, (_, i) => all.filter((x) => x.w === i && inWindow(x)).length);
  const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / Math.max(1, xs.length);
  const heavyPerLight = weighted
    ? r3(
      mean(perWorker.filter((_, i) => weightOfSeat(i) > 1)) / mean(perWorker.filter((_, i) => weightOfSeat(i) === 1)),
    )
    : undefined;
  const inWin = all.filter(inWindow).length;
  const g = sortedF64(gaps);
  const waits = sortedF64(all.map((x) => x.a - x.c));
  const holds = sortedF64(all.map((x) => x.r - x.a));
  const n = Math.max(1, all.length);
  const res: B3Rep = {
    variant: v.id,
    lib: v.lib,
    W,
    rep,
    loadAvg,
    acquisitions: inWin,
    acquisitionsTotal: all.length,
    acqPerSec: Math.round(inWin / (o.b3Ms / 1000)),
    gapP50Ms: r3(pct(g, 50)),
    gapP99Ms: r3(pct(g, 99)),
    gapMaxMs: r3(g.length ? g[g.length - 1] : NaN),
    gapSplitP50Ms: {
      releaseToWrite: r3(pct(sortedF64(relW), 50)),
      writeToRead: r3(pct(sortedF64(transit), 50)),
      readToAcquired: r3(pct(sortedF64(wake), 50)),
    },
    crossWorkerHandoffs: gaps.length,
    sameWorkerShare: r3(pairs ? same / pairs : NaN),
    minPerWorker: Math.min(...perWorker),
    maxPerWorker: Math.max(...perWorker),
    fairness: r3(Math.max(...perWorker) ? Math.min(...perWorker) / Math.max(...perWorker) : NaN),
    failures,
    warmFailures,
    firstError,
    waitP50Ms: r3(pct(waits, 50)),
    waitP99Ms: r3(pct(waits, 99)),
    waitMaxMs: r3(waits.length ? waits[waits.length - 1] : NaN),
    holdP50Ms: r3(pct(holds, 50)),
    overlaps,
    commands: perOp(st.stats, n, CLIENT_COMMANDS[v.lib]),
    redisCpuUs: r2(st.redisCpuUs / n),
    clientCpuUs: r2(clientCpu / n),
    clientWakeups: r2(wakeups / n),
    maxClockOffsetMs: r3(Math.max(...ws.map((w) => Math.abs(w.offset)))),
    heavyPerLight,
  };
  if (quiet) return res;
  console.log(
    `  ${v.id.padEnd(15)} W=${String(W).padEnd(2)} ${
      String(res.acqPerSec).padStart(5)
    } acq/s  gap p50 ${res.gapP50Ms} ` +
      `p99 ${res.gapP99Ms} ms  same ${(res.sameWorkerShare * 100).toFixed(0)}%  fair ${res.minPerWorker}/` +
      `${res.maxPerWorker}  fail ${failures}  cmds ${res.commands.clientPerOp}/${res.commands.totalPerOp}  ` +
      `redis ${res.redisCpuUs} µs  client ${res.clientCpuUs} µs, ${res.clientWakeups} wake-ups  [load ${loadAvg[0]}]`,
  );
  if (firstError) console.log(`    first failure: ${firstError.slice(0, 200)}`);
  if (overlaps) console.log(`    ${overlaps} overlapping holds`);
  return res;
}

// ---------------------------------------------------------------------------------------------------------------
// B5: cold start (fresh process per library) and bundle sizes

async function cold(
  server: Server,
  admin: Admin,
  which: string,
  lib: LibId,
  moduleUrl: string,
  rep: number,
  http = false,
) {
  await admin.sendCommand(["SCRIPT", "FLUSH"]); // first use must load its scripts, as in a fresh deployment
  const r = http // a fresh upstash() driver through harness/http_bridge.ts: round trips are requests
    ? await runOnce(COLD_HTTP, [server.url, moduleUrl], `cold ${which}`, root, 60_000)
    : await runOnce(COLD, [lib, server.url, String(server.port), moduleUrl], `cold ${which}`, root, 60_000);
  // deno-lint-ignore no-explicit-any
  const wl = r.wireToLease as any, wt = r.wire as any, wc = r.wireAtConnect as any;
  const res: ColdRep = {
    which,
    lib,
    rep,
    bootMs: r2(r.bootMs as number),
    importClientMs: r2(r.importClientMs as number),
    importMs: r2(r.importMs as number),
    connectMs: r2(r.connectMs as number),
    acquireMs: r2(r.acquireMs as number),
    releaseMs: r2(r.releaseMs as number),
    toFirstLeaseMs: r2(r.toFirstLeaseMs as number),
    connectsToLease: wl.connects,
    roundTripsToLease: wl.roundTrips,
    commandsToLease: wl.commands,
    roundTripsAcquire: wl.roundTrips - wc.roundTrips,
    roundTripsWithRelease: wt.roundTrips,
    commandsWithRelease: wt.commands,
  };
  console.log(
    `  ${
      which.padEnd(16)
    } import client ${res.importClientMs} ms + library ${res.importMs} ms, connect ${res.connectMs} ms, first acquire ${res.acquireMs} ms → ` +
      `${res.toFirstLeaseMs} ms; ${res.connectsToLease} connect + ${res.roundTripsToLease} round trips ` +
      `(first acquire: ${res.roundTripsAcquire}) ` +
      `(${Object.entries(res.commandsToLease).map(([k, v]) => `${k}×${v}`).join(" ")})`,
  );
  return res;
}

async function sizes(redleaseEntry: string): Promise<Size[]> {
  const { build } = await import("esbuild");
  const require = createRequire(import.meta.url);
  const one = async (
    name: string,
    entry: string,
    external: string[],
    platform: "node" | "neutral",
    note: string,
  ): Promise<Size> => {
    const r = await build({
      entryPoints: [entry],
      bundle: true,
      minify: true,
      format: "esm",
      platform,
      target: "es2022",
      external,
      write: false,
      metafile: true,
      logLevel: "silent",
    });
    const code = r.outputFiles[0].contents;
    const inputs = Object.entries(r.metafile!.outputs[Object.keys(r.metafile!.outputs)[0]].inputs)
      .map(([file, v]) => ({ file: relative(root, join(root, file)), bytes: v.bytesInOutput }))
      .sort((a, b) => b.bytes - a.bytes);
    return { name, minBytes: code.length, gzipBytes: gzipSync(code, { level: 9 }).length, note, inputs };
  };
  const out: Size[] = [];
  const attempt = async (f: () => Promise<Size>, name: string) => {
    try {
      out.push(await f());
    } catch (e) {
      console.error(`  size of ${name}: ${String(e).slice(0, 300)}`);
    }
  };
  await attempt(() => one("redlease", redleaseEntry, ["redis"], "neutral", "mod.ts, external redis"), "redlease");
  await attempt(
    () =>
      one(
        "redlock",
        require.resolve("redlock"),
        ["ioredis"],
        "node",
        "external ioredis; node-abort-controller bundled",
      ),
    "redlock",
  );
  await attempt(
    () => one("sesame", require.resolve("@sesamecare-oss/redlock"), ["ioredis"], "node", "external ioredis"),
    "sesame",
  );
  await attempt(
    () => one("semaphore", require.resolve("redis-semaphore"), ["ioredis"], "node", "external ioredis; debug bundled"),
    "semaphore",
  );
  return out;
}

async function bundleForWorkers(out: string): Promise<{ file: string; bytes: number }> {
  // One build of the working tree for the whole run (others may be editing src/ meanwhile), as the package ships it.
  mkdirSync(TMP, { recursive: true });
  const file = join(TMP, `redlease-${out}.mjs`);
  return { file, bytes: await bundleRedlease(root, file) };
}

function gitState() {
  const git = (...args: string[]) => {
    try {
      return execFileSync("git", args, { cwd: root, encoding: "utf8" }).trim();
    } catch {
      return "";
    }
  };
  const dirty = git("status", "--porcelain", "--", "mod.ts", "src", "lua").split("\n").filter(Boolean);
  return { head: git("rev-parse", "--short", "HEAD"), dirtyCore: dirty };
}

// ---------------------------------------------------------------------------------------------------------------

/** `--render <results.json>`: write the markdown and SVG again from a results file (no measuring). */
function rerender(file: string): void {
  const run = JSON.parse(readFileSync(file, "utf8")) as Run;
  const { markdown, svg, summarySvg } = render(run);
  const base = file.replace(/\.json$/, "");
  writeFileSync(`${base}.md`, markdown);
  if (svg) writeFileSync(`${base}-b3.svg`, svg);
  if (summarySvg) writeFileSync(`${base}-summary.svg`, summarySvg);
  console.log(`wrote ${base}.md${svg ? `, ${base}-b3.svg` : ""}${summarySvg ? `, ${base}-summary.svg` : ""}`);
}

async function main() {
  const r = process.argv.indexOf("--render");
  if (r > 0) return rerender(process.argv[r + 1]);
  const o = parseArgs(process.argv.slice(2));
  const vs = variants(o.only);
  if (vs.length === 0) throw new Error(`--only ${o.only?.join(",")} matches no library (${LIBS.join(", ")})`);
  const setLibs = [...PERMIT_LIBS, ...WEIGHTED_LIBS];
  const libs = [...new Set(vs.map((v) => v.lib))].filter((l) => !FLOORS.includes(l) && !setLibs.includes(l)); // B1, B2, B5
  const b6vs = vs.filter((v) => PERMIT_LIBS.includes(v.lib)); // B6 only
  const b7vs = vs.filter((v) => WEIGHTED_LIBS.includes(v.lib)); // B7 only
  const b3vs = vs.filter((v) => !UNCONTENDED_ONLY.includes(v.lib) && !setLibs.includes(v.lib)); // B1/B2 only
  const poolLibs = [...new Set(b3vs.map((v) => v.lib))];
  const permitLibs = [...new Set(b6vs.map((v) => v.lib))];
  const weightedLibs = [...new Set(b7vs.map((v) => v.lib))];
  const t0 = performance.now();
  const cmdline = `node --import tsx bench/run.ts ${process.argv.slice(2).join(" ")}`.trim();

  let server: Server | undefined;
  let pool: Worker[] = [];
  const cleanupSync = () => {
    killAllChildren();
    server?.killSync();
  };
  process.once("exit", cleanupSync);
  const onSignal = (sig: string) => {
    console.error(`\n${sig}: stopping workers and redis-server`);
    cleanupSync();
    process.exit(130);
  };
  process.once("SIGINT", () => onSignal("SIGINT"));
  process.once("SIGTERM", () => onSignal("SIGTERM"));

  const run: Run = {
    date: new Date().toISOString(),
    command: cmdline,
    env: {
      node: process.version,
      redis: "",
      cpus: availableParallelism(),
      cpu: cpus()[0]?.model ?? "?",
      git: gitState(),
      loadAvg: { start: load3() } as Record<string, number[]>,
    },
    config: {
      reps: o.reps,
      w2Reps: o.w2Reps,
      uncReps: o.uncReps,
      ws: o.ws,
      b1Ms: o.b1Ms,
      b2Ms: o.b2Ms,
      b2Loops: o.b2Loops,
      b3Ms: o.b3Ms,
      b3WarmMs: o.b3WarmMs,
      probeCycles: o.probeCycles,
      quick: o.quick,
      pauseMs: o.pause,
    },
    variants: vs,
    unc: [],
    b3: [],
    b6: [],
    b7: [],
    cold: [],
    sizes: [],
    errors: [],
    durationS: 0,
    phaseS: {},
  };

  try {
    server = await startRedis([], { label: "bench" });
    run.env.redis = server.version;
    const admin = createClient({ url: server.url });
    admin.on("error", () => {});
    await admin.connect();
    const b = await bundleForWorkers(o.out);
    const url = pathToFileURL(b.file).href;
    console.log(
      `redis-server ${server.version} on 127.0.0.1:${server.port} (pid ${server.pid}); node ${process.version}; ` +
        `${availableParallelism()} CPUs (${run.env.cpu}); git ${run.env.git.head}` +
        (run.env.git.dirtyCore.length ? ` + ${run.env.git.dirtyCore.length} uncommitted core files` : "") +
        `; load average ${load3().join(" ")}`,
    );
    console.log(
      `redlease under test: the package as built (its tsup.config.ts; dist/mod.js and the shared chunks: ${b.bytes} bytes) → ${
        relative(root, b.file)
      } (kept)\n`,
    );

    const phase = (name: string) => {
      run.env.loadAvg[name] = load3();
      run.phaseS[name] = Math.round((performance.now() - t0) / 1000);
    };
    if (o.phases.includes("b1")) {
      phase("b1");
      console.log(`B1/B2 uncontended (fresh process per library; B1 ${o.b1Ms} ms, B2 ${o.b2Loops} loops ${o.b2Ms} ms)`);
      for (let rep = 0; rep < o.uncReps; rep++) {
        for (const lib of rotate(libs, rep)) {
          try {
            run.unc.push(await uncontended(o, server, admin, lib, rep, url));
          } catch (e) {
            console.error(`  ${lib} B1/B2 rep ${rep}: ${String(e)}`);
            run.errors.push(`B1/B2 ${lib} rep ${rep}: ${String(e)}`);
          }
        }
      }
    }

    if (o.phases.includes("b3") && b3vs.length) {
      phase("b3");
      const maxW = Math.max(...o.ws);
      console.log(`\nB3 contended (one name, 1 ms critical section, ${o.b3Ms} ms window, pool of ${maxW} processes)`);
      const tp = performance.now();
      pool = await spawnPool(maxW, url, poolLibs);
      console.log(`  pool of ${maxW} worker processes ready in ${((performance.now() - tp) / 1000).toFixed(1)} s`);
      // Unmeasured pass: every worker runs every variant once at W = max, so that no measured round pays for a
      // library's first use (JIT, lazily created objects) in a process.
      const tw = performance.now();
      for (const v of b3vs) {
        try {
          if (v.lib !== "ring") await warmInPairs(o, server, pool, v, o.quick ? 1_000 : 2_000);
          await round({ ...o, b3Ms: o.quick ? 300 : 800 }, server, admin, pool, v, maxW, -1, true);
        } catch (e) {
          console.error(`  warm-up ${v.id}: ${String(e)}`);
        }
      }
      console.log(
        `  warm-up pass (every variant in pairs, then at W=${maxW}; unmeasured) took ${
          ((performance.now() - tw) / 1000).toFixed(1)
        } s`,
      );
      const b3Reps = (W: number) => W === 2 ? o.w2Reps : o.reps;
      const most = Math.max(...o.ws.map(b3Reps));
      for (let rep = 0; rep < most; rep++) {
        console.log(`  run ${rep + 1}/${most}`);
        for (const W of o.ws) {
          if (rep >= b3Reps(W)) continue;
          for (const v of rotate(b3vs, rep)) {
            try {
              run.b3.push(await round(o, server, admin, pool, v, W, rep));
            } catch (e) {
              console.error(`  ${v.id} W=${W} rep ${rep}: ${String(e)}`);
              run.errors.push(`B3 ${v.id} W=${W} rep ${rep}: ${String(e)}`);
              // The pool's state is unknown: replace it.
              await Promise.all(pool.map((w) => w.stop()));
              pool = await spawnPool(maxW, url, poolLibs);
            }
          }
        }
      }
      await Promise.all(pool.map((w) => w.stop()));
      pool = [];
    }

    // B6 and B7: rounds at every W over one pool of workers for the permit libraries `libs`, after a warm-up each.
    const permitPhase = async (
      redis: Server,
      id: "b6" | "b7",
      vs: Variant[],
      libs: typeof permitLibs,
      title: string,
    ) => {
      phase(id);
      const maxW = Math.max(...o.ws);
      console.log(title);
      pool = await spawnPool(maxW, url, libs);
      for (const v of vs) {
        try {
          await round({ ...o, b3Ms: o.quick ? 300 : 800 }, redis, admin, pool, v, maxW, -1, true);
        } catch (e) {
          console.error(`  warm-up ${v.id}: ${String(e)}`);
        }
      }
      for (let rep = 0; rep < o.reps; rep++) {
        console.log(`  run ${rep + 1}/${o.reps}`);
        for (const W of o.ws) {
          for (const v of rotate(vs, rep)) {
            try {
              run[id]!.push(await round(o, redis, admin, pool, v, W, rep));
            } catch (e) {
              console.error(`  ${v.id} W=${W} rep ${rep}: ${String(e)}`);
              run.errors.push(`${id.toUpperCase()} ${v.id} W=${W} rep ${rep}: ${String(e)}`);
              await Promise.all(pool.map((w) => w.stop()));
              pool = await spawnPool(maxW, url, libs);
            }
          }
        }
      }
      await Promise.all(pool.map((w) => w.stop()));
      pool = [];
    };
    if (o.phases.includes("b6") && b6vs.length) {
      await permitPhase(
        server,
        "b6",
        b6vs,
        permitLibs,
        `\nB6 permits (${PERMITS} permits of one name, 1 ms critical section, ${o.b3Ms} ms window)`,
      );
    }
    if (o.phases.includes("b7") && b7vs.length) {
      await permitPhase(
        server,
        "b7",
        b7vs,
        weightedLibs,
        `\nB7 weighted permits (${PERMITS} permits of one name, weights ${HEAVY} and 1, 1 ms critical section, ${o.b3Ms} ms window)`,
      );
    }

    if (o.phases.includes("b5")) {
      phase("b5");
      console.log(`\nB5 cold start (fresh process each; SCRIPT FLUSH before each)`);
      const which: [string, LibId, string, boolean][] = [];
      for (const lib of libs) {
        if (UNCONTENDED_ONLY.includes(lib)) continue;
        which.push([lib, lib, url, false]);
        if (lib !== "redlease") continue;
        const src = pathToFileURL(join(root, "mod.ts")).href;
        which.push(["redlease (tsx)", lib, src, false], ["redlease HTTP (tsx)", lib, src, true]);
      }
      for (let rep = 0; rep < o.uncReps; rep++) {
        for (const [w, lib, u, http] of rotate(which, rep)) {
          try {
            run.cold.push(await cold(server, admin, w, lib, u, rep, http));
          } catch (e) {
            console.error(`  cold ${w} rep ${rep}: ${String(e)}`);
            run.errors.push(`B5 ${w} rep ${rep}: ${String(e)}`);
          }
        }
      }
      run.sizes = (await sizes(join(root, "mod.ts"))).filter((s) => libs.includes(s.name as LibId));
      for (const s of run.sizes) {
        console.log(`  ${s.name.padEnd(10)} ${s.minBytes} B min, ${s.gzipBytes} B min+gz (${s.note})`);
      }
    }

    await admin.quit();
  } finally {
    for (const w of pool) await w.stop();
    killAllChildren();
    await server?.stop();
  }

  run.env.loadAvg.end = load3();
  run.durationS = Math.round((performance.now() - t0) / 1000);
  const { markdown, svg, summarySvg } = render(run);
  mkdirSync(RESULTS, { recursive: true });
  const base = join(RESULTS, o.out);
  writeFileSync(`${base}.json`, JSON.stringify(run, null, 2) + "\n");
  writeFileSync(`${base}.md`, markdown);
  if (svg) writeFileSync(`${base}-b3.svg`, svg);
  if (summarySvg) writeFileSync(`${base}-summary.svg`, summarySvg);
  console.log("\n" + markdown);
  console.log(
    `wrote ${relative(root, base)}.md, .json${svg ? `, -b3.svg` : ""}${
      summarySvg ? `, -summary.svg` : ""
    } (run took ${run.durationS} s; ` +
      `load average ${load3().join(" ")})`,
  );
}

await main().catch((e) => {
  console.error(e);
  killAllChildren();
  process.exitCode = 1;
});
