// Report section B7: W worker processes sharing the permits of one name with holds of mixed weights.
import { HEAVY, PERMITS } from "../_libs.ts";
import { aggregateB3, med } from "./aggregate.ts";
import { fmt, table } from "./format.ts";
import type { Run } from "./types.ts";

/** B7 weighted permits, one row per (library, W) (none without B7). */
export function b7Section(run: Run): string[] {
  const md: string[] = [];
  const b7 = run.b7?.length ? aggregateB3(run, run.b7) : [];
  if (!b7.length) return md;
  md.push(
    `## B7 weighted permits: W worker processes, ${PERMITS} permits of one name, every fourth worker takes ${HEAVY}`,
  );
  md.push("");
  md.push(
    `As B6, with every fourth worker (seats 0, 4, …) taking ${HEAVY} of the ${PERMITS} permits at once and the others ` +
      `1 (redlease's \`weight\` against redis-semaphore's MultiSemaphore). Fairness = min/max acquisitions per ` +
      `worker; heavy ÷ light = acquisitions per heavy worker over those per light worker (1: as many turns each; ` +
      `near 0: the heavy ones starve behind the light ones); "> n" = moments with more than ${PERMITS} permits taken ` +
      `(must be 0; on the parent's clock).`,
  );
  md.push("");
  const rows: string[][] = [];
  for (const a of b7) {
    const reps = run.b7!.filter((r) => r.variant === a.variant.id && r.W === a.W);
    rows.push([
      a.variant.label,
      String(a.W),
      fmt(a.acqPerSec),
      `${fmt(a.fairness)} (${fmt(a.minPerWorker)}–${fmt(a.maxPerWorker)})`,
      fmt(med(reps, (r) => r.heavyPerLight ?? NaN)),
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
      "fairness (min–max)",
      "heavy ÷ light",
      "commands / acq (client / all)",
      "Redis CPU µs / acq",
      "failed",
      "wait p99 / max ms",
      "> n",
    ],
    rows,
  ));
  md.push("");
  return md;
}
