// Aggregation (medians over repetitions, ratios against the raw baseline of the same repetition) and rendering of
// the benchmark results: a markdown report and an SVG chart of B3.
import type { LibId } from "./_libs.ts";
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
  Number.isFinite(x) ? (Math.abs(x) >= 100 ? Math.round(x).toLocaleString("en-US") : String(Number(x.toFixed(digits)))) : "–";
const ratio = (x: number) => (Number.isFinite(x) ? `${x.toFixed(2)}×` : "–");
const pctS = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(0)} %` : "–");

/** Median over repetitions of (value / raw value of the same repetition [and W]). */
function ratioToRaw<T extends { rep: number }>(rows: T[], raws: T[], f: (x: T) => number, same: (a: T, b: T) => boolean) {
  return median(rows.map((x) => {
    const base = raws.find((r) => r.rep === x.rep && same(x, r));
    return base ? f(x) / f(base) : NaN;
  }));
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
  acqPerSecRuns: number[];
}

function aggregateB3(run: Run): B3Agg[] {
  const out: B3Agg[] = [];
  const ws = [...new Set(run.b3.map((r) => r.W))].sort((a, b) => a - b);
  for (const v of run.variants) {
    for (const W of ws) {
      const rows = run.b3.filter((r) => r.variant === v.id && r.W === W);
      if (!rows.length) continue;
      const raws = run.b3.filter((r) => r.variant === "raw");
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
        acqPerSecRuns: rows.map((r) => r.acqPerSec),
      });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Markdown

function table(head: string[], rows: string[][]): string {
  return [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`, ...rows.map((r) => `| ${r.join(" | ")} |`)]
    .join("\n");
}

export function render(run: Run): { markdown: string; svg: string | undefined } {
  const md: string[] = [];
  const reps = (run.config.reps as number) ?? 1;
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
        run.b3.length ? `${reps} runs (B3)` : "",
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
  const label = (lib: string) => run.variants.find((v) => v.lib === lib && !v.tuned)?.label.replace(/ \(default retry\)/, "") ?? lib;
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
      ["library", "B1 cycles/s", "×raw", "B1 cycle p50 / p99 ms", "round trips / cycle", "B2 cycles/s", "×raw", "B2 cycle p50 / p99 ms"],
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
      ["library", "W", "acq/s", "×raw", `÷ W=${ws[0]}`, "gap p50 / p99 ms (n)", "gap split p50 ms", "same-worker", "fairness (min–max)", "failed", "wait p99 / max ms"],
      rows,
    ));
    md.push("");
    const overl = b3.filter((a) => a.overlaps > 0);
    if (overl.length) {
      md.push(`Overlapping holds seen: ${overl.map((a) => `${a.variant.id} W=${a.W}: ${a.overlaps}`).join(", ")}.`);
      md.push("");
    }
  }

  // ---- B4
  if (uncAgg.length || b3.length) {
    md.push(`## B4 Redis work per acquisition`);
    md.push("");
    md.push(
      `From \`INFO commandstats\` and \`INFO cpu\` deltas around each measured window (\`CONFIG RESETSTAT\` on a ` +
        `separate admin connection, whose INFO/CONFIG calls are excluded). Redis 7.0 commandstats counts a command ` +
        `whether a client sent it or a Lua script called it, so they are told apart by library: the commands each ` +
        `library sends itself are known from its source (redlease: EVALSHA, SCRIPT LOAD, SUBSCRIBE/UNSUBSCRIBE; raw: ` +
        `SET, EVALSHA, SCRIPT LOAD; redlock and @sesamecare-oss/redlock: EVALSHA, EVAL after NOSCRIPT; ` +
        `redis-semaphore: SET, EVALSHA, EVAL), and none of them is ever called by that library's scripts, so ` +
        `client = the sum of those and Lua-internal = total − client. The split is cross-checked in B1 against the ` +
        `commands parsed from the bytes each client writes to its socket ("wire"). Per acquisition = over every ` +
        `acquisition of the window including the tail. Redis CPU = used_cpu_user + used_cpu_sys of redis-server; ` +
        `client CPU = process.cpuUsage() of the benchmark process(es).`,
    );
    md.push("");
    const rows: string[][] = [];
    for (const u of uncAgg) {
      const wire = Object.entries(u.wire).map(([k, v]) => `${k} ${v}`).join(", ");
      rows.push([
        label(u.lib), "B1 (W=1)", fmt(u.b1c.clientPerOp), fmt(u.b1c.totalPerOp), fmt(u.b1c.luaPerOp),
        fmt(u.b1redis, 1), fmt(u.b1client, 1), `${describeCounts(u.b1c)}; wire: ${wire}`,
      ]);
      rows.push([
        label(u.lib), "B2 (64 loops)", fmt(u.b2c.clientPerOp), fmt(u.b2c.totalPerOp), fmt(u.b2c.luaPerOp),
        fmt(u.b2redis, 1), fmt(u.b2client, 1), "",
      ]);
    }
    for (const a of b3) {
      rows.push([
        a.variant.label, `B3 W=${a.W}`, fmt(a.commands.clientPerOp), fmt(a.commands.totalPerOp), fmt(a.commands.luaPerOp),
        fmt(a.redisCpuUs, 1), fmt(a.clientCpuUs, 1), describeCounts(a.commands),
      ]);
    }
    md.push(table(
      ["library", "phase", "client cmds", "total incl. Lua", "Lua-internal", "Redis CPU µs", "client CPU µs", "per-command calls / acquisition"],
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
        `(TCP connect not included in round trips). Size: esbuild bundle, minified, ESM, client external, gzip -9 ` +
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
        `${fmt(med(cs, (c) => c.connectsToLease))} + ${fmt(med(cs, (c) => c.roundTripsToLease))}`,
        cmds,
        size ? `${size.gzipBytes.toLocaleString("en-US")} (${size.minBytes.toLocaleString("en-US")} min)` : "",
      ];
    });
    md.push(table(
      ["library", "import client ms", "import library ms", "connect ms", "first acquire ms", "import → first lease ms", "connects + round trips", "commands to first lease", "min+gz bytes"],
      rows,
    ));
    md.push("");
    for (const s of run.sizes) {
      md.push(`- ${s.name}: ${s.note}; largest inputs: ${s.inputs.slice(0, 4).map((i) => `${i.file} ${i.bytes} B`).join(", ")}`);
    }
    md.push("");
  }

  // ---- Targets
  const tg = targets(run, uncAgg.find((u) => u.lib === "redlease"), b3.filter((a) => a.variant.lib === "redlease"), ws);
  if (tg.length) {
    md.push(`## redlease against its targets`);
    md.push("");
    md.push(table(["target", "measured", "met"], tg.map((t) => [t.target, t.measured, t.met === undefined ? "n/a" : t.met ? "yes" : "**no**"])));
    md.push("");
  }
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
  return { markdown: md.join("\n"), svg: b3.length ? chart(b3, ws, run) : undefined };
}

