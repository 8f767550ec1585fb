// Formatting shared by the report's sections: numbers, ratios and markdown tables, and the SVG charts' escaping,
// axis steps and one colour per library.

/** A figure: thousands separated from 100 up, else at most `digits` decimals; "–" for NaN or infinity. */
export const fmt = (x: number, digits = 2) =>
  Number.isFinite(x)
    ? (Math.abs(x) >= 100 ? Math.round(x).toLocaleString("en-US") : String(Number(x.toFixed(digits))))
    : "–";
/** A ratio as "1.23×"; "–" when not measured. */
export const ratio = (x: number) => (Number.isFinite(x) ? `${x.toFixed(2)}×` : "–");
/** A share as "42 %"; "–" when not measured. */
export const pctS = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(0)} %` : "–");

/** A markdown table; "|" inside a cell is escaped. */
export function table(head: string[], rows: string[][]): string {
  const cell = (c: string) => c.replaceAll("|", "\\|"); // e.g. commandstats' "client|setinfo"
  return [
    `| ${head.map(cell).join(" | ")} |`,
    `|${head.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${r.map(cell).join(" | ")} |`),
  ].join("\n");
}

/** One colour per variant id, the same in both charts. */
export const COLORS: Record<string, string> = {
  "redlease": "#d62728",
  "raw": "#222222",
  "redlock": "#1f77b4",
  "redlock@1ms": "#6baed6",
  "sesame": "#2ca02c",
  "sesame@1ms": "#98df8a",
  "semaphore": "#9467bd",
  "semaphore@1ms": "#c5b0d5",
  "ring": "#aaaaaa",
  "fifo": "#ff7f0e",
  "redlease-io": "#e377c2",
  "redlease-glide": "#17becf",
  "fenced": "#bcbd22",
  "fenced-io": "#e7e75a",
  "guarded": "#dbdb8d",
  "fairfenced": "#8c564b",
  "fairpermits": "#c49c94",
};

/** Text escaped for SVG. */
export function esc(s: string): string {
  return s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

/** The smallest axis step of 1, 2, 2.5 or 5 × a power of ten that is at least `x`. */
export function niceStep(x: number): number {
  const p = Math.pow(10, Math.floor(Math.log10(Math.max(x, 1e-9))));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}
