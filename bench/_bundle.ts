// The one way the benchmarks load redlease: a checkout built as the package ships it (its own tsup.config.ts, the
// ESM entry points users install: `redlease` = dist/mod.js, `redlease/ioredis` = dist/ioredis.js, `redlease/glide` =
// dist/glide.js), built into a
// directory of the benchmark's own, so that edits to src/ during a run do not mix versions and no loader's helpers
// are timed. A checkout without tsup.config.ts (older than the package build) is bundled by esbuild instead.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { build } from "esbuild";
import { adapterBundle } from "./_libs.ts";

const IOREDIS_ADAPTER = "src/adapters/ioredis.ts";
const ENTRY_NAMES: Record<string, string> = { "mod.ts": "mod", [IOREDIS_ADAPTER]: "ioredis", "src/fence.ts": "fence" };
const here = dirname(new URL(import.meta.url).pathname);

/**
 * Build `tree` (a checkout of redlease) and make `outfile` (ending in .mjs or .js) the module of its entry point
 * `entry` (mod.ts, src/fence.ts or the ioredis adapter): a one-line re-export of the built file, so that callers
 * import one file as before. With mod.ts, `adapterBundle(outfile)` re-exports the same build's ioredis adapter, so
 * that the `redlease-io` row runs the tree under test too. Returns the bytes of the built ESM output the entry loads
 * (its file and the shared chunks of the build).
 */
export async function bundleRedlease(tree: string, outfile: string, entry = "mod.ts"): Promise<number> {
  tree = resolve(tree);
  const name = ENTRY_NAMES[entry];
  if (!name || !existsSync(join(tree, "tsup.config.ts"))) return await esbuildBundle(tree, outfile, entry);
  const dir = `${outfile}.dist`;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dirname(outfile), { recursive: true });
  // The tree's own build, minus the type declarations (nothing at run time) and the CLI (not a library entry).
  const tsup = [join(tree, "node_modules/.bin/tsup"), join(here, "../node_modules/.bin/tsup")].find(existsSync)!;
  execFileSync(tsup, ["--out-dir", dir, "--no-dts"], { cwd: tree, stdio: "pipe" });
  const reexport = (file: string, built: string) =>
    writeFileSync(file, `export * from "./${basename(dir)}/${built}.js";\n`);
  reexport(outfile, name);
  if (entry === "mod.ts") reexport(adapterBundle(outfile), "ioredis");
  // (A tree from before redlease/glide has no GLIDE adapter: its redlease-glide row cannot run.)
  if (entry === "mod.ts" && existsSync(join(dir, "glide.js"))) reexport(adapterBundle(outfile, "glide"), "glide");
  return statSync(join(dir, `${name}.js`)).size +
    readdirSync(dir).filter((f) => /^chunk-.*\.js$/.test(f)).reduce((n, f) => n + statSync(join(dir, f)).size, 0);
}

async function esbuildBundle(tree: string, outfile: string, entry: string): Promise<number> {
  if (entry === "mod.ts" && existsSync(join(tree, IOREDIS_ADAPTER))) {
    await esbuildBundle(tree, adapterBundle(outfile), IOREDIS_ADAPTER);
  }
  await build({
    entryPoints: [join(tree, entry)],
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    external: ["redis", "ioredis", "@valkey/valkey-glide"],
    outfile,
    logLevel: "silent",
  });
  return statSync(outfile).size;
}
