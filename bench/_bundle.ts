// The one way the benchmarks bundle redlease: a checkout's mod.ts as what a package would ship to Node (ESM, the
// Redis clients left external), so that no loader's helpers are timed.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { adapterBundle } from "./_libs.ts";

const IOREDIS_ADAPTER = "src/adapters/ioredis.ts";

/**
 * Bundle `tree`'s mod.ts (a checkout of redlease), or another entry point of it (`src/fence.ts`), into `outfile`.
 * With mod.ts, the same tree's ioredis adapter (`redlease/ioredis`) goes beside it as `adapterBundle(outfile)`, so
 * that the `redlease-io` row runs a bundle of the tree under test too, not the current src/ through tsx.
 */
export async function bundleRedlease(tree: string, outfile: string, entry = "mod.ts"): Promise<void> {
  if (entry === "mod.ts" && existsSync(join(tree, IOREDIS_ADAPTER))) {
    await bundleRedlease(tree, adapterBundle(outfile), IOREDIS_ADAPTER);
  }
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
