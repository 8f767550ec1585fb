// Aggregation (medians over repetitions, ratios against the raw baseline of the same repetition) and rendering of
// the benchmark results: a markdown report, an SVG chart of B3 and an SVG summary of every B-figure per library.
import { type LibId, PERMITS } from "./_libs.ts";
import { type CommandCounts, describeCounts, median, r2, r3 } from "./_stats.ts";

export interface Variant {
  id: string;
  lib: LibId;
  tuned: boolean;
  label: string;
  settings: string;
}

interface Unc {
  cycles: number;
  cyclesPerSec: number;
  p50Ms: number;
  p99Ms: number;
  commands: CommandCounts;
  redisCpuUs: number;
  clientCpuUs: number;
}

export interface UncRep {
  lib: LibId;
  rep: number;
  loadAvg: number[];
  b1: Unc & { roundTrips: number; wireCommands: Record<string, number> };
  b2: Unc;
}

export interface B3Rep {
  variant: string;
  lib: LibId;
  W: number;
  rep: number;
  loadAvg: number[];
  acquisitions: number;
  acquisitionsTotal: number;
  acqPerSec: number;
  gapP50Ms: number;
  gapP99Ms: number;
  gapMaxMs: number;
  gapSplitP50Ms: { releaseToWrite: number; writeToRead: number; readToAcquired: number };
  crossWorkerHandoffs: number;
  sameWorkerShare: number;
  minPerWorker: number;
  maxPerWorker: number;
  fairness: number;
  failures: number;
  warmFailures: number;
  firstError?: string;
  waitP50Ms: number;
  waitP99Ms: number;
  waitMaxMs: number;
  holdP50Ms: number;
  overlaps: number;
  commands: CommandCounts;
  redisCpuUs: number;
  clientCpuUs: number;
  /** Voluntary context switches of the workers per acquisition (absent in results from before it was counted). */
  clientWakeups?: number;
  maxClockOffsetMs: number;
}

export interface ColdRep {
  which: string;
  lib: LibId;
  rep: number;
  bootMs: number;
  importClientMs: number;
  importMs: number;
  connectMs: number;
  acquireMs: number;
  releaseMs: number;
  toFirstLeaseMs: number;
  connectsToLease: number;
  roundTripsToLease: number;
  commandsToLease: Record<string, number>;
  /** Of those, the round trips of the first acquire alone (from the client being connected to the lease). */
  roundTripsAcquire?: number;
  roundTripsWithRelease: number;
  commandsWithRelease: Record<string, number>;
}

export interface Size {
  name: string;
  minBytes: number;
  gzipBytes: number;
  note: string;
  inputs: { file: string; bytes: number }[];
}

export interface Run {
  date: string;
  command: string;
  env: {
    node: string;
    redis: string;
    cpus: number;
    cpu: string;
    git: { head: string; dirtyCore: string[] };
    loadAvg: Record<string, number[]>;
  };
  config: Record<string, unknown>;
  variants: Variant[];
  unc: UncRep[];
  b3: B3Rep[];
  /** B6: permits (absent in results from before it was measured). */
  b6?: B3Rep[];
  cold: ColdRep[];
  sizes: Size[];
  errors: string[];
  durationS: number;
  phaseS: Record<string, number>;
  summary?: unknown;
}

// ---------------------------------------------------------------------------------------------------------------
// Aggregation

const med = <T>(xs: T[], f: (x: T) => number) => median(xs.map(f));
const fmt = (x: number, digits = 2) =>
  Number.isFinite(x)
    ? (Math.abs(x) >= 100 ? Math.round(x).toLocaleString("en-US") : String(Number(x.toFixed(digits))))
    : "–";
