// Report section "redlease against issue 30's targets": uncontended leases and permits at least as fast and as cheap
// in Redis CPU as redis-semaphore's (and every peer's), the contended handoff close to the `fairfenced` floor, and
// B2 toward raw node-redis. Each target is a ratio within one run (the median of the per-run ratios, with each run's
// ratio beside it), judged for redlease on node-redis (its default client) and on ioredis (the peers' client)
// separately, and each beside the floor of the same guarantees on that client: what the floor achieves against the
// same baseline, and redlease against the floor.
import { median } from "../_stats.ts";
import { aggregateB3, type B3Agg, type Label, perRunRatios } from "./aggregate.ts";
import { fmt, ratio, table } from "./format.ts";
import type { Target, UncTargetView } from "./targets.ts";
import type { B3Rep, Run, UncRep } from "./types.ts";

/** Every peer library of a run (B1/B2 run them with their defaults only). */
const PEERS = ["redlock", "sesame", "semaphore"];
/** The peer of issue 30: redis-semaphore (its Mutex in B1/B2, its Semaphore in B6, at both retry settings). */
const PEER = "semaphore";
const PEER_PERMITS = ["semaphore-permits", "semaphore-permits@1ms"];
/** The W of the contended targets (B3 and B6). */
const TARGET_WS = [2, 8, 32];

/** redlease on each client, with the floors of its guarantees on that client (those in the run are printed). */
const CLIENTS = [
  { lib: "redlease", client: "node-redis", floors: ["fenced", "guarded"] },
  { lib: "redlease-io", client: "ioredis", floors: ["fenced-io"] },
];
const FLOOR_NAME: Record<string, string> = {
  fenced: "the minimal fenced lease (`fenced`)",
  guarded: "with the client work of redlease's guarantees (`guarded`)",
  "fenced-io": "the minimal fenced lease on ioredis (`fenced-io`)",
};

/** A B1/B2 figure: how to read it from a run and from the medians, and which way is better. */
interface Figure {
  f: (r: UncRep) => number;
  agg: (u: UncTargetView) => number;
  unit: string;
  digits: number;
  lower: boolean;
  /** A Redis figure: `guarded` runs `fenced`'s scripts, so it is left out as a floor (as in the issue-10 section). */
  redis: boolean;
}
const B2: Figure = {
  f: (r) => r.b2.cyclesPerSec,
  agg: (u) => u.b2,
  unit: "cycles/s",
  digits: 0,
  lower: false,
  redis: false,
};
const B2_REDIS: Figure = {
  f: (r) => r.b2.redisCpuUs,
  agg: (u) => u.b2redis,
  unit: "µs Redis CPU per cycle",
  digits: 1,
  lower: true,
  redis: true,
};
const B1_P50: Figure = { f: (r) => r.b1.p50Ms, agg: (u) => u.b1p50, unit: "ms", digits: 3, lower: true, redis: false };

/** A baseline of the same run: its value in a run (NaN where that run lacks it), its median, what to call it. */
interface Base {
  name: string;
  short: string;
  at(rep: number): number;
  value: number;
}

const ok = Number.isFinite;
/** The median of per-run ratios, and the runs' own ratios when there are several (they can disagree). */
function judged(xs: number[]): [number, string] {
  const runs = xs.filter(ok);
  return [median(xs), runs.length > 1 ? `; per run ${runs.map(ratio).join(", ")}` : ""];
}

/** One library as a baseline for figure `g`. */
function libBase(u: UncTargetView, g: Figure, name: string, short: string): Base {
  const at = (rep: number) => {
    const r = u.rows.find((x) => x.rep === rep);
    return r ? g.f(r) : NaN;
  };
  return { name, short, at, value: g.agg(u) };
}

/** The best of `peers` for figure `g`, per run (the fastest, or the lowest): named after the best by median. */
function bestBase(peers: UncTargetView[], g: Figure, label: Label): Base {
  const best = (xs: number[]) => (xs.length ? (g.lower ? Math.min(...xs) : Math.max(...xs)) : NaN);
  const top = peers.reduce((a, b) => ((g.lower ? g.agg(b) < g.agg(a) : g.agg(b) > g.agg(a)) ? b : a));
  return {
    name: `the best peer (${label(top.lib)})`,
    short: "the best peer",
    at: (rep) => best(peers.flatMap((p) => p.rows.filter((r) => r.rep === rep).map(g.f))),
    value: g.agg(top),
  };
}

