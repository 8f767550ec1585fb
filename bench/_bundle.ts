// The one way the benchmarks bundle redlease: a checkout's mod.ts as what a package would ship to Node (ESM, the
// Redis clients left external), so that no loader's helpers are timed.
import { join } from "node:path";
import { build } from "esbuild";

/** Bundle `tree`'s mod.ts (a checkout of redlease), or another entry point of it (`src/fence.ts`), into `outfile`. */
export async function bundleRedlease(tree: string, outfile: string, entry = "mod.ts"): Promise<void> {
  await build({
    entryPoints: [join(tree, entry)],
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    external: ["redis", "ioredis"],
    outfile,
    logLevel: "silent",
  });
}
