// Plain-text tables for the terminal: one header row, columns padded to their widest cell (in terminal columns).
import { displayWidth } from "./_text.ts";

/** Column alignment: numbers read better right-aligned. */
export type Align = "left" | "right";

export function textTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly Align[],
): string {
  const widths = headers.map((h, i) => Math.max(displayWidth(h), ...rows.map((r) => displayWidth(r[i] ?? ""))));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => {
      const last = i === cells.length - 1;
      const pad = " ".repeat(widths[i] - displayWidth(c));
      if (align[i] === "right") return pad + c;
      return last ? c : c + pad;
    }).join("  ").trimEnd();
  return [line(headers), ...rows.map(line)].join("\n") + "\n";
}