const ratio = (x: number) => (Number.isFinite(x) ? `${x.toFixed(2)}×` : "–");
const pctS = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(0)} %` : "–");

/** Per repetition: value / raw value of the same repetition [and W] (NaN where the repetition has no raw). */
function perRunRatios<T extends { rep: number }>(
  rows: T[],
  raws: T[],
  f: (x: T) => number,
  same: (a: T, b: T) => boolean,
) {
  return rows.map((x) => {
    const base = raws.find((r) => r.rep === x.rep && same(x, r));
    return base ? f(x) / f(base) : NaN;
  });
}

/** Median over repetitions of (value / raw value of the same repetition [and W]). */
function ratioToRaw<T extends { rep: number }>(
  rows: T[],
  raws: T[],
  f: (x: T) => number,
  same: (a: T, b: T) => boolean,
) {
  return median(perRunRatios(rows, raws, f, same));
}

/** Median per command of calls/op, for the breakdown column. */
function medianCounts(cs: CommandCounts[]): CommandCounts {
  const names = new Set(cs.flatMap((c) => Object.keys(c.perOp)));
  const perOp: CommandCounts["perOp"] = {};
  for (const n of names) {
    perOp[n] = {
      calls: r3(median(cs.map((c) => c.perOp[n]?.calls ?? 0))),
      client: cs.find((c) => c.perOp[n])!.perOp[n].client,
      usecPerOp: r3(median(cs.map((c) => c.perOp[n]?.usecPerOp ?? 0))),
    };
  }
  const sorted = Object.fromEntries(Object.entries(perOp).sort((a, b) => b[1].calls - a[1].calls));
  return {
    clientPerOp: r3(median(cs.map((c) => c.clientPerOp))),
    totalPerOp: r3(median(cs.map((c) => c.totalPerOp))),
    luaPerOp: r3(median(cs.map((c) => c.luaPerOp))),
    clientUsecPerOp: r2(median(cs.map((c) => c.clientUsecPerOp))),
    perOp: sorted,
  };
}

interface B3Agg {
  variant: Variant;
  W: number;
  n: number;
  acqPerSec: number;
  xRaw: number;
  gapP50Ms: number;
  gapP99Ms: number;
  handoffs: number;
  split: { releaseToWrite: number; writeToRead: number; readToAcquired: number };
  sameWorkerShare: number;
  fairness: number;
  minPerWorker: number;
  maxPerWorker: number;
  failures: number;
  waitP99Ms: number;
  waitMaxMs: number;
  holdP50Ms: number;
  overlaps: number;
  commands: CommandCounts;
  redisCpuUs: number;
  clientCpuUs: number;
  clientWakeups: number;
  acqPerSecRuns: number[];
}

function aggregateB3(run: Run, reps: B3Rep[] = run.b3): B3Agg[] {
  const out: B3Agg[] = [];
  const ws = [...new Set(reps.map((r) => r.W))].sort((a, b) => a - b);
  for (const v of run.variants) {
    for (const W of ws) {
      const rows = reps.filter((r) => r.variant === v.id && r.W === W);
      if (!rows.length) continue;
      const raws = reps.filter((r) => r.variant === "raw");
      out.push({
        variant: v,
        W,
        n: rows.length,
        acqPerSec: med(rows, (r) => r.acqPerSec),
        xRaw: ratioToRaw(rows, raws, (r) => r.acqPerSec, (a, b) => a.W === b.W),
        gapP50Ms: med(rows, (r) => r.gapP50Ms),
        gapP99Ms: med(rows, (r) => r.gapP99Ms),
        handoffs: med(rows, (r) => r.crossWorkerHandoffs),
        split: {
          releaseToWrite: med(rows, (r) => r.gapSplitP50Ms.releaseToWrite),
          writeToRead: med(rows, (r) => r.gapSplitP50Ms.writeToRead),
          readToAcquired: med(rows, (r) => r.gapSplitP50Ms.readToAcquired),
        },
        sameWorkerShare: med(rows, (r) => r.sameWorkerShare),
        fairness: med(rows, (r) => r.fairness),
        minPerWorker: med(rows, (r) => r.minPerWorker),
        maxPerWorker: med(rows, (r) => r.maxPerWorker),
        failures: rows.reduce((s, r) => s + r.failures, 0),
        waitP99Ms: med(rows, (r) => r.waitP99Ms),
        waitMaxMs: Math.max(...rows.map((r) => r.waitMaxMs)),
        holdP50Ms: med(rows, (r) => r.holdP50Ms),
        overlaps: rows.reduce((s, r) => s + r.overlaps, 0),
        commands: medianCounts(rows.map((r) => r.commands)),
        redisCpuUs: med(rows, (r) => r.redisCpuUs),
        clientCpuUs: med(rows, (r) => r.clientCpuUs),
        clientWakeups: med(rows, (r) => r.clientWakeups ?? NaN),
        acqPerSecRuns: rows.map((r) => r.acqPerSec),
      });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Markdown

function table(head: string[], rows: string[][]): string {
  const cell = (c: string) => c.replaceAll("|", "\\|"); // e.g. commandstats' "client|setinfo"
  return [
    `| ${head.map(cell).join(" | ")} |`,
    `|${head.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${r.map(cell).join(" | ")} |`),
  ].join("\n");
}

/**
 * How many B3 runs W = 2 had, when that differs from the other W's (--w2-reps); undefined otherwise, and for runs
 * from before --w2-reps, which had as many at every W.
 */
function w2Runs(run: Run): number | undefined {
  const n = run.config.w2Reps as number | undefined;
  return n !== undefined && n !== run.config.reps && run.b3.some((r) => r.W === 2) ? n : undefined;
}

/**
 * The markdown report, `svg` = the B3 chart (`<out>-b3.svg`: throughput and gap against W) and `summarySvg` = bars of
 * every B-figure for each library (`<out>-summary.svg`); an SVG is undefined when the run has nothing for it.
 */
export function render(run: Run): { markdown: string; svg: string | undefined; summarySvg: string | undefined } {
  const md: string[] = [];
  const reps = (run.config.reps as number) ?? 1;
  const w2 = w2Runs(run);
  const la = run.env.loadAvg;
  md.push(`# redlease benchmark — ${run.date}`);
  md.push("");
  md.push(
    `Command: \`${run.command}\` (${run.durationS} s). Node ${run.env.node}, Redis ${run.env.redis} (throwaway ` +
      `server, loopback), ${run.env.cpus} CPUs (${run.env.cpu}). redlease: git ${run.env.git.head}` +
      (run.env.git.dirtyCore.length
        ? ` with uncommitted changes in ${run.env.git.dirtyCore.length} core files (working tree as bundled at the start)`
        : "") +
      `.`,
  );
  md.push(
    `Phases started at (s): ${Object.entries(run.phaseS).map(([k, v]) => `${k} ${v}`).join(", ")}. ` +
      `Load average (1/5/15 min; it includes this benchmark's own worker processes): ` +
      Object.entries(la).map(([k, v]) => `${k} ${v.join(" / ")}`).join("; ") +
      `. Each figure is the median of ` +
      [
        run.unc.length || run.cold.length ? `${run.config.uncReps} runs (B1, B2, B5)` : "",
        run.b3.length ? `${reps} runs (B3${w2 ? `; ${w2} at W = 2` : ""})` : "",
        run.b6?.length ? `${reps} runs (B6)` : "",
      ].filter(Boolean).join(" or ") +
      `; ×raw = median over runs of (figure ÷ raw node-redis figure of the same run).` +
      (run.config.pauseMs ? ` Diagnostic: B3 workers paused ${run.config.pauseMs} ms after each release.` : ""),
  );
  md.push("");

  // ---- B1 / B2
  const libsU = [...new Set(run.unc.map((u) => u.lib))];
  const rawU = run.unc.filter((u) => u.lib === "raw");
  const uncAgg = libsU.map((lib) => {
    const rows = run.unc.filter((u) => u.lib === lib);
    return {
      lib,
      rows,
      b1: med(rows, (r) => r.b1.cyclesPerSec),
      b1x: ratioToRaw(rows, rawU, (r) => r.b1.cyclesPerSec, () => true),
      b1p50: med(rows, (r) => r.b1.p50Ms),
      b1p99: med(rows, (r) => r.b1.p99Ms),
      rt: med(rows, (r) => r.b1.roundTrips),
      b2: med(rows, (r) => r.b2.cyclesPerSec),
      b2x: ratioToRaw(rows, rawU, (r) => r.b2.cyclesPerSec, () => true),
      b2p50: med(rows, (r) => r.b2.p50Ms),
      b2p99: med(rows, (r) => r.b2.p99Ms),
      b1c: medianCounts(rows.map((r) => r.b1.commands)),
      b2c: medianCounts(rows.map((r) => r.b2.commands)),
      b1redis: med(rows, (r) => r.b1.redisCpuUs),
      b1client: med(rows, (r) => r.b1.clientCpuUs),
      b2redis: med(rows, (r) => r.b2.redisCpuUs),
      b2client: med(rows, (r) => r.b2.clientCpuUs),
      wire: rows[0].b1.wireCommands,
    };
  });
  const label = (lib: string) =>
    run.variants.find((v) => v.lib === lib && !v.tuned)?.label.replace(/ \(default retry\)/, "") ?? lib;
  if (uncAgg.length) {
    md.push(`## B1 sequential and B2 concurrent uncontended cycles (acquire + release, fresh names)`);
    md.push("");
    md.push(
      `One fresh worker process per library and run; B1 = one loop for ${run.config.b1Ms} ms, B2 = ` +
        `${run.config.b2Loops} loops on one client for ${run.config.b2Ms} ms. Retry settings do not come into play ` +
        `without contention, so the peers run once, with their defaults. Round trips per cycle are counted at the ` +
        `client socket over ${run.config.probeCycles} extra sequential cycles.`,
    );
    md.push("");
    md.push(table(
      [
        "library",
        "B1 cycles/s",
        "×raw",
        "B1 cycle p50 / p99 ms",
        "round trips / cycle",
        "B2 cycles/s",
        "×raw",
        "B2 cycle p50 / p99 ms",
      ],
      uncAgg.map((u) => [
        label(u.lib),
        fmt(u.b1),
        ratio(u.b1x),
        `${fmt(u.b1p50, 3)} / ${fmt(u.b1p99, 3)}`,
        fmt(u.rt),
        fmt(u.b2),
        ratio(u.b2x),
        `${fmt(u.b2p50)} / ${fmt(u.b2p99)}`,
      ]),
    ));
    md.push("");
  }

  // ---- B3
  const b3 = aggregateB3(run);
  const ws = [...new Set(b3.map((r) => r.W))].sort((a, b) => a - b);
  if (b3.length) {
    md.push(`## B3 contended handoff: W worker processes, one name, 1 ms critical section`);
    md.push("");
    md.push(
      `${run.config.b3Ms} ms measured window per (library, W) after a ${run.config.b3WarmMs} ms contended warm-up; ` +
        `acquisitions/s count grants inside the window. Gap = next holder's acquire resolved − previous holder's ` +
        `release call, for successions between different workers, on one clock (each worker's wall clock is ` +
        `corrected to the parent's through CLOCK_MONOTONIC). Same-worker = share of successions where the releasing ` +
        `worker took the lock again. Gap split (medians, so they need not add up): release() called → release ` +
        `command written (releaser's client code) + written → the reply or message that unblocked the next holder ` +
        `read from its socket (Redis, loopback, OS scheduling, and for pollers the poll delay) + read → acquire ` +
        `resolved (next holder's client code). n = cross-worker successions per run. Fairness = min/max acquisitions per worker. Failed = acquisitions that ran out ` +
        `of the 10 s budget (including the tail after the window); wait = acquire call → resolved.`,
    );
    md.push("");
    const rows: string[][] = [];
    for (const a of b3) {
      const w2 = b3.find((x) => x.variant.id === a.variant.id && x.W === ws[0]);
      rows.push([
        a.variant.label,
        String(a.W),
        fmt(a.acqPerSec),
        ratio(a.xRaw),
        a.W === ws[0] || !w2 ? "" : ratio(a.acqPerSec / w2.acqPerSec),
        `${fmt(a.gapP50Ms, 3)} / ${fmt(a.gapP99Ms)} (${fmt(a.handoffs)})`,
        `${fmt(a.split.releaseToWrite, 3)} + ${fmt(a.split.writeToRead, 3)} + ${fmt(a.split.readToAcquired, 3)}`,
        pctS(a.sameWorkerShare),
        `${fmt(a.fairness)} (${fmt(a.minPerWorker)}–${fmt(a.maxPerWorker)})`,
        String(a.failures),
        `${fmt(a.waitP99Ms)} / ${fmt(a.waitMaxMs)}`,
      ]);
    }
    md.push(table(
      [
        "library",
        "W",
        "acq/s",
        "×raw",
        `÷ W=${ws[0]}`,
        "gap p50 / p99 ms (n)",
        "gap split p50 ms",
        "same-worker",
        "fairness (min–max)",
        "failed",
        "wait p99 / max ms",
      ],
      rows,
    ));
    md.push("");
    const overl = b3.filter((a) => a.overlaps > 0);
    if (overl.length) {
      md.push(`Overlapping holds seen: ${overl.map((a) => `${a.variant.id} W=${a.W}: ${a.overlaps}`).join(", ")}.`);
      md.push("");
    }
  }

  // ---- B6
  const b6 = run.b6?.length ? aggregateB3(run, run.b6) : [];
  if (b6.length) {
    const w6 = [...new Set(b6.map((r) => r.W))].sort((a, b) => a - b);
    md.push(`## B6 permits: W worker processes, ${PERMITS} permits of one name, 1 ms critical section`);
    md.push("");
    md.push(
      `As B3, with every worker taking one of ${PERMITS} permits of one name (a counting semaphore) instead of the ` +
        `lock: acquisitions/s inside the ${run.config.b3Ms} ms window, fairness = min/max acquisitions per worker, ` +
        `Redis commands per acquisition (sent by the client / in all, Lua's included), Redis CPU per acquisition, ` +
        `failed acquisitions (the 10 s budget ran out), wait = acquire call → resolved, and "> n" = acquisitions ` +
        `made while ${PERMITS} others held (must be 0; on the parent's clock, so a holder's release and the next ` +
        `grant within the clock correction may show).`,
    );
    md.push("");
    const rows6: string[][] = [];
    for (const a of b6) {
      const first = b6.find((x) => x.variant.id === a.variant.id && x.W === w6[0]);
      rows6.push([
        a.variant.label,
        String(a.W),
        fmt(a.acqPerSec),
        a.W === w6[0] || !first ? "" : ratio(a.acqPerSec / first.acqPerSec),
        `${fmt(a.fairness)} (${fmt(a.minPerWorker)}–${fmt(a.maxPerWorker)})`,
        `${fmt(a.commands.clientPerOp)} / ${fmt(a.commands.totalPerOp)}`,
        fmt(a.redisCpuUs, 1),
        String(a.failures),
        `${fmt(a.waitP99Ms)} / ${fmt(a.waitMaxMs)}`,
        String(a.overlaps),
      ]);
    }
    md.push(table(
      [
        "library",
        "W",
        "acq/s",
        `÷ W=${w6[0]}`,
        "fairness (min–max)",
        "commands / acq (client / all)",
        "Redis CPU µs / acq",
        "failed",
        "wait p99 / max ms",
        "> n",
      ],
      rows6,
    ));
    md.push("");
  }

  // ---- B4
  if (uncAgg.length || b3.length) {
    md.push(`## B4 Redis work per acquisition`);
    md.push("");
    md.push(
      `From \`INFO commandstats\` and \`INFO cpu\` deltas around each measured window (\`CONFIG RESETSTAT\` on a ` +
        `separate admin connection, whose INFO/CONFIG calls are excluded). Redis 7.0 commandstats counts a command ` +
        `whether a client sent it or a Lua script called it, so they are told apart by library: the commands each ` +
        `library sends itself are known from its source (redlease: EVALSHA, EVAL after NOSCRIPT, SUBSCRIBE/UNSUBSCRIBE; raw: ` +
        `SET, EVALSHA, SCRIPT LOAD; redlock and @sesamecare-oss/redlock: EVALSHA, EVAL after NOSCRIPT; ` +
        `redis-semaphore: SET, EVALSHA, EVAL), and none of them is ever called by that library's scripts, so ` +
        `client = the sum of those and Lua-internal = total − client. The split is cross-checked in B1 against the ` +
        `commands parsed from the bytes each client writes to its socket ("wire"). Per acquisition = over every ` +
        `acquisition of the window including the tail. Redis CPU = used_cpu_user + used_cpu_sys of redis-server; ` +
        `client CPU = process.cpuUsage() of the benchmark process(es); client wake-ups (B3) = voluntary context ` +
        `switches of the worker processes (process.resourceUsage()): each is a process woken from a wait by a reply, ` +
        `a message or a timer.`,
    );
    md.push("");
    const rows: string[][] = [];
    for (const u of uncAgg) {
      const wire = Object.entries(u.wire).map(([k, v]) => `${k} ${v}`).join(", ");
      rows.push([
        label(u.lib),
        "B1 (W=1)",
        fmt(u.b1c.clientPerOp),
        fmt(u.b1c.totalPerOp),
        fmt(u.b1c.luaPerOp),
        fmt(u.b1redis, 1),
        fmt(u.b1client, 1),
        "",
        `${describeCounts(u.b1c)}; wire: ${wire}`,
      ]);
      rows.push([
        label(u.lib),
        "B2 (64 loops)",
        fmt(u.b2c.clientPerOp),
        fmt(u.b2c.totalPerOp),
        fmt(u.b2c.luaPerOp),
        fmt(u.b2redis, 1),
        fmt(u.b2client, 1),
        "",
        "",
      ]);
    }
    for (const a of b3) {
      rows.push([
        a.variant.label,
        `B3 W=${a.W}`,
        fmt(a.commands.clientPerOp),
        fmt(a.commands.totalPerOp),
        fmt(a.commands.luaPerOp),
        fmt(a.redisCpuUs, 1),
        fmt(a.clientCpuUs, 1),
        fmt(a.clientWakeups),
        describeCounts(a.commands),
      ]);
    }
    md.push(table(
      [
        "library",
        "phase",
        "client cmds",
        "total incl. Lua",
        "Lua-internal",
        "Redis CPU µs",
        "client CPU µs",
        "client wake-ups",
        "per-command calls / acquisition",
      ],
      rows,
    ));
    md.push("");
  }

  // ---- B5
  if (run.cold.length) {
    md.push(`## B5 cold start and size`);
    md.push("");
    md.push(
      `A fresh process per library and run, timed from just before the dynamic import of its client (node-redis or ` +
        `ioredis, imported first and timed apart) and the library (Node + tsx boot before that is not included) to ` +
        `the first lease on a new connection; \`SCRIPT FLUSH\` before ` +
        `each, so first-use script loading is included. "redlease" imports an esbuild bundle of mod.ts (what a ` +
        `package would ship); "redlease (tsx)" imports mod.ts through tsx. Round trips counted at the client socket ` +
        `(TCP connect not included in round trips; the client's own handshake, node-redis's CLIENT SETINFO, is), in ` +
        `brackets those of the first acquire alone. "redlease HTTP (tsx)": mod.ts and the HTTP adapter through tsx, ` +
        `a new \`upstash()\` driver through harness/http_bridge.ts (started before timing; no client to import or ` +
        `connect); its round trips are HTTP requests, one command each. Size: esbuild bundle, minified, ESM, client external, gzip -9 ` +
        `(node:zlib).`,
    );
    md.push("");
    const whiches = [...new Set(run.cold.map((c) => c.which))];
    const rows = whiches.map((w) => {
      const cs = run.cold.filter((c) => c.which === w);
      const lib = cs[0].lib;
      const size = w === lib ? run.sizes.find((s) => s.name === lib) : undefined;
      const cmds = Object.entries(cs[0].commandsToLease).map(([k, v]) => `${k}×${v}`).join(" ");
      return [
        w === lib ? label(lib) : w,
        fmt(med(cs, (c) => c.importClientMs), 1),
        fmt(med(cs, (c) => c.importMs), 1),
        fmt(med(cs, (c) => c.connectMs), 1),
        fmt(med(cs, (c) => c.acquireMs), 1),
        fmt(med(cs, (c) => c.toFirstLeaseMs), 1),
        `${fmt(med(cs, (c) => c.connectsToLease))} + ${fmt(med(cs, (c) => c.roundTripsToLease))}` +
        (cs.every((c) => c.roundTripsAcquire !== undefined) ? ` (${fmt(med(cs, (c) => c.roundTripsAcquire!))})` : ""),
        cmds,
        size ? `${size.gzipBytes.toLocaleString("en-US")} (${size.minBytes.toLocaleString("en-US")} min)` : "",
      ];
    });
    md.push(table(
      [
        "library",
        "import client ms",
        "import library ms",
        "connect ms",
        "first acquire ms",
        "import → first lease ms",
        "connects + round trips (of which the first acquire)",
        "commands to first lease",
        "min+gz bytes",
      ],
      rows,
    ));
    md.push("");
    for (const s of run.sizes) {
      md.push(
        `- ${s.name}: ${s.note}; largest inputs: ${
          s.inputs.slice(0, 4).map((i) => `${i.file} ${i.bytes} B`).join(", ")
        }`,
      );
    }
    md.push("");
  }

  // ---- Targets (issue 10)
  const tg = targets(run, uncAgg, b3, ws, label);
  md.push(`## redlease against its targets (issue 10)`);
  md.push("");
  md.push(
    `Every ratio is taken within one run (same server, same minute: redlease ÷ raw, ÷ ring or ÷ the best peer of ` +
      `that run, at the same W) and the median over runs is compared with the target; the absolute figures beside ` +
      `it are the medians of the tables above. "not measured": the run lacks the phase, library or variant the ` +
      `target needs (e.g. a quick run with \`--only redlease,ring\`).` +
      (run.config.pauseMs
        ? ` Diagnostic run: the ${run.config.pauseMs} ms pause after each release changes B3, so its rows are not the targets' conditions.`
        : ""),
  );
  md.push("");
  md.push(table(
    ["target", "measured", "met"],
    tg.map((t) => [t.target, t.measured, t.met === undefined ? "not measured" : t.met ? "yes" : "**no**"]),
  ));
  md.push("");
  run.summary = { targets: tg, b3: b3.map((a) => ({ ...a, variant: a.variant.id })) };

  md.push(`## Settings per library`);
  md.push("");
  for (const v of run.variants) md.push(`- **${v.label}**: ${v.settings}`);
  md.push("");
  if (run.errors.length) {
    md.push(`## Errors`);
    md.push("");
    for (const e of run.errors) md.push(`- ${e.replaceAll("\n", " ").slice(0, 400)}`);
    md.push("");
  }
  return {
    markdown: md.join("\n"),
    svg: b3.length ? chart(b3, ws, run) : undefined,
    summarySvg: uncAgg.length || b3.length || run.cold.length ? summaryChart(run, uncAgg, b3, ws, label) : undefined,
  };
}