/** Per run: `u`'s figure ÷ the baseline's in the same run. */
const ratiosTo = (u: UncTargetView, g: Figure, base: Base) => u.rows.map((r) => g.f(r) / base.at(r.rep));

/** The floors of `client`'s guarantees in the run against `base`, and redlease against each ("" when none is). */
function floorsText(unc: UncTargetView[], rl: UncTargetView, floors: string[], g: Figure, base: Base): string {
  const parts: string[] = [];
  for (const id of floors) {
    const fl = unc.find((u) => u.lib === id);
    if (!fl || (g.redis && id === "guarded")) continue;
    const [floor] = judged(ratiosTo(fl, g, base));
    const [own, runs] = judged(perRunRatios(rl.rows, fl.rows, g.f, () => true));
    parts.push(`${FLOOR_NAME[id]} ${ratio(floor)} ${base.short}, ${rl.lib} ${ratio(own)} that floor${runs}`);
  }
  return parts.length ? `; floor: ${parts.join("; ")}` : "";
}

/** Targets 1, 2 and 5 (B1/B2), each for redlease on node-redis and on ioredis. */
// Long: one list of the uncontended targets, each a few lines, reads better in one place than split up.
function uncontendedTargets(run: Run, unc: UncTargetView[], label: Label): Target[] {
  const out: Target[] = [];
  const find = (lib: string) => unc.find((u) => u.lib === lib);
  const peers = unc.filter((u) => PEERS.includes(u.lib));
  const missing = (lib: string, base: string) =>
    !run.unc.length
      ? "– (no B1/B2 in this run)"
      : !find(lib)
      ? `– (no ${lib} B1/B2 in this run)`
      : `– (no ${base} B1/B2 in this run)`;
  /** One target for both clients: `base` gives the baseline (undefined: not in the run), `met` judges the ratio. */
  const both = (
    target: string,
    g: Figure,
    base: () => Base | undefined,
    baseName: string,
    met: (x: number) => boolean,
  ) => {
    for (const { lib, client, floors } of CLIENTS) {
      const t = `${target}, on ${client} (\`${lib}\`)`;
      const rl = find(lib), b = base();
      if (!rl || !b) {
        out.push({ target: t, measured: missing(lib, baseName), met: undefined });
        continue;
      }
      const [x, runs] = judged(ratiosTo(rl, g, b));
      out.push({
        target: t,
        measured: `${ratio(x)} (${fmt(g.agg(rl), g.digits)} vs ${b.name} ${fmt(b.value, g.digits)} ${g.unit}${runs}` +
          `${floorsText(unc, rl, floors, g, b)})`,
        met: ok(x) ? met(x) : undefined,
      });
    }
  };
  const lib = (id: string, g: Figure, short: string) => () => {
    const u = find(id);
    return u && libBase(u, g, label(id), short);
  };
  const best = (g: Figure) => () => (peers.length ? bestBase(peers, g, label) : undefined);
  both(
    "1. B2 cycles/s ≥ redis-semaphore Mutex's",
    B2,
    lib(PEER, B2, "redis-semaphore"),
    "redis-semaphore",
    (x) => x >= 1,
  );
  both("1. B2 cycles/s ≥ every peer's (the fastest of the run)", B2, best(B2), "peer", (x) => x >= 1);
  both("1. B2 Redis CPU per cycle ≤ the best peer's (the lowest)", B2_REDIS, best(B2_REDIS), "peer", (x) => x <= 1);
  both("2. B1 cycle p50 ≤ the best peer's (the lowest)", B1_P50, best(B1_P50), "peer", (x) => x <= 1);
  both("5. B2 cycles/s ≥ 0.7× raw", B2, lib("raw", B2, "raw"), "raw node-redis", (x) => x >= 0.7);
  both(
    "5. B2 Redis CPU per cycle ≤ 1.5× raw",
    B2_REDIS,
    lib("raw", B2_REDIS, "raw"),
    "raw node-redis",
    (x) => x <= 1.5,
  );
  return out;
}

/** A figure that B3/B6 runs and their medians both carry. */
type ContendedKey = "acqPerSec" | "redisCpuUs" | "gapP50Ms";

