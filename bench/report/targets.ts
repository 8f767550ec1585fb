// Report section "redlease against its targets (issue 10)": each target judged by ratios within one run.
import { median } from "../_stats.ts";
import { type B3Agg, med, perRunRatios } from "./aggregate.ts";
import { fmt, ratio, table } from "./format.ts";
import type { B3Rep, Run, UncRep } from "./types.ts";

export interface Target {
  target: string;
  measured: string;
  met: boolean | undefined;
}

/** What the targets need of the B1/B2 aggregate (one entry per library). */
export interface UncTargetView {
  lib: string;
  rows: UncRep[];
  b1p50: number;
  b2: number;
  b2redis: number;
}

/** The W of issue 10's B3 targets (reported as "not measured" when the run has not got them). */
const TARGET_WS = [2, 8, 32];

/** Issue 10's targets, each against a baseline of the same run; undefined `met` = not measured. */
export function targets(
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
        "redlease-glide",
        "redlease-events",
        "redlease-otel",
        "redlease-metrics",
        "raw",
        "ring",
        "fifo",
        "fenced",
        "fenced-io",
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

/** The targets as a table, with how they are judged. */
export function targetsSection(run: Run, tg: Target[]): string[] {
  const md: string[] = [];
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
  return md;
}