interface Target {
  target: string;
  measured: string;
  met: boolean | undefined;
}

/** What the targets need of the B1/B2 aggregate (one entry per library). */
interface UncTargetView {
  lib: string;
  rows: UncRep[];
  b1p50: number;
  b2: number;
  b2redis: number;
}

/** The W of issue 10's B3 targets (reported as "not measured" when the run has not got them). */
const TARGET_WS = [2, 8, 32];

/** Issue 10's targets, each against a baseline of the same run; undefined `met` = not measured. */
function targets(
  run: Run,
  unc: UncTargetView[],
  b3: B3Agg[],
  ws: number[],
  label: (lib: string) => string,
): Target[] {
  const out: Target[] = [];
  const push = (target: string, measured: string, met: boolean | undefined) => out.push({ target, measured, met });
  const ok = Number.isFinite;
  /** The median of per-run ratios, and the runs' own ratios when there are several (they can disagree). */
  const judged = (xs: number[]): [number, string] => [
    median(xs),
    xs.filter(ok).length > 1 ? `; per run ${xs.filter(ok).map(ratio).join(", ")}` : "",
  ];

  // ---- B1 / B2 (uncontended) against raw node-redis and the peers
  const rl = unc.find((u) => u.lib === "redlease"), raw = unc.find((u) => u.lib === "raw");
  const fenced = unc.find((u) => u.lib === "fenced"), guarded = unc.find((u) => u.lib === "guarded");
  /**
   * The minimal fenced lease (FENCED_FLOOR) and that lease with the client work of redlease's guarantees
   * (GUARDED_FLOOR) against `base`, and redlease against each, for a figure `f`. `client: false` leaves the second
   * out (a Redis figure: its scripts are the first's).
   */
  const fencedFloor = (base: UncTargetView | undefined, f: (r: UncRep) => number, what = "raw", client = true) => {
    if (!base || !rl) return "";
    const parts: string[] = [];
    if (fenced) {
      const [floor] = judged(perRunRatios(fenced.rows, base.rows, f, () => true));
      const [own] = judged(perRunRatios(rl.rows, fenced.rows, f, () => true));
      parts.push(`the minimal fenced lease is ${ratio(floor)} ${what}, redlease ${ratio(own)} that lease`);
    }
    if (guarded && client) {
      const [floor] = judged(perRunRatios(guarded.rows, base.rows, f, () => true));
      const [own, runs] = judged(perRunRatios(rl.rows, guarded.rows, f, () => true));
      parts.push(
        `with the client work of redlease's guarantees ${ratio(floor)} ${what}, redlease ${ratio(own)} that${runs}`,
      );
    }
    return parts.length ? `; floor: ${parts.join("; ")}` : "";
  };
  const noUnc = (base: string) =>
    !run.unc.length
      ? "– (no B1/B2 in this run)"
      : !rl
      ? "– (no redlease B1/B2 in this run)"
      : `– (no ${base} B1/B2 in this run)`;
  {
    const t = "Redis CPU per uncontended acquire + release (B2, the B4 figure) ≤ 1.5× raw";
    if (rl && raw) {
      const [x, runs] = judged(perRunRatios(rl.rows, raw.rows, (r) => r.b2.redisCpuUs, () => true));
      push(
        t,
        `${ratio(x)} (${fmt(rl.b2redis, 1)} vs ${fmt(raw.b2redis, 1)} µs per cycle${runs}` +
          `${fencedFloor(raw, (r) => r.b2.redisCpuUs, "raw", false)})`,
        ok(x) ? x <= 1.5 : undefined,
      );
    } else push(t, noUnc("raw node-redis"), undefined);
  }
  {
    const t = "B1 cycle p50 ≤ 1.15× raw";
    if (rl && raw) {
      const [x, runs] = judged(perRunRatios(rl.rows, raw.rows, (r) => r.b1.p50Ms, () => true));
      push(
        t,
        `${ratio(x)} (${fmt(rl.b1p50, 3)} vs ${fmt(raw.b1p50, 3)} ms${runs}${fencedFloor(raw, (r) => r.b1.p50Ms)})`,
        ok(x) ? x <= 1.15 : undefined,
      );
    } else push(t, noUnc("raw node-redis"), undefined);
  }
  {
    const t = "B2 cycles/s ≥ every peer library";
    const peers = unc.filter((u) =>
      ![
        "redlease",
        "redlease-io",
        "redlease-events",
        "redlease-otel",
        "redlease-metrics",
        "raw",
        "ring",
        "fifo",
        "fenced",
        "guarded",
        "fairfenced",
      ]
        .includes(u.lib)
    );
    if (rl && peers.length) {
      const best = peers.reduce((a, b) => (b.b2 > a.b2 ? b : a));
      // Per run: redlease ÷ the fastest peer of that run.
      const vsBest = (of: UncTargetView) =>
        judged(of.rows.map((r) => {
          const ps = peers.flatMap((p) => p.rows.filter((q) => q.rep === r.rep).map((q) => q.b2.cyclesPerSec));
          return ps.length ? r.b2.cyclesPerSec / Math.max(...ps) : NaN;
        }));
      const [x, runs] = vsBest(rl);
      // The peers all run on ioredis: the same comparison on their client, beside it.
      const io = unc.find((u) => u.lib === "redlease-io");
      const onIo = io
        ? `; on the peers' client (ioredis): ${ratio(vsBest(io)[0])} the best peer (${fmt(io.b2)} cycles/s)`
        : "";
      const floor = fenced
        ? `; floor: the minimal fenced lease (node-redis) is ${ratio(vsBest(fenced)[0])} the best peer (${
          fmt(fenced.b2)
        } ` +
          `cycles/s), redlease ${
            ratio(judged(perRunRatios(rl.rows, fenced.rows, (r) => r.b2.cyclesPerSec, () => true))[0])
          } that lease`
        : "";
      const withClient = guarded
        ? `; with the client work of redlease's guarantees ${ratio(vsBest(guarded)[0])} the best peer (${
          fmt(guarded.b2)
        } cycles/s), redlease ${
          ratio(judged(perRunRatios(rl.rows, guarded.rows, (r) => r.b2.cyclesPerSec, () => true))[0])
        } that`
        : "";
      push(
        t,
        `${ratio(x)} the best peer (${fmt(rl.b2)} cycles/s vs ${label(best.lib)} ${fmt(best.b2)}${runs}; peers: ` +
          `${peers.map((p) => label(p.lib)).join(", ")}${onIo}${floor}${withClient})`,
        ok(x) ? x >= 1 : undefined,
      );
    } else push(t, noUnc("peer library"), undefined);
  }
  {
    const t = "B2 cycles/s ≥ 0.7× raw";
    if (rl && raw) {
      const [x, runs] = judged(perRunRatios(rl.rows, raw.rows, (r) => r.b2.cyclesPerSec, () => true));
      push(
        t,
        `${ratio(x)} (${fmt(rl.b2)} vs ${fmt(raw.b2)} cycles/s${runs}${fencedFloor(raw, (r) => r.b2.cyclesPerSec)})`,
        ok(x) ? x >= 0.7 : undefined,
      );
    } else push(t, noUnc("raw node-redis"), undefined);
  }

  // ---- The cost of being observed: redlease with an event handler, and with the OpenTelemetry instruments, against
  // redlease without (issue 13: within 5 % of off). Ratios per run, as the other targets.
  for (
    const [lib, what] of [
      ["redlease-events", "an event handler"],
      ["redlease-metrics", "OTel metrics"],
      ["redlease-otel", "OTel metrics and spans"],
    ]
  ) {
    const on = unc.find((u) => u.lib === lib);
    if (!rl || !on) continue;
    const [b1, runs1] = judged(perRunRatios(on.rows, rl.rows, (r) => r.b1.p50Ms, () => true));
    push(
      `B1 cycle p50 with ${what} ≤ 1.05× without`,
      `${ratio(b1)} (${fmt(on.b1p50, 3)} vs ${fmt(rl.b1p50, 3)} ms${runs1})`,
      ok(b1) ? b1 <= 1.05 : undefined,
    );
    const [b2, runs2] = judged(perRunRatios(on.rows, rl.rows, (r) => r.b2.cyclesPerSec, () => true));
    push(
      `B2 cycles/s with ${what} ≥ 0.95× without`,
      `${ratio(b2)} (${fmt(on.b2)} vs ${fmt(rl.b2)} cycles/s${runs2})`,
      ok(b2) ? b2 >= 0.95 : undefined,
    );
  }

  // ---- B3 (contended) against the ring and raw, at each W
  const b3Ratio = (base: string, W: number, f: (r: B3Rep) => number, of = "redlease") =>
    judged(perRunRatios(
      run.b3.filter((r) => r.variant === of && r.W === W),
      run.b3.filter((r) => r.variant === base),
      f,
      (a, b) => a.W === b.W,
    ));
  /** The minimal fair notified lock (FIFO, no fence) as the floor under a baseline that is not fair or not a lock. */
  const fairFloor = (base: string, W: number, f: (r: B3Rep) => number) => {
    const of = base === "ring" ? "the ring" : base;
    const floors: string[] = [];
    for (
      const [id, what] of [["fifo", "the minimal fair notified lock"], [
        "fairfenced",
        "with a fence and an expiring queue",
      ]]
    ) {
      if (!at(id, W) || !at(base, W)) continue;
      const [floor] = b3Ratio(base, W, f, id), [own] = b3Ratio(id, W, f);
      floors.push(`${what} ${ratio(floor)} ${of}, redlease ${ratio(own)} that lock`);
    }
    return floors.length ? `; floor: ${floors.join("; ")}` : "";
  };
  const at = (id: string, W: number) => b3.find((a) => a.variant.id === id && a.W === W);
  const allWs = [...new Set([...TARGET_WS, ...ws])].sort((a, b) => a - b);
  const noB3 = (W: number, base?: string) =>
    !run.b3.length
      ? "– (no B3 in this run)"
      : !at("redlease", W)
      ? `– (no redlease at W=${W} in this run)`
      : `– (no ${base} at W=${W} in this run)`;
  for (const W of allWs) {
    const t = `B3 W=${W} cross-worker gap p50 ≤ 1.15× the pub/sub token ring`;
    const a = at("redlease", W), ring = at("ring", W);
    if (a && ring) {
      const [x, runs] = b3Ratio("ring", W, (r) => r.gapP50Ms);
      push(
        t,
        `${ratio(x)} (${fmt(a.gapP50Ms, 3)} vs ${fmt(ring.gapP50Ms, 3)} ms${runs}${
          fairFloor("ring", W, (r) => r.gapP50Ms)
        })`,
        ok(x) ? x <= 1.15 : undefined,
      );
    } else push(t, noB3(W, "ring"), undefined);
  }
  for (const W of allWs) {
    const t = `B3 W=${W} Redis CPU per acquisition ≤ raw's`;
    const a = at("redlease", W), rw = at("raw", W);
    if (a && rw) {
      const [x, runs] = b3Ratio("raw", W, (r) => r.redisCpuUs);
      push(
        t,
        `${ratio(x)} (${fmt(a.redisCpuUs, 1)} vs ${fmt(rw.redisCpuUs, 1)} µs${runs}${
          fairFloor("raw", W, (r) => r.redisCpuUs)
        })`,
        ok(x) ? x <= 1 : undefined,
      );
    } else push(t, noB3(W, "raw node-redis"), undefined);
  }
  for (const W of allWs) {
    const t = `B3 W=${W} client commands per acquisition ≤ 2.1`;
    const a = at("redlease", W);
    if (a) {
      push(
        t,
        `${fmt(a.commands.clientPerOp)} (${fmt(a.commands.totalPerOp)} counting those called from Lua)`,
        a.commands.clientPerOp <= 2.1,
      );
    } else push(t, noB3(W), undefined);
  }
  for (const W of allWs) {
    const t = `B3 W=${W} fairness (min/max acquisitions per worker) ≥ 0.95`;
    const a = at("redlease", W);
    if (a) push(t, `${fmt(a.fairness)} (${fmt(a.minPerWorker)}–${fmt(a.maxPerWorker)})`, a.fairness >= 0.95);
    else push(t, noB3(W), undefined);
  }
  {
    const t = "B3 no failed acquisitions (10 s wait; every W and run, warm-ups included)";
    const rows = run.b3.filter((r) => r.variant === "redlease");
    if (rows.length) {
      const fails = rows.reduce((s, r) => s + r.failures, 0);
      const warm = rows.reduce((s, r) => s + (r.warmFailures ?? 0), 0);
      const maxWait = Math.max(...rows.map((r) => r.waitMaxMs));
      push(t, `${fails} failed, ${warm} in warm-ups; longest wait ${fmt(maxWait)} ms`, fails + warm === 0);
    } else push(t, run.b3.length ? "– (no redlease B3 in this run)" : "– (no B3 in this run)", undefined);
  }

  // ---- B5 cold start: the first acquire's own round trips (the client's connection handshake is not the library's)
  const coldRow = (which: string, t: string, unit: string) => {
    const cs = run.cold.filter((c) => c.which === which);
    if (!cs.length) {
      push(t, run.cold.length ? `– (no "${which}" row in this run's B5)` : "– (no B5 in this run)", undefined);
      return;
    }
    const cmds = Object.entries(cs[0].commandsToLease).map(([k, v]) => `${k}×${v}`).join(" ");
    const total = med(cs, (c) => c.roundTripsToLease);
    if (!cs.every((c) => c.roundTripsAcquire !== undefined)) {
      push(
        t,
        `– (run predates the first acquire's own count; ${
          fmt(total)
        } ${unit} to the first lease including the client's handshake: ${cmds})`,
        undefined,
      );
      return;
    }
    const n = med(cs, (c) => c.roundTripsAcquire!);
    push(
      t,
      `${fmt(n)} ${unit}` + (total !== n ? ` (${fmt(total)} with the client's handshake)` : "") + `: ${cmds}`,
      n <= 2,
    );
  };
  coldRow(
    "redlease",
    "B5 first lease ≤ 2 round trips: fresh node-redis client, flushed server (the first acquire)",
    "round trips",
  );
  coldRow(
    "redlease HTTP (tsx)",
    "B5 first lease ≤ 2 round trips: fresh upstash() HTTP driver, flushed server",
    "requests",
  );
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// SVG chart of B3: throughput and cross-worker gap against W

const COLORS: Record<string, string> = {
  "redlease": "#d62728",
  "raw": "#222222",
  "redlock": "#1f77b4",
  "redlock@1ms": "#6baed6",
  "sesame": "#2ca02c",
  "sesame@1ms": "#98df8a",
  "semaphore": "#9467bd",
  "semaphore@1ms": "#c5b0d5",
  "ring": "#aaaaaa",
  "fifo": "#ff7f0e",
  "redlease-io": "#e377c2",
  "fenced": "#bcbd22",
  "guarded": "#dbdb8d",
  "fairfenced": "#8c564b",
};

function esc(s: string): string {
  return s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

function chart(b3: B3Agg[], ws: number[], run: Run): string {
  const W = 1120, H = 520, panelW = 470, panelH = 330, top = 60, lefts = [80, 630];
  const ids = [...new Set(b3.map((a) => a.variant.id))];
  const xOf = (left: number, w: number) => {
    const i = ws.indexOf(w);
    return left + 30 + (ws.length === 1 ? panelW / 2 : (i * (panelW - 60)) / (ws.length - 1));
  };
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
      `font-family="Helvetica, Arial, sans-serif" font-size="12">`,
  );
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">` +
      esc(
        `B3 contended handoff: one name, 1 ms critical section (median of ${run.config.reps} run(s)${
          w2Runs(run) ? `, ${w2Runs(run)} at W = 2` : ""
        }, ${run.date.slice(0, 10)})`,
      ) +
      `</text>`,
  );

  // Left: acquisitions/s, linear.
  const maxT = Math.max(...b3.map((a) => a.acqPerSec).filter(Number.isFinite), 1);
  const tStep = niceStep(maxT / 5);
  const tMax = Math.ceil(maxT / tStep) * tStep;
  const yT = (v: number) => top + panelH - (v / tMax) * panelH;
  // Right: gap ms, log scale.
  const gapsAll = b3.flatMap((a) => [a.gapP50Ms, a.gapP99Ms]).filter((x) => Number.isFinite(x) && x > 0);
  const gMin = Math.pow(10, Math.floor(Math.log10(Math.min(...gapsAll, 0.1))));
  const gMax = Math.pow(10, Math.ceil(Math.log10(Math.max(...gapsAll, 1))));
  const yG = (v: number) =>
    top + panelH -
    ((Math.log10(Math.max(v, gMin)) - Math.log10(gMin)) / (Math.log10(gMax) - Math.log10(gMin))) * panelH;

  for (const [p, left] of lefts.entries()) {
    out.push(`<rect x="${left}" y="${top}" width="${panelW}" height="${panelH}" fill="none" stroke="#999"/>`);
    for (const w of ws) {
      const x = xOf(left, w);
      out.push(`<line x1="${x}" y1="${top}" x2="${x}" y2="${top + panelH}" stroke="#eee"/>`);
      out.push(`<text x="${x}" y="${top + panelH + 16}" text-anchor="middle">${w}</text>`);
    }
    out.push(
      `<text x="${left + panelW / 2}" y="${top + panelH + 34}" text-anchor="middle">W (worker processes)</text>`,
    );
    if (p === 0) {
      for (let v = 0; v <= tMax + 1e-9; v += tStep) {
        out.push(`<line x1="${left}" y1="${yT(v)}" x2="${left + panelW}" y2="${yT(v)}" stroke="#eee"/>`);
        out.push(`<text x="${left - 6}" y="${yT(v) + 4}" text-anchor="end">${Math.round(v)}</text>`);
      }
      out.push(
        `<text x="${left + panelW / 2}" y="${
          top - 10
        }" text-anchor="middle" font-weight="bold">acquisitions / s</text>`,
      );
    } else {
      for (let e = Math.log10(gMin); e <= Math.log10(gMax) + 1e-9; e++) {
        const v = Math.pow(10, e);
        out.push(`<line x1="${left}" y1="${yG(v)}" x2="${left + panelW}" y2="${yG(v)}" stroke="#eee"/>`);
        out.push(`<text x="${left - 6}" y="${yG(v) + 4}" text-anchor="end">${v >= 1 ? v : v.toPrecision(1)}</text>`);
      }
      out.push(
        `<text x="${left + panelW / 2}" y="${top - 10}" text-anchor="middle" font-weight="bold">` +
          `gap release → next holder, ms (log): p50 solid, p99 dotted</text>`,
      );
    }
  }
  for (const id of ids) {
    const pts = b3.filter((a) => a.variant.id === id).sort((a, b) => a.W - b.W);
    const color = COLORS[id] ?? "#777";
    const width = id === "redlease" ? 3 : 1.8;
    const line = (left: number, y: (a: B3Agg) => number, dash = "") => {
      const ok = pts.filter((a) => Number.isFinite(y(a)));
      if (!ok.length) return;
      out.push(
        `<polyline fill="none" stroke="${color}" stroke-width="${dash ? 1.2 : width}"${
          dash ? ` stroke-dasharray="${dash}"` : ""
        } ` +
          `points="${ok.map((a) => `${xOf(left, a.W).toFixed(1)},${y(a).toFixed(1)}`).join(" ")}"/>`,
      );
      if (!dash) {
        for (const a of ok) {
          out.push(`<circle cx="${xOf(left, a.W).toFixed(1)}" cy="${y(a).toFixed(1)}" r="3.5" fill="${color}"/>`);
        }
      }
    };
    line(lefts[0], (a) => yT(a.acqPerSec));
    line(lefts[1], (a) => (a.gapP50Ms > 0 ? yG(a.gapP50Ms) : NaN));
    line(lefts[1], (a) => (a.gapP99Ms > 0 ? yG(a.gapP99Ms) : NaN), "2,3");
  }
  // Legend
  const perRow = 3;
  ids.forEach((id, i) => {
    const v = b3.find((a) => a.variant.id === id)!.variant;
    const x = 80 + (i % perRow) * 340, y = H - 66 + Math.floor(i / perRow) * 20;
    out.push(
      `<line x1="${x}" y1="${y - 4}" x2="${x + 24}" y2="${y - 4}" stroke="${COLORS[id] ?? "#777"}" stroke-width="${
        id === "redlease" ? 3 : 2
      }"/>`,
    );
    out.push(
      `<text x="${x + 30}" y="${y}">${
        esc(v.label.replace("raw node-redis (SET NX PX + EVALSHA)", "raw node-redis (10 ms poll)"))
      }</text>`,
    );
  });
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}

