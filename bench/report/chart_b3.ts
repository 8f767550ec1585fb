// The B3 chart (<out>-b3.svg): throughput and cross-worker gap against W, one line per library.
import { type B3Agg, w2Runs } from "./aggregate.ts";
import { COLORS, esc, niceStep } from "./format.ts";
import type { Run } from "./types.ts";

/** The B3 chart: acquisitions/s (left) and the cross-worker gap p50 (right) against W, one line per variant. */
export function chart(b3: B3Agg[], ws: number[], run: Run): string {
  const W = 1120, H = 520, panelW = 470, panelH = 330, top = 60, lefts = [80, 630];
  const ids = [...new Set(b3.map((a) => a.variant.id))];
  const xOf = (left: number, w: number) => {
    const i = ws.indexOf(w);
    return left + 30 + (ws.length === 1 ? panelW / 2 : (i * (panelW - 60)) / (ws.length - 1));
  };
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" ` +
      `font-family="Helvetica, Arial, sans-serif" font-size="12">`,
  );
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">` +
      esc(
        `B3 contended handoff: one name, 1 ms critical section (median of ${run.config.reps} run(s)${
          w2Runs(run) ? `, ${w2Runs(run)} at W = 2` : ""
        }, ${run.date.slice(0, 10)})`,
      ) +
      `</text>`,
  );

  // Left: acquisitions/s, linear.
  const maxT = Math.max(...b3.map((a) => a.acqPerSec).filter(Number.isFinite), 1);
  const tStep = niceStep(maxT / 5);
  const tMax = Math.ceil(maxT / tStep) * tStep;
  const yT = (v: number) => top + panelH - (v / tMax) * panelH;
  // Right: gap ms, log scale.
  const gapsAll = b3.flatMap((a) => [a.gapP50Ms, a.gapP99Ms]).filter((x) => Number.isFinite(x) && x > 0);
  const gMin = Math.pow(10, Math.floor(Math.log10(Math.min(...gapsAll, 0.1))));
  const gMax = Math.pow(10, Math.ceil(Math.log10(Math.max(...gapsAll, 1))));
  const yG = (v: number) =>
    top + panelH -
    ((Math.log10(Math.max(v, gMin)) - Math.log10(gMin)) / (Math.log10(gMax) - Math.log10(gMin))) * panelH;

  for (const [p, left] of lefts.entries()) {
    out.push(`<rect x="${left}" y="${top}" width="${panelW}" height="${panelH}" fill="none" stroke="#999"/>`);
    for (const w of ws) {
      const x = xOf(left, w);
      out.push(`<line x1="${x}" y1="${top}" x2="${x}" y2="${top + panelH}" stroke="#eee"/>`);
      out.push(`<text x="${x}" y="${top + panelH + 16}" text-anchor="middle">${w}</text>`);
    }
    out.push(
      `<text x="${left + panelW / 2}" y="${top + panelH + 34}" text-anchor="middle">W (worker processes)</text>`,
    );
    if (p === 0) {
      for (let v = 0; v <= tMax + 1e-9; v += tStep) {
        out.push(`<line x1="${left}" y1="${yT(v)}" x2="${left + panelW}" y2="${yT(v)}" stroke="#eee"/>`);
        out.push(`<text x="${left - 6}" y="${yT(v) + 4}" text-anchor="end">${Math.round(v)}</text>`);
      }
      out.push(
        `<text x="${left + panelW / 2}" y="${
          top - 10
        }" text-anchor="middle" font-weight="bold">acquisitions / s</text>`,
      );
    } else {
      for (let e = Math.log10(gMin); e <= Math.log10(gMax) + 1e-9; e++) {
        const v = Math.pow(10, e);
        out.push(`<line x1="${left}" y1="${yG(v)}" x2="${left + panelW}" y2="${yG(v)}" stroke="#eee"/>`);
        out.push(`<text x="${left - 6}" y="${yG(v) + 4}" text-anchor="end">${v >= 1 ? v : v.toPrecision(1)}</text>`);
      }
      out.push(
        `<text x="${left + panelW / 2}" y="${top - 10}" text-anchor="middle" font-weight="bold">` +
          `gap release → next holder, ms (log): p50 solid, p99 dotted</text>`,
      );
    }
  }
  for (const id of ids) {
    const pts = b3.filter((a) => a.variant.id === id).sort((a, b) => a.W - b.W);
    const color = COLORS[id] ?? "#777";
    const width = id === "redlease" ? 3 : 1.8;
    const line = (left: number, y: (a: B3Agg) => number, dash = "") => {
      const ok = pts.filter((a) => Number.isFinite(y(a)));
      if (!ok.length) return;
      out.push(
        `<polyline fill="none" stroke="${color}" stroke-width="${dash ? 1.2 : width}"${
          dash ? ` stroke-dasharray="${dash}"` : ""
        } ` +
          `points="${ok.map((a) => `${xOf(left, a.W).toFixed(1)},${y(a).toFixed(1)}`).join(" ")}"/>`,
      );
      if (!dash) {
        for (const a of ok) {
          out.push(`<circle cx="${xOf(left, a.W).toFixed(1)}" cy="${y(a).toFixed(1)}" r="3.5" fill="${color}"/>`);
        }
      }
    };
    line(lefts[0], (a) => yT(a.acqPerSec));
    line(lefts[1], (a) => (a.gapP50Ms > 0 ? yG(a.gapP50Ms) : NaN));
    line(lefts[1], (a) => (a.gapP99Ms > 0 ? yG(a.gapP99Ms) : NaN), "2,3");
  }
  // Legend
  const perRow = 3;
  ids.forEach((id, i) => {
    const v = b3.find((a) => a.variant.id === id)!.variant;
    const x = 80 + (i % perRow) * 340, y = H - 66 + Math.floor(i / perRow) * 20;
    out.push(
      `<line x1="${x}" y1="${y - 4}" x2="${x + 24}" y2="${y - 4}" stroke="${COLORS[id] ?? "#777"}" stroke-width="${
        id === "redlease" ? 3 : 2
      }"/>`,
    );
    out.push(
      `<text x="${x + 30}" y="${y}">${
        esc(v.label.replace("raw node-redis (SET NX PX + EVALSHA)", "raw node-redis (10 ms poll)"))
      }</text>`,
    );
  });
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}
