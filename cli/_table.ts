// Plain-text tables for the terminal: one header row, columns padded to their widest cell.

/** Column alignment: numbers read better right-aligned. */
export type Align = "left" | "right";

export function textTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly Align[],
): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => {
      const last = i === cells.length - 1;
      if (align[i] === "right") return c.padStart(widths[i]);
      return last ? c : c.padEnd(widths[i]);
    }).join("  ").trimEnd();
  return [line(headers), ...rows.map(line)].join("\n") + "\n";
}