function niceStep(x: number): number {
  const p = Math.pow(10, Math.floor(Math.log10(Math.max(x, 1e-9))));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

// ---------------------------------------------------------------------------------------------------------------
// SVG summary: every B-figure as bars, redlease beside the peers, with the floors (raw node-redis, the token ring)

interface Bar {
  label: string;
  value: number;
  color: string;
  bold?: boolean;
  /** Stacked: the first `solid` of `value` in full colour, the rest pale (B5: the client's handshake). */
  solid?: number;
  /** The value label; default: the value. */
  text?: string;
}

interface Scale {
  log: boolean;
  lo: number;
  hi: number;
  ticks: number[];
}

function makeScale(values: number[], log: boolean): Scale {
  const vs = values.filter((v) => Number.isFinite(v) && (log ? v > 0 : v >= 0));
  if (log) {
    const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...vs, 1))));
    const hi = Math.max(Math.pow(10, Math.ceil(Math.log10(Math.max(...vs, 1)))), lo * 10);
    const ticks: number[] = [];
    for (let e = Math.log10(lo); e <= Math.log10(hi) + 1e-9; e++) ticks.push(Math.pow(10, e));
    return { log, lo, hi, ticks };
  }
  const max = Math.max(...vs, 1e-9);
  const step = niceStep(max / 4);
  const hi = Math.ceil(max / step - 1e-9) * step;
  const ticks: number[] = [];
  for (let v = 0; v <= hi + step / 1e6; v += step) ticks.push(v);
  return { log, lo: 0, hi, ticks };
}