/**
 * Per run at W: `of`'s figure ÷ the best of `bases` in the same run and W (the highest, or with `lower` the lowest),
 * judged; with the medians of `of` and of the best base variant (undefined when either is not in the run at W).
 */
function contendedRatio(
  reps: B3Rep[],
  agg: B3Agg[],
  of: string,
  bases: string[],
  W: number,
  key: ContendedKey,
  lower: boolean,
): { x: number; runs: string; mine: B3Agg; base: B3Agg } | undefined {
  const mine = agg.find((a) => a.variant.id === of && a.W === W);
  const bs = agg.filter((a) => bases.includes(a.variant.id) && a.W === W);
  if (!mine || !bs.length) return undefined;
  const better = (a: number, b: number) => (lower ? a < b : a > b);
  const base = bs.reduce((a, b) => (better(b[key], a[key]) ? b : a));
  const bestOf = (rep: number) =>
    reps.filter((b) => bases.includes(b.variant) && b.W === W && b.rep === rep).map((b) => b[key])
      .reduce((a, b) => (Number.isNaN(a) || better(b, a) ? b : a), NaN);
  const [x, runs] = judged(reps.filter((r) => r.variant === of && r.W === W).map((r) => r[key] / bestOf(r.rep)));
  return { x, runs, mine, base };
}

/** Target 3 (B6 permits at each W): acquisitions/s and Redis CPU against the better redis-semaphore setting, fairness. */
function permitTargets(run: Run): Target[] {
  const out: Target[] = [];
  const reps = run.b6 ?? [], agg = reps.length ? aggregateB3(run, reps) : [];
  const mine = (W: number) => agg.find((a) => a.variant.id === "redlease-permits" && a.W === W);
  const missing = (W: number) =>
    !reps.length
      ? "– (no B6 in this run)"
      : !mine(W)
      ? `– (no redlease-permits at W=${W} in this run)`
      : `– (no redis-semaphore Semaphore at W=${W} in this run)`;
  const figures = [
    ["acquisitions/s ≥ redis-semaphore Semaphore's (the better of its two settings)", "acqPerSec", false, "acq/s", 0],
    [
      "Redis CPU per acquisition ≤ redis-semaphore Semaphore's (the lower of its two settings)",
      "redisCpuUs",
      true,
      "µs",
      1,
    ],
  ] as const;
  for (const W of TARGET_WS) {
    for (const [what, key, lower, unit, digits] of figures) {
      const t = `3. B6 W=${W} ${what}`;
      const c = contendedRatio(reps, agg, "redlease-permits", PEER_PERMITS, W, key, lower);
      // The floor of the same guarantees against the same peer, and redlease against the floor.
      const fl = contendedRatio(reps, agg, "fairpermits", PEER_PERMITS, W, key, lower);
      const own = contendedRatio(reps, agg, "redlease-permits", ["fairpermits"], W, key, lower);
      const floor = fl && own
        ? `; floor: the fair notified permits with a fence (\`fairpermits\`, ${fmt(fl.mine[key], digits)} ${unit}) ` +
          `${ratio(fl.x)} the peer, redlease ${ratio(own.x)} that floor${own.runs}`
        : "";
      out.push(
        c
          ? {
            target: t,
            measured: `${ratio(c.x)} (${fmt(c.mine[key], digits)} vs ${c.base.variant.label} ` +
              `${fmt(c.base[key], digits)} ${unit}${c.runs}${floor})`,
            met: ok(c.x) ? (lower ? c.x <= 1 : c.x >= 1) : undefined,
          }
          : { target: t, measured: missing(W), met: undefined },
      );
    }
    out.push(
      fairness(
        `3. B6 W=${W}`,
        mine(W),
        reps.length ? `– (no redlease-permits at W=${W} in this run)` : "– (no B6 in this run)",
      ),
    );
  }
  return out;
}

/** Fairness ≥ 0.95 of a variant at one W (its median over runs). */
function fairness(where: string, a: B3Agg | undefined, missing: string): Target {
  const target = `${where} fairness (min/max acquisitions per worker) ≥ 0.95`;
  return a
    ? {
      target,
      measured: `${fmt(a.fairness)} (${fmt(a.minPerWorker)}–${fmt(a.maxPerWorker)})`,
      met: a.fairness >= 0.95,
    }
    : { target, measured: missing, met: undefined };
}

