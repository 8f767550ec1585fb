// Report section B1/B2: uncontended acquire + release cycles per library.
import type { Label, UncAgg } from "./aggregate.ts";
import { fmt, ratio, table } from "./format.ts";
import type { Run } from "./types.ts";

/** B1 sequential and B2 concurrent uncontended cycles, one row per library (none without B1/B2). */
export function uncontendedSection(run: Run, uncAgg: UncAgg[], label: Label): string[] {
  const md: string[] = [];
  if (uncAgg.length) {
    md.push(`## B1 sequential and B2 concurrent uncontended cycles (acquire + release, fresh names)`);
    md.push("");
    md.push(
      `One fresh worker process per library and run; B1 = one loop for ${run.config.b1Ms} ms, B2 = ` +
        `${run.config.b2Loops} loops on one client for ${run.config.b2Ms} ms. Retry settings do not come into play ` +
        `without contention, so the peers run once, with their defaults. Round trips per cycle are counted at the ` +
        `client socket over ${run.config.probeCycles} extra sequential cycles. "Others' CPU" is what the rest ` +
        `of the machine used during the B2 window (all of /proc/stat's busy time minus Redis's, the worker's and the ` +
        `parent's), in % of one core: on this 2-core machine, tens of % there mean the figures are not a quiet run's.`,
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
        "others' CPU in B2",
      ],
      uncAgg.map((u) => [
        label(u.lib),
        fmt(u.b1),
        ratio(u.b1x),
        `${fmt(u.b1p50, 3)} / ${fmt(u.b1p99, 3)}`,
        u.lib === "redlease-glide" ? "– (2 commands)" : fmt(u.rt), // (GLIDE's sockets are its Rust core's, not Node's)
        fmt(u.b2),
        ratio(u.b2x),
        `${fmt(u.b2p50)} / ${fmt(u.b2p99)}`,
        u.b2others === undefined ? "–" : `${fmt(u.b2others)} %`,
      ]),
    ));
    md.push("");
  }
  return md;
}