interface Target {
  target: string;
  measured: string;
  met: boolean | undefined;
}

function targets(
  run: Run,
  u: { b2x: number; rt: number; b1c: CommandCounts } | undefined,
  b3: B3Agg[],
  ws: number[],
): Target[] {
  const out: Target[] = [];
  if (u) {
    out.push({ target: "B2 ≥ 0.9× raw node-redis", measured: ratio(u.b2x), met: Number.isFinite(u.b2x) ? u.b2x >= 0.9 : undefined });
    out.push({ target: "B1 round trips per cycle = 2", measured: fmt(u.rt), met: Math.abs(u.rt - 2) < 0.005 });
  }
  const at = (W: number) => b3.find((a) => a.W === W);
  const lo = at(ws[0]), hi = at(32);
  if (lo && hi) {
    // Per run (same pool, same minute), then median.
    const per = run.b3.filter((r) => r.variant === "redlease" && r.W === 32).map((r) => {
      const base = run.b3.find((x) => x.variant === "redlease" && x.W === ws[0] && x.rep === r.rep);
      return base ? r.acqPerSec / base.acqPerSec : NaN;
    });
    const x = median(per);
    out.push({
      target: `B3 W=32 throughput ≥ 0.9× W=${ws[0]}`,
      measured: `${ratio(x)} (${fmt(hi.acqPerSec)} vs ${fmt(lo.acqPerSec)} acq/s)`,
      met: x >= 0.9,
    });
  }
  if (hi) {
    out.push({ target: "B3 W=32 cross-worker gap p50 ≤ 0.3 ms", measured: `${fmt(hi.gapP50Ms, 3)} ms`, met: hi.gapP50Ms <= 0.3 });
    out.push({ target: "B3 W=32 cross-worker gap p99 ≤ 2 ms", measured: `${fmt(hi.gapP99Ms)} ms`, met: hi.gapP99Ms <= 2 });
    out.push({
      target: "B3 W=32 fairness (min/max per worker) ≥ 0.8",
      measured: `${fmt(hi.fairness)} (${fmt(hi.minPerWorker)}–${fmt(hi.maxPerWorker)})`,
      met: hi.fairness >= 0.8,
    });
  }
  if (b3.length) {
    const fails = b3.reduce((s, a) => s + a.failures, 0);
    const maxWait = Math.max(...b3.map((a) => a.waitMaxMs));
    out.push({
      target: "no failed acquisitions within a 10 s wait (B3, all W, all runs)",
      measured: `${fails} failed; longest wait ${fmt(maxWait)} ms`,
      met: fails === 0,
    });
    const worst = Math.max(...b3.map((a) => a.commands.clientPerOp));
    out.push({
      target: "Redis commands per acquisition ≤ 3 at every W (client-issued)",
      measured: b3.map((a) => `W=${a.W}: ${fmt(a.commands.clientPerOp)}`).join(", ") +
        (u ? `; B1: ${fmt(u.b1c.clientPerOp)}` : ""),
      met: worst <= 3,
    });
    out.push({
      target: "… the same counting commands called from Lua",
      measured: b3.map((a) => `W=${a.W}: ${fmt(a.commands.totalPerOp)}`).join(", ") +
        (u ? `; B1: ${fmt(u.b1c.totalPerOp)}` : ""),
      met: Math.max(...b3.map((a) => a.commands.totalPerOp)) <= 3,
    });
  }
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
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
    `font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(`<text x="${W / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">` +
    esc(`B3 contended handoff: one name, 1 ms critical section (median of ${run.config.reps} run(s), ${run.date.slice(0, 10)})`) +
    `</text>`);

  // Left: acquisitions/s, linear.
  const maxT = Math.max(...b3.map((a) => a.acqPerSec).filter(Number.isFinite), 1);
  const tStep = niceStep(maxT / 5);
  const tMax = Math.ceil(maxT / tStep) * tStep;
  const yT = (v: number) => top + panelH - (v / tMax) * panelH;
  // Right: gap ms, log scale.
  const gapsAll = b3.flatMap((a) => [a.gapP50Ms, a.gapP99Ms]).filter((x) => Number.isFinite(x) && x > 0);
  const gMin = Math.pow(10, Math.floor(Math.log10(Math.min(...gapsAll, 0.1))));
  const gMax = Math.pow(10, Math.ceil(Math.log10(Math.max(...gapsAll, 1))));
  const yG = (v: number) => top + panelH - ((Math.log10(Math.max(v, gMin)) - Math.log10(gMin)) / (Math.log10(gMax) - Math.log10(gMin))) * panelH;

  for (const [p, left] of lefts.entries()) {
    out.push(`<rect x="${left}" y="${top}" width="${panelW}" height="${panelH}" fill="none" stroke="#999"/>`);
    for (const w of ws) {
      const x = xOf(left, w);
      out.push(`<line x1="${x}" y1="${top}" x2="${x}" y2="${top + panelH}" stroke="#eee"/>`);
      out.push(`<text x="${x}" y="${top + panelH + 16}" text-anchor="middle">${w}</text>`);
    }
    out.push(`<text x="${left + panelW / 2}" y="${top + panelH + 34}" text-anchor="middle">W (worker processes)</text>`);
    if (p === 0) {
      for (let v = 0; v <= tMax + 1e-9; v += tStep) {
        out.push(`<line x1="${left}" y1="${yT(v)}" x2="${left + panelW}" y2="${yT(v)}" stroke="#eee"/>`);
        out.push(`<text x="${left - 6}" y="${yT(v) + 4}" text-anchor="end">${Math.round(v)}</text>`);
      }
      out.push(`<text x="${left + panelW / 2}" y="${top - 10}" text-anchor="middle" font-weight="bold">acquisitions / s</text>`);
    } else {
      for (let e = Math.log10(gMin); e <= Math.log10(gMax) + 1e-9; e++) {
        const v = Math.pow(10, e);
        out.push(`<line x1="${left}" y1="${yG(v)}" x2="${left + panelW}" y2="${yG(v)}" stroke="#eee"/>`);
        out.push(`<text x="${left - 6}" y="${yG(v) + 4}" text-anchor="end">${v >= 1 ? v : v.toPrecision(1)}</text>`);
      }
      out.push(`<text x="${left + panelW / 2}" y="${top - 10}" text-anchor="middle" font-weight="bold">` +
        `gap release → next holder, ms (log): p50 solid, p99 dotted</text>`);
    }
  }
  for (const id of ids) {
    const pts = b3.filter((a) => a.variant.id === id).sort((a, b) => a.W - b.W);
    const color = COLORS[id] ?? "#777";
    const width = id === "redlease" ? 3 : 1.8;
    const line = (left: number, y: (a: B3Agg) => number, dash = "") => {
      const ok = pts.filter((a) => Number.isFinite(y(a)));
      if (!ok.length) return;
      out.push(`<polyline fill="none" stroke="${color}" stroke-width="${dash ? 1.2 : width}"${dash ? ` stroke-dasharray="${dash}"` : ""} ` +
        `points="${ok.map((a) => `${xOf(left, a.W).toFixed(1)},${y(a).toFixed(1)}`).join(" ")}"/>`);
      if (!dash) for (const a of ok) out.push(`<circle cx="${xOf(left, a.W).toFixed(1)}" cy="${y(a).toFixed(1)}" r="3.5" fill="${color}"/>`);
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
    out.push(`<line x1="${x}" y1="${y - 4}" x2="${x + 24}" y2="${y - 4}" stroke="${COLORS[id] ?? "#777"}" stroke-width="${id === "redlease" ? 3 : 2}"/>`);
    out.push(`<text x="${x + 30}" y="${y}">${esc(v.label.replace("raw node-redis (SET NX PX + EVALSHA)", "raw node-redis (10 ms poll)"))}</text>`);
  });
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}

function niceStep(x: number): number {
  const p = Math.pow(10, Math.floor(Math.log10(Math.max(x, 1e-9))));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