/** Target 4 (B3 at each W): the handoff gap against the `fairfenced` floor, fairness, no failed acquisition. */
function contendedTargets(run: Run, agg: B3Agg[]): Target[] {
  const out: Target[] = [];
  const mine = (W: number) => agg.find((a) => a.variant.id === "redlease" && a.W === W);
  const noB3 = (W: number) =>
    !run.b3.length ? "– (no B3 in this run)" : !mine(W) ? `– (no redlease at W=${W} in this run)` : "";
  for (const W of TARGET_WS) {
    const t = `4. B3 W=${W} cross-worker gap p50 ≤ 1.15× \`fairfenced\` (the fair notified lock with a fence)`;
    const c = contendedRatio(run.b3, agg, "redlease", ["fairfenced"], W, "gapP50Ms", true);
    out.push(
      c
        ? {
          target: t,
          measured: `${ratio(c.x)} (${fmt(c.mine.gapP50Ms, 3)} vs ${fmt(c.base.gapP50Ms, 3)} ms${c.runs})`,
          met: ok(c.x) ? c.x <= 1.15 : undefined,
        }
        : { target: t, measured: noB3(W) || `– (no fairfenced at W=${W} in this run)`, met: undefined },
    );
  }
  for (const W of TARGET_WS) out.push(fairness(`4. B3 W=${W}`, mine(W), noB3(W)));
  const t = "4. B3 no failed acquisitions (10 s wait; every W and run, warm-ups included)";
  const rows = run.b3.filter((r) => r.variant === "redlease");
  if (!rows.length) out.push({ target: t, measured: noB3(0) || "– (no redlease B3 in this run)", met: undefined });
  else {
    const fails = rows.reduce((s, r) => s + r.failures, 0), warm = rows.reduce((s, r) => s + (r.warmFailures ?? 0), 0);
    const ws = [...new Set(rows.map((r) => r.W))].sort((a, b) => a - b).join(", ");
    out.push({ target: t, measured: `${fails} failed, ${warm} in warm-ups (W = ${ws})`, met: fails + warm === 0 });
  }
  return out;
}

/** Issue 30's targets, in its order (1–5), each against a baseline of the same run; undefined `met` = not measured. */
export function targets30(run: Run, unc: UncTargetView[], b3: B3Agg[], label: Label): Target[] {
  const u = uncontendedTargets(run, unc, label);
  const byNumber = (n: string) => u.filter((t) => t.target.startsWith(n));
  return [...byNumber("1."), ...byNumber("2."), ...permitTargets(run), ...contendedTargets(run, b3), ...byNumber("5.")];
}

/** The targets as a table, with how they are judged. */
export function targets30Section(tg: Target[]): string[] {
  return [
    `## redlease against issue 30's targets`,
    "",
    `Every ratio is taken within one run (same server, same minute) and the median of the per-run ratios is compared ` +
    `with the target; with several runs each run's ratio follows ("per run"), and the figures beside it are the ` +
    `medians of the tables above. B1/B2 targets are judged for redlease on node-redis (\`redlease\`, its default ` +
    `client) and on ioredis (\`redlease-io\`, the peers' client) separately. "Peer" = redis-semaphore; "every ` +
    `peer" = redlock, @sesamecare-oss/redlock and redis-semaphore, those in the run, the best of them in each run. ` +
    `In B6 the peer is the better of redis-semaphore's default and 1 ms retry at each W, per figure and run. ` +
    `"floor": where a floor with redlease's guarantees is in the run, what it achieves against the same baseline and ` +
    `redlease against it — on node-redis \`fenced\` (the least a fenced lease does) and \`guarded\` (that with ` +
    `the least client work the guarantees need; left out of Redis CPU, its scripts are \`fenced\`'s), on ioredis ` +
    `\`fenced-io\` (\`fenced\` on an ioredis client); in B6 \`fairpermits\` (the fair notified permits with a fence ` +
    `and an expiring queue). "not measured": the run lacks the phase, library or W.`,
    "",
    table(
      ["target", "measured", "met"],
      tg.map((t) => [t.target, t.measured, t.met === undefined ? "not measured" : t.met ? "yes" : "**no**"]),
    ),
    "",
  ];
}
