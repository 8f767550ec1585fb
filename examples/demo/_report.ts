// Output of the demo: progress bars on stderr (drawn only on a terminal; otherwise one line per phase) and
// markdown tables on stdout.
import process from "node:process";

export class Progress {
  readonly #tty = Boolean(process.stderr.isTTY);
  readonly #t0 = performance.now();
  #drawn = 0;

  constructor(readonly label: string, readonly total: number, readonly unit: string) {
    this.update(0);
  }

  update(done: number): void {
    if (!this.#tty) return;
    const now = performance.now();
    if (now - this.#drawn < 80 && done < this.total) return;
    this.#drawn = now;
    const width = 30;
    const frac = this.total === 0 ? 1 : Math.min(1, done / this.total);
    const full = Math.round(frac * width);
    const bar = "█".repeat(full) + "░".repeat(width - full);
    const secs = ((now - this.#t0) / 1_000).toFixed(1);
    process.stderr.write(
      `\r\x1b[2K  ${this.label.padEnd(34)} ${bar} ${Math.round(done)}/${this.total} ${this.unit}  ${secs}s`,
    );
  }

  finish(summary: string): void {
    const secs = ((performance.now() - this.#t0) / 1_000).toFixed(1);
    const line = `  ${this.label.padEnd(34)} done in ${secs}s: ${summary}\n`;
    process.stderr.write(this.#tty ? `\r\x1b[2K${line}` : line);
  }
}

/** A markdown table; `right` marks the columns to right-align. */
export function markdown(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  right: readonly boolean[],
): string {
  const widths = headers.map((h, i) => Math.max(3, h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => (right[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(" | ")} |`;
  const rule = `|${widths.map((w, i) => (right[i] ? `${"-".repeat(w + 1)}:` : `${"-".repeat(w + 2)}`)).join("|")}|`;
  return [line(headers), rule, ...rows.map(line)].join("\n") + "\n";
}

export const int = (n: number) => Math.round(n).toLocaleString("en-US");
export const ms = (n: number) => (Number.isNaN(n) ? "–" : n < 10 ? `${n.toFixed(1)} ms` : `${int(n)} ms`);
