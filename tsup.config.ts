import { existsSync } from "node:fs";
import { defineConfig } from "tsup";

/**
 * The published entry points: output name in dist/ → source file. The package subpath of each is `.` for `mod`
 * and `./<name>` for the others; package.json and deno.json "exports" must list the same subpaths
 * (`scripts/check_exports.ts` fails when they differ). `scripts/size.ts` measures the same entries.
 */
export const entries: Record<string, string> = {
  "mod": "mod.ts",
  "node-redis": "src/adapters/node_redis.ts",
  "ioredis": "src/adapters/ioredis.ts",
  "glide": "src/adapters/glide.ts",
  "bun": "src/adapters/bun.ts",
  "http": "src/adapters/http.ts",
  "redlock": "src/redlock.ts",
  "fence": "src/fence.ts",
  "otel": "src/otel.ts",
  "watch": "src/watch.ts",
};

/**
 * Clients are passed in by the caller and never bundled; `bun` is the runtime's own module; `@opentelemetry/api` is
 * the application's (an optional peer: one copy per process holds the global providers and context).
 */
export const external = ["redis", "ioredis", "@valkey/valkey-glide", "bun", "@opentelemetry/api"];

export default defineConfig(() => {
  // An adapter still being written is skipped with a warning so the build keeps working; check_exports fails
  // until every listed source exists, so a dangling export does not go unnoticed.
  const missing = Object.values(entries).filter((src) => !existsSync(src));
  if (missing.length > 0) console.warn(`tsup.config.ts: skipping missing entries: ${missing.join(", ")}`);
  return [{
    entry: Object.fromEntries(Object.entries(entries).filter(([, src]) => existsSync(src))),
    // `.js` (ESM) and `.cjs` (CommonJS), with `.d.ts` / `.d.cts` beside them ("type": "module").
    format: ["esm", "cjs"],
    dts: true,
    // Shared code goes into chunks in both formats, so the entries of one format share module state
    // (per-client script and subscriber state, error classes) instead of each carrying its own copy.
    splitting: true,
    clean: true,
    target: "es2022",
    platform: "neutral",
    external,
    sourcemap: true,
  }, {
    // The command line (package.json "bin"): one ESM file for Node with its own copy of the library and of
    // node-redis, so that `npx -p redlease redlease`, `bunx redlease` and `deno run -A npm:redlease` work with nothing
    // else installed (the library entries above keep `redis` an optional peer). The shebang of cli/redlease.ts is kept
    // and tsup makes the file executable. Not an export subpath.
    entry: { cli: "cli/redlease.ts" },
    format: ["esm"],
    platform: "node",
    target: "node20",
    noExternal: ["redis", /^@redis\//],
    // Only the client: the `redis` package adds the JSON, search, time series, Bloom and graph modules (900 KB
    // bundled, against 320 KB), none of which the CLI sends.
    esbuildOptions(options) {
      options.alias = { redis: "@redis/client" };
    },
    // node-redis is CommonJS: its require() calls of Node's modules need a real require in an ES module.
    banner: { js: 'import { createRequire as __redleaseRequire } from "node:module";\nconst require = __redleaseRequire(import.meta.url);' },
    // Class names stay as written: the CLI tells Redis errors by their constructor's name.
    keepNames: true,
    // Whitespace and syntax only: identifiers keep their names for REDLEASE_DEBUG stack traces.
    minifyWhitespace: true,
    minifySyntax: true,
    dts: false,
    splitting: false,
    clean: false, // the library build cleans dist/
    // No map: it would weigh twice the bundle in every npx download, and the names are kept (see above).
    sourcemap: false,
  }];
});
