// The summary chart (<out>-summary.svg): every B-figure as bars, redlease beside the peers, with the floors (raw
// node-redis, the token ring).
import { type B3Agg, med } from "./aggregate.ts";
import { COLORS, esc, fmt, niceStep } from "./format.ts";
import type { Run } from "./types.ts";

interface Bar {
  label: string;
  value: number;
  color: string;
  bold?: boolean;
  /** Stacked: the first `solid` of `value` in full colour, the rest pale (B5: the client's handshake). */
  solid?: number;
  /** The value label; default: the value. */
  text?: string;
}

interface Scale {
  log: boolean;
  lo: number;
  hi: number;
  ticks: number[];
}

function makeScale(values: number[], log: boolean): Scale {
  const vs = values.filter((v) => Number.isFinite(v) && (log ? v > 0 : v >= 0));
  if (log) {
    const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...vs, 1))));
    const hi = Math.max(Math.pow(10, Math.ceil(Math.log10(Math.max(...vs, 1)))), lo * 10);
    const ticks: number[] = [];
    for (let e = Math.log10(lo); e <= Math.log10(hi) + 1e-9; e++) ticks.push(Math.pow(10, e));
    return { log, lo, hi, ticks };
  }
  const max = Math.max(...vs, 1e-9);
  const step = niceStep(max / 4);
  const hi = Math.ceil(max / step - 1e-9) * step;
  const ticks: number[] = [];
  for (let v = 0; v <= hi + step / 1e6; v += step) ticks.push(v);
  return { log, lo: 0, hi, ticks };
}

const ROW = 17;

/** One panel of horizontal bars; returns its height. */
function barPanel(
  out: string[],
  p: {
    x: number;
    y: number;
    w: number;
    title: string;
    bars: Bar[];
    scale: Scale;
    labelW: number;
    floor?: { value: number; label: string };
    digits?: number;
  },
): number {
  const x0 = p.x + p.labelW + 6, area = p.w - p.labelW - 6 - 62; // 62: room for the value label after the bar
  const pos = (v: number) => {
    const s = p.scale;
    const f = s.log
      ? (Math.log10(Math.max(v, s.lo)) - Math.log10(s.lo)) / (Math.log10(s.hi) - Math.log10(s.lo))
      : v / s.hi;
    return x0 + Math.min(1, Math.max(0, f)) * area;
  };
  const top = p.y + 32; // title, then a line for the floor's label
  out.push(`<text x="${p.x}" y="${p.y + 12}" font-weight="bold">${esc(p.title)}</text>`);
  if (!p.bars.length) {
    out.push(`<text x="${x0}" y="${top + 10}" fill="#888">not measured in this run</text>`);
    return 32 + 24;
  }
  const bottom = top + p.bars.length * ROW + 2;
  for (const t of p.scale.ticks) {
    const x = pos(t).toFixed(1);
    out.push(`<line x1="${x}" y1="${top - 2}" x2="${x}" y2="${bottom}" stroke="#eee"/>`);
    out.push(
      `<text x="${x}" y="${bottom + 12}" text-anchor="middle" font-size="10" fill="#666">` +
        `${t >= 1 || t === 0 ? fmt(t) : t.toPrecision(1)}</text>`,
    );
  }
  out.push(`<line x1="${x0}" y1="${top - 2}" x2="${x0}" y2="${bottom}" stroke="#999"/>`);
  if (p.floor && Number.isFinite(p.floor.value) && (!p.scale.log || p.floor.value > 0)) {
    const x = pos(p.floor.value).toFixed(1);
    out.push(`<line x1="${x}" y1="${top - 4}" x2="${x}" y2="${bottom}" stroke="#222" stroke-dasharray="4,3"/>`);
    out.push(
      `<text x="${x}" y="${top - 7}" text-anchor="middle" font-size="10" fill="#222">${esc(p.floor.label)}</text>`,
    );
  }
  p.bars.forEach((b, i) => {
    const y = top + i * ROW;
    if (p.labelW > 0) {
      out.push(
        `<text x="${x0 - 6}" y="${y + 11}" text-anchor="end" font-size="11"${b.bold ? ` font-weight="bold"` : ""}>` +
          `${esc(b.label)}</text>`,
      );
    }
    const measured = Number.isFinite(b.value) && (p.scale.log ? b.value > 0 : b.value >= 0);
    let end = x0;
    if (measured) {
      end = pos(b.value);
      const solidEnd = b.solid !== undefined ? pos(b.solid) : end;
      if (end > solidEnd) {
        out.push(
          `<rect x="${solidEnd.toFixed(1)}" y="${y + 1}" width="${
            (end - solidEnd).toFixed(1)
          }" height="12" fill="${b.color}" fill-opacity="0.3"/>`,
        );
      }
      out.push(
        `<rect x="${x0}" y="${y + 1}" width="${Math.max(solidEnd - x0, 1).toFixed(1)}" height="12" fill="${b.color}"/>`,
      );
    }
    out.push(
      `<text x="${(end + 4).toFixed(1)}" y="${y + 11}" font-size="11"${b.bold ? ` font-weight="bold"` : ""}>` +
        `${esc(measured ? b.text ?? fmt(b.value, p.digits) : "–")}</text>`,
    );
  });
  return bottom + 16 - p.y;
}

