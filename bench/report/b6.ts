// Report section B6: W worker processes sharing the permits of one name.
import { PERMITS } from "../_libs.ts";
import { aggregateB3 } from "./aggregate.ts";
import { fmt, ratio, table } from "./format.ts";
import type { Run } from "./types.ts";

/** B6 permits, one row per (library, W) (none without B6). */
export function b6Section(run: Run): string[] {
  const md: string[] = [];
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
  return md;
}
