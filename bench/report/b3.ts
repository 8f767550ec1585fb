// Report section B3: the contended handoff between W worker processes.
import type { B3Agg } from "./aggregate.ts";
import { fmt, pctS, ratio, table } from "./format.ts";
import type { Run } from "./types.ts";

/** B3 contended handoff, one row per (library, W) (none without B3). */
export function b3Section(run: Run, b3: B3Agg[], ws: number[]): string[] {
  const md: string[] = [];
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
        // (GLIDE's Rust core has sockets of its own: nothing is read or written at a Node socket to split the gap at.)
        a.variant.lib === "redlease-glide"
          ? "–"
          : `${fmt(a.split.releaseToWrite, 3)} + ${fmt(a.split.writeToRead, 3)} + ${fmt(a.split.readToAcquired, 3)}`,
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
  return md;
}