function shortLabel(label: string): string {
  return label
    .replace(/ \(default retry\)/, "")
    .replace(/ \(1 ms retry\)/, ", 1 ms retry")
    .replace(/ 5\.0\.0-beta\.2/, "")
    .replace(/^raw node-redis \(SET NX PX \+ EVALSHA\)$/, "raw node-redis")
    .replace(/^floor: pub\/sub token ring \(not a lock\)$/, "pub/sub token ring");
}

const COLD_COLORS: Record<string, string> = { "redlease (tsx)": "#e8787a", "redlease HTTP (tsx)": "#f4a3a4" };

/** The summary chart: a panel of bars per figure (B1 p50, B2 cycles/s and Redis CPU, B5 round trips, B3 per W). */
export function summaryChart(
  run: Run,
  unc: { lib: string; b1p50: number; b2: number; b2redis: number }[],
  b3: B3Agg[],
  ws: number[],
  label: (lib: string) => string,
): string {
  const W = 1120, colW = 530, gap = 40, left = 20;
  const body: string[] = [];
  const floorMark = (lib: string) => (lib === "raw" ? " (floor)" : "");
  const uncBars = (f: (u: (typeof unc)[number]) => number, digits?: number): Bar[] =>
    unc.map((u) => ({
      label: shortLabel(label(u.lib)) + floorMark(u.lib),
      value: f(u),
      color: COLORS[u.lib] ?? "#777",
      bold: u.lib === "redlease",
      text: digits === undefined ? undefined : fmt(f(u), digits),
    }));
  const rawU = unc.find((u) => u.lib === "raw");
  const rawFloor = (f: (u: (typeof unc)[number]) => number) =>
    rawU ? { value: f(rawU), label: "raw (floor)" } : undefined;
  const linear = (bars: Bar[]) => makeScale(bars.map((b) => b.value), false);

  let y = 74;
  // Row 1: B1 p50, B2 cycles/s
  {
    const b1 = uncBars((u) => u.b1p50 * 1000, 0);
    const b2 = uncBars((u) => u.b2);
    const h1 = barPanel(body, {
      x: left,
      y,
      w: colW,
      labelW: 170,
      bars: b1,
      scale: linear(b1),
      floor: rawFloor((u) => u.b1p50 * 1000),
      title: "B1 sequential acquire + release: cycle p50, µs (lower is better)",
    });
    const h2 = barPanel(body, {
      x: left + colW + gap,
      y,
      w: colW,
      labelW: 170,
      bars: b2,
      scale: linear(b2),
      floor: rawFloor((u) => u.b2),
      title: `B2 ${run.config.b2Loops ?? 64} concurrent loops: cycles/s (higher is better)`,
    });
    y += Math.max(h1, h2) + 14;
  }
  // Row 2: B2 Redis CPU per cycle, B5 round trips to the first lease
  {
    const cpu = uncBars((u) => u.b2redis, 1);
    const h1 = barPanel(body, {
      x: left,
      y,
      w: colW,
      labelW: 170,
      bars: cpu,
      scale: linear(cpu),
      floor: rawFloor((u) => u.b2redis),
      title: "B2 Redis CPU per acquire + release, µs (lower is better)",
    });
    const whiches = [...new Set(run.cold.map((c) => c.which))];
    const cold: Bar[] = whiches.map((w) => {
      const cs = run.cold.filter((c) => c.which === w);
      const lib = cs[0].lib;
      const total = med(cs, (c) => c.roundTripsToLease);
      const split = cs.every((c) => c.roundTripsAcquire !== undefined);
      const own = split ? med(cs, (c) => c.roundTripsAcquire!) : total;
      return {
        label: (w === lib ? shortLabel(label(lib)) : w) + floorMark(w),
        value: total,
        solid: own,
        color: COLD_COLORS[w] ?? COLORS[lib] ?? "#777",
        bold: w === "redlease" || w === "redlease HTTP (tsx)",
        text: !split
          ? `${fmt(total)} incl. handshake`
          : total > own
          ? `${fmt(own)} + ${fmt(total - own)} handshake`
          : fmt(own),
      };
    });
    const rawC = cold.find((b) => b.label.startsWith("raw node-redis"));
    const h2 = barPanel(body, {
      x: left + colW + gap,
      y,
      w: colW,
      labelW: 170,
      bars: cold,
      scale: linear(cold),
      floor: rawC ? { value: rawC.solid ?? rawC.value, label: "raw (floor)" } : undefined,
      title: "B5 round trips to the first lease, fresh client (lower is better)",
    });
    y += Math.max(h1, h2) + 14;
  }
  // Row 3: B3 gap p50 per W, one shared log scale
  {
    const ids = [...new Set(b3.map((a) => a.variant.id))];
    const scale = makeScale(b3.map((a) => a.gapP50Ms), true);
    body.push(
      `<text x="${left}" y="${y + 12}" font-weight="bold">` +
        esc(`B3 contended handoff: cross-worker gap p50, ms (log scale; lower is better), W worker processes`) +
        `</text>`,
    );
    y += 20;
    if (!b3.length) {
      body.push(`<text x="${left + 176}" y="${y + 14}" fill="#888">not measured in this run</text>`);
      y += 30;
    } else {
      const labelW = 220, colB = (W - 2 * left - labelW) / ws.length;
      let h = 0;
      ws.forEach((w, i) => {
        const ring = b3.find((a) => a.variant.id === "ring" && a.W === w);
        const bars: Bar[] = ids.map((id) => {
          const a = b3.find((x) => x.variant.id === id && x.W === w);
          const v = run.variants.find((x) => x.id === id)!;
          return {
            label: id === "ring"
              ? "pub/sub token ring (floor)"
              : id === "fifo"
              ? "minimal fair lock (floor)"
              : id === "fairfenced"
              ? "fair lock + fence + expiring queue (floor)"
              : id === "raw"
              ? "raw node-redis (10 ms poll)"
              : shortLabel(v.label),
            value: a ? a.gapP50Ms : NaN,
            color: COLORS[id] ?? "#777",
            bold: id === "redlease",
            text: a ? fmt(a.gapP50Ms, a.gapP50Ms < 1 ? 3 : 2) : undefined,
          };
        });
        h = Math.max(
          h,
          barPanel(body, {
            x: i === 0 ? left : left + labelW + i * colB,
            y,
            w: i === 0 ? labelW + colB : colB,
            labelW: i === 0 ? labelW - 6 : 0,
            bars,
            scale,
            floor: ring ? { value: ring.gapP50Ms, label: "ring (floor)" } : undefined,
            title: "", // the "W = …" heading is drawn over each column below
          }),
        );
        body.push(
          `<text x="${(i === 0 ? left + labelW : left + labelW + i * colB) + colB / 2}" y="${y + 12}" ` +
            `text-anchor="middle" font-weight="bold">W = ${w}</text>`,
        );
      });
      y += h + 6;
    }
  }
  const H = y + 34;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
      `font-family="Helvetica, Arial, sans-serif" font-size="12">`,
  );
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">` +
      esc(`redlease beside its peers: B1, B2, B3, B5 (medians over runs, ${run.date.slice(0, 10)})`) + `</text>`,
  );
  for (
    const [i, line] of [
      `Dashed line = floor: raw node-redis (SET NX PX + compare-and-delete) in B1, B2, B5; the pub/sub token ring (not ` +
      `a lock) in B3.`,
      `Each bar is labelled with its value. B5: the first acquire's own round trips + the client's connection handshake (pale).`,
    ].entries()
  ) {
    out.push(`<text x="${W / 2}" y="${44 + 16 * i}" text-anchor="middle" fill="#444">${esc(line)}</text>`);
  }
  out.push(...body);
  out.push(
    `<text x="${left}" y="${H - 12}" font-size="10" fill="#666">` +
      esc(`${run.command} — details and per-run ratios in the .md next to this file`) + `</text>`,
  );
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}
