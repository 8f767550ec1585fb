// The report's head: title, command line, machine, phases, load average and runs per figure.
import { w2Runs } from "./aggregate.ts";
import type { Run } from "./types.ts";

/** The title, the command and the machine, the phases, the load and how many runs each figure is the median of. */
export function header(run: Run): string[] {
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
  return md;
}
