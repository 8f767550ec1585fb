// Report sections at the end: each library's settings, and the errors of the run.
import type { Run } from "./types.ts";

/** Each library's settings, then the run's errors (if any), each cut to one line of at most 400 characters. */
export function settingsSection(run: Run): string[] {
  const md: string[] = [];
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
  return md;
}
