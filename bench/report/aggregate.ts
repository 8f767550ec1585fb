// Aggregation: medians over repetitions, and ratios against the raw baseline of the same repetition.
import type { LibId } from "../_libs.ts";
import { type CommandCounts, median, r2, r3 } from "../_stats.ts";
import type { B3Rep, Run, Variant } from "./types.ts";

/** The median of `f` over `xs`. */
export const med = <T>(xs: T[], f: (x: T) => number) => median(xs.map(f));

/** Per repetition: value / raw value of the same repetition [and W] (NaN where the repetition has no raw). */
export function perRunRatios<T extends { rep: number }>(
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
export function ratioToRaw<T extends { rep: number }>(
  rows: T[],
  raws: T[],
  f: (x: T) => number,
  same: (a: T, b: T) => boolean,
) {
  return median(perRunRatios(rows, raws, f, same));
}

/** Median per command of calls/op, for the breakdown column. */
export function medianCounts(cs: CommandCounts[]): CommandCounts {
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

/** B3 (or B6) of one variant at one W: medians over its runs. */
export interface B3Agg {
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

/** B3 (or B6, given `reps`) per variant and W, in the order of the run's variants. */
export function aggregateB3(run: Run, reps: B3Rep[] = run.b3): B3Agg[] {
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

/**
 * How many B3 runs W = 2 had, when that differs from the other W's (--w2-reps); undefined otherwise, and for runs
 * from before --w2-reps, which had as many at every W.
 */
export function w2Runs(run: Run): number | undefined {
  const n = run.config.w2Reps as number | undefined;
  return n !== undefined && n !== run.config.reps && run.b3.some((r) => r.W === 2) ? n : undefined;
}

/** B1 and B2 per library: medians over its runs, and ratios to raw node-redis of the same run. */
export function aggregateUnc(run: Run) {
  const libsU = [...new Set(run.unc.map((u) => u.lib))];
  const rawU = run.unc.filter((u) => u.lib === "raw");
  return libsU.map((lib) => {
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
      b2others: rows.some((r) => r.b2.othersCpuPct !== undefined)
        ? med(rows, (r) => r.b2.othersCpuPct ?? 0)
        : undefined,
      wire: rows[0].b1.wireCommands,
    };
  });
}

/** B1 and B2 of one library, as aggregateUnc() gives them. */
export type UncAgg = ReturnType<typeof aggregateUnc>[number];

/** A library's name in the tables: the label of its untuned variant, without "(default retry)". */
export type Label = (lib: string) => string;

/** The Label of a run's libraries. */
export function labelOf(run: Run): Label {
  return (lib: string) =>
    run.variants.find((v) => v.lib === lib && !v.tuned)?.label.replace(/ \(default retry\)/, "") ?? lib;
}