const ROW = 17;

/** One panel of horizontal bars; returns its height. */
function barPanel(
  out: string[],
  p: {
    x: number;
    y: number;
    w: number;
    title: string;
    bars: Bar[];
    scale: Scale;
    labelW: number;
    floor?: { value: number; label: string };
    digits?: number;
  },
): number {
  const x0 = p.x + p.labelW + 6, area = p.w - p.labelW - 6 - 62; // 62: room for the value label after the bar
  const pos = (v: number) => {
    const s = p.scale;
    const f = s.log
      ? (Math.log10(Math.max(v, s.lo)) - Math.log10(s.lo)) / (Math.log10(s.hi) - Math.log10(s.lo))
      : v / s.hi;
    return x0 + Math.min(1, Math.max(0, f)) * area;
  };
  const top = p.y + 32; // title, then a line for the floor's label
  out.push(`<text x="${p.x}" y="${p.y + 12}" font-weight="bold">${esc(p.title)}</text>`);
  if (!p.bars.length) {
    out.push(`<text x="${x0}" y="${top + 10}" fill="#888">not measured in this run</text>`);
    return 32 + 24;
  }
  const bottom = top + p.bars.length * ROW + 2;
  for (const t of p.scale.ticks) {
    const x = pos(t).toFixed(1);
    out.push(`<line x1="${x}" y1="${top - 2}" x2="${x}" y2="${bottom}" stroke="#eee"/>`);
    out.push(
      `<text x="${x}" y="${bottom + 12}" text-anchor="middle" font-size="10" fill="#666">` +
        `${t >= 1 || t === 0 ? fmt(t) : t.toPrecision(1)}</text>`,
    );
  }
  out.push(`<line x1="${x0}" y1="${top - 2}" x2="${x0}" y2="${bottom}" stroke="#999"/>`);
  if (p.floor && Number.isFinite(p.floor.value) && (!p.scale.log || p.floor.value > 0)) {
    const x = pos(p.floor.value).toFixed(1);
    out.push(`<line x1="${x}" y1="${top - 4}" x2="${x}" y2="${bottom}" stroke="#222" stroke-dasharray="4,3"/>`);
    out.push(
      `<text x="${x}" y="${top - 7}" text-anchor="middle" font-size="10" fill="#222">${esc(p.floor.label)}</text>`,
    );
  }
  p.bars.forEach((b, i) => {
    const y = top + i * ROW;
    if (p.labelW > 0) {
      out.push(
        `<text x="${x0 - 6}" y="${y + 11}" text-anchor="end" font-size="11"${b.bold ? ` font-weight="bold"` : ""}>` +
          `${esc(b.label)}</text>`,
      );
    }
    const measured = Number.isFinite(b.value) && (p.scale.log ? b.value > 0 : b.value >= 0);
    let end = x0;
    if (measured) {
      end = pos(b.value);
      const solidEnd = b.solid !== undefined ? pos(b.solid) : end;
      if (end > solidEnd) {
        out.push(
          `<rect x="${solidEnd.toFixed(1)}" y="${y + 1}" width="${
            (end - solidEnd).toFixed(1)
          }" height="12" fill="${b.color}" fill-opacity="0.3"/>`,
        );
      }
      out.push(
        `<rect x="${x0}" y="${y + 1}" width="${Math.max(solidEnd - x0, 1).toFixed(1)}" height="12" fill="${b.color}"/>`,
      );
    }
    out.push(
      `<text x="${(end + 4).toFixed(1)}" y="${y + 11}" font-size="11"${b.bold ? ` font-weight="bold"` : ""}>` +
        `${esc(measured ? b.text ?? fmt(b.value, p.digits) : "–")}</text>`,
    );
  });
  return bottom + 16 - p.y;
}

