// The benchmark report: the markdown (one section per module of this folder, in the order below), the B3 chart and
// the summary chart, from a results file (bench/results/<out>.json).
import { aggregateB3, aggregateUnc, labelOf } from "./aggregate.ts";
import { b3Section } from "./b3.ts";
import { b4Section } from "./b4.ts";
import { b5Section } from "./b5.ts";
import { b6Section } from "./b6.ts";
import { b7Section } from "./b7.ts";
import { chart } from "./chart_b3.ts";
import { header } from "./header.ts";
import { settingsSection } from "./settings.ts";
import { summaryChart } from "./summary_chart.ts";
import { targets, targetsSection } from "./targets.ts";
import { targets30, targets30Section } from "./targets30.ts";
import type { Run } from "./types.ts";
import { uncontendedSection } from "./uncontended.ts";

export type { B3Rep, ColdRep, Run, Size, UncRep, Variant } from "./types.ts";

/**
 * The markdown report, `svg` = the B3 chart (`<out>-b3.svg`: throughput and gap against W) and `summarySvg` = bars of
 * every B-figure for each library (`<out>-summary.svg`); an SVG is undefined when the run has nothing for it. Sets
 * `run.summary` (issue 10's and issue 30's targets and the B3 aggregate), which bench/run.ts writes back into the
 * results file.
 */
export function render(run: Run): { markdown: string; svg: string | undefined; summarySvg: string | undefined } {
  const uncAgg = aggregateUnc(run);
  const label = labelOf(run);
  const b3 = aggregateB3(run);
  const ws = [...new Set(b3.map((r) => r.W))].sort((a, b) => a - b);
  const tg = targets(run, uncAgg, b3, ws, label);
  const tg30 = targets30(run, uncAgg, b3, label);
  const md = [
    ...header(run),
    ...uncontendedSection(run, uncAgg, label),
    ...b3Section(run, b3, ws),
    ...b6Section(run),
    ...b7Section(run),
    ...b4Section(uncAgg, b3, label),
    ...b5Section(run, label),
    ...targets30Section(tg30),
    ...targetsSection(run, tg),
    ...settingsSection(run),
  ];
  run.summary = { targets: tg, targets30: tg30, b3: b3.map((a) => ({ ...a, variant: a.variant.id })) };
  return {
    markdown: md.join("\n"),
    svg: b3.length ? chart(b3, ws, run) : undefined,
    summarySvg: uncAgg.length || b3.length || run.cold.length ? summaryChart(run, uncAgg, b3, ws, label) : undefined,
  };
}
