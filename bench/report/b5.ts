// Report section B5: cold start to the first lease, and bundle size.
import { type Label, med } from "./aggregate.ts";
import { fmt, table } from "./format.ts";
import type { Run } from "./types.ts";

/** B5 cold start and bundle size, one row per library (none without B5). */
export function b5Section(run: Run, label: Label): string[] {
  const md: string[] = [];
  if (run.cold.length) {
    md.push(`## B5 cold start and size`);
    md.push("");
    md.push(
      `A fresh process per library and run, timed from just before the dynamic import of its client (node-redis or ` +
        `ioredis, imported first and timed apart) and the library (Node + tsx boot before that is not included) to ` +
        `the first lease on a new connection; \`SCRIPT FLUSH\` before ` +
        `each, so first-use script loading is included. "redlease" imports the package as built (its tsup ` +
        `build: dist/mod.js, what users install); "redlease (tsx)" imports mod.ts through tsx. Round trips counted at the client socket ` +
        `(TCP connect not included in round trips; the client's own handshake, node-redis's CLIENT SETINFO, is), in ` +
        `brackets those of the first acquire alone. "redlease HTTP (tsx)": mod.ts and the HTTP adapter through tsx, ` +
        `a new \`upstash()\` driver through harness/http_bridge.ts (started before timing; no client to import or ` +
        `connect); its round trips are HTTP requests, one command each. Size: esbuild bundle, minified, ESM, client external, gzip -9 ` +
        `(node:zlib).`,
    );
    md.push("");
    const whiches = [...new Set(run.cold.map((c) => c.which))];
    const rows = whiches.map((w) => {
      const cs = run.cold.filter((c) => c.which === w);
      const lib = cs[0].lib;
      const size = w === lib ? run.sizes.find((s) => s.name === lib) : undefined;
      const cmds = Object.entries(cs[0].commandsToLease).map(([k, v]) => `${k}×${v}`).join(" ");
      return [
        w === lib ? label(lib) : w,
        fmt(med(cs, (c) => c.importClientMs), 1),
        fmt(med(cs, (c) => c.importMs), 1),
        fmt(med(cs, (c) => c.connectMs), 1),
        fmt(med(cs, (c) => c.acquireMs), 1),
        fmt(med(cs, (c) => c.toFirstLeaseMs), 1),
        `${fmt(med(cs, (c) => c.connectsToLease))} + ${fmt(med(cs, (c) => c.roundTripsToLease))}` +
        (cs.every((c) => c.roundTripsAcquire !== undefined) ? ` (${fmt(med(cs, (c) => c.roundTripsAcquire!))})` : ""),
        cmds,
        size ? `${size.gzipBytes.toLocaleString("en-US")} (${size.minBytes.toLocaleString("en-US")} min)` : "",
      ];
    });
    md.push(table(
      [
        "library",
        "import client ms",
        "import library ms",
        "connect ms",
        "first acquire ms",
        "import → first lease ms",
        "connects + round trips (of which the first acquire)",
        "commands to first lease",
        "min+gz bytes",
      ],
      rows,
    ));
    md.push("");
    for (const s of run.sizes) {
      md.push(
        `- ${s.name}: ${s.note}; largest inputs: ${
          s.inputs.slice(0, 4).map((i) => `${i.file} ${i.bytes} B`).join(", ")
        }`,
      );
    }
    md.push("");
  }
  return md;
}