function shortLabel(label: string): string {
  return label
    .replace(/ \(default retry\)/, "")
    .replace(/ \(1 ms retry\)/, ", 1 ms retry")
    .replace(/ 5\.0\.0-beta\.2/, "")
    .replace(/^raw node-redis \(SET NX PX \+ EVALSHA\)$/, "raw node-redis")
    .replace(/^floor: pub\/sub token ring \(not a lock\)$/, "pub/sub token ring");
}

const COLD_COLORS: Record<string, string> = { "redlease (tsx)": "#e8787a", "redlease HTTP (tsx)": "#f4a3a4" };

function summaryChart(
  run: Run,
  unc: { lib: string; b1p50: number; b2: number; b2redis: number }[],
  b3: B3Agg[],
  ws: number[],
  label: (lib: string) => string,
): string {
  const W = 1120, colW = 530, gap = 40, left = 20;
  const body: string[] = [];
  const floorMark = (lib: string) => (lib === "raw" ? " (floor)" : "");
  const uncBars = (f: (u: (typeof unc)[number]) => number, digits?: number): Bar[] =>
    unc.map((u) => ({
      label: shortLabel(label(u.lib)) + floorMark(u.lib),
      value: f(u),
      color: COLORS[u.lib] ?? "#777",
      bold: u.lib === "redlease",
      text: digits === undefined ? undefined : fmt(f(u), digits),
    }));
  const rawU = unc.find((u) => u.lib === "raw");
  const rawFloor = (f: (u: (typeof unc)[number]) => number) =>
    rawU ? { value: f(rawU), label: "raw (floor)" } : undefined;
  const linear = (bars: Bar[]) => makeScale(bars.map((b) => b.value), false);

  let y = 74;
  // Row 1: B1 p50, B2 cycles/s
  {
    const b1 = uncBars((u) => u.b1p50 * 1000, 0);
    const b2 = uncBars((u) => u.b2);
    const h1 = barPanel(body, {
      x: left,
      y,
      w: colW,
      labelW: 170,
      bars: b1,
      scale: linear(b1),
      floor: rawFloor((u) => u.b1p50 * 1000),
      title: "B1 sequential acquire + release: cycle p50, µs (lower is better)",
    });
    const h2 = barPanel(body, {
      x: left + colW + gap,
      y,
      w: colW,
      labelW: 170,
      bars: b2,
      scale: linear(b2),
      floor: rawFloor((u) => u.b2),
      title: `B2 ${run.config.b2Loops ?? 64} concurrent loops: cycles/s (higher is better)`,
    });
    y += Math.max(h1, h2) + 14;
  }
  // Row 2: B2 Redis CPU per cycle, B5 round trips to the first lease
  {
    const cpu = uncBars((u) => u.b2redis, 1);
    const h1 = barPanel(body, {
      x: left,
      y,
      w: colW,
      labelW: 170,
      bars: cpu,
      scale: linear(cpu),
      floor: rawFloor((u) => u.b2redis),
      title: "B2 Redis CPU per acquire + release, µs (lower is better)",
    });
    const whiches = [...new Set(run.cold.map((c) => c.which))];
    const cold: Bar[] = whiches.map((w) => {
      const cs = run.cold.filter((c) => c.which === w);
      const lib = cs[0].lib;
      const total = med(cs, (c) => c.roundTripsToLease);
      const split = cs.every((c) => c.roundTripsAcquire !== undefined);
      const own = split ? med(cs, (c) => c.roundTripsAcquire!) : total;
      return {
        label: (w === lib ? shortLabel(label(lib)) : w) + floorMark(w),
        value: total,
        solid: own,
        color: COLD_COLORS[w] ?? COLORS[lib] ?? "#777",
        bold: w === "redlease" || w === "redlease HTTP (tsx)",
        text: !split
          ? `${fmt(total)} incl. handshake`
          : total > own
          ? `${fmt(own)} + ${fmt(total - own)} handshake`
          : fmt(own),
      };
    });
    const rawC = cold.find((b) => b.label.startsWith("raw node-redis"));
    const h2 = barPanel(body, {
      x: left + colW + gap,
      y,
      w: colW,
      labelW: 170,
      bars: cold,
      scale: linear(cold),
      floor: rawC ? { value: rawC.solid ?? rawC.value, label: "raw (floor)" } : undefined,
      title: "B5 round trips to the first lease, fresh client (lower is better)",
    });
    y += Math.max(h1, h2) + 14;
  }
  // Row 3: B3 gap p50 per W, one shared log scale
  {
    const ids = [...new Set(b3.map((a) => a.variant.id))];
    const scale = makeScale(b3.map((a) => a.gapP50Ms), true);
    body.push(
      `<text x="${left}" y="${y + 12}" font-weight="bold">` +
        esc(`B3 contended handoff: cross-worker gap p50, ms (log scale; lower is better), W worker processes`) +
        `</text>`,
    );
    y += 20;
    if (!b3.length) {
      body.push(`<text x="${left + 176}" y="${y + 14}" fill="#888">not measured in this run</text>`);
      y += 30;
    } else {
      const labelW = 220, colB = (W - 2 * left - labelW) / ws.length;
      let h = 0;
      ws.forEach((w, i) => {
        const ring = b3.find((a) => a.variant.id === "ring" && a.W === w);
        const bars: Bar[] = ids.map((id) => {
          const a = b3.find((x) => x.variant.id === id && x.W === w);
          const v = run.variants.find((x) => x.id === id)!;
          return {
            label: id === "ring"
              ? "pub/sub token ring (floor)"
              : id === "fifo"
              ? "minimal fair lock (floor)"
              : id === "fairfenced"
              ? "fair lock + fence + expiring queue (floor)"
              : id === "raw"
              ? "raw node-redis (10 ms poll)"
              : shortLabel(v.label),
            value: a ? a.gapP50Ms : NaN,
            color: COLORS[id] ?? "#777",
            bold: id === "redlease",
            text: a ? fmt(a.gapP50Ms, a.gapP50Ms < 1 ? 3 : 2) : undefined,
          };
        });
        h = Math.max(
          h,
          barPanel(body, {
            x: i === 0 ? left : left + labelW + i * colB,
            y,
            w: i === 0 ? labelW + colB : colB,
            labelW: i === 0 ? labelW - 6 : 0,
            bars,
            scale,
            floor: ring ? { value: ring.gapP50Ms, label: "ring (floor)" } : undefined,
            title: "", // the "W = …" heading is drawn over each column below
          }),
        );
        body.push(
          `<text x="${(i === 0 ? left + labelW : left + labelW + i * colB) + colB / 2}" y="${y + 12}" ` +
            `text-anchor="middle" font-weight="bold">W = ${w}</text>`,
        );
      });
      y += h + 6;
    }
  }
  const H = y + 34;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
      `font-family="Helvetica, Arial, sans-serif" font-size="12">`,
  );
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">` +
      esc(`redlease beside its peers: B1, B2, B3, B5 (medians over runs, ${run.date.slice(0, 10)})`) + `</text>`,
  );
  for (
    const [i, line] of [
      `Dashed line = floor: raw node-redis (SET NX PX + compare-and-delete) in B1, B2, B5; the pub/sub token ring (not ` +
      `a lock) in B3.`,
      `Each bar is labelled with its value. B5: the first acquire's own round trips + the client's connection handshake (pale).`,
    ].entries()
  ) {
    out.push(`<text x="${W / 2}" y="${44 + 16 * i}" text-anchor="middle" fill="#444">${esc(line)}</text>`);
  }
  out.push(...body);
  out.push(
    `<text x="${left}" y="${H - 12}" font-size="10" fill="#666">` +
      esc(`${run.command} — details and per-run ratios in the .md next to this file`) + `</text>`,
  );
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}
