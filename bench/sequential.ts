/**
 * B1 taken apart: one sequential loop of acquire + release (fresh names) per library, the libraries alternating
 * on one throwaway redis-server in one process, with the client's CPU per cycle split into user and system time.
 * B1 (bench/run.ts) gives the latency of each library in its own process; this tells, in one run, how much of a
 * difference in latency is the client's own work, which the sequential loop runs cold (it sleeps in every round
 * trip, so the same JavaScript costs several times what bench/client_cost.ts measures hot). Prints; never asserts.
 *
 *   node --import tsx bench/sequential.ts [libs=redlease,fenced,raw] [cycles=4000] [reps=7]
 *
 * Library ids are those of bench/_libs.ts. redlease runs as an esbuild bundle of mod.ts, as bench/run.ts runs it.
 * Each rep runs 200 unmeasured cycles, then `cycles` measured ones, per library in turn; medians over reps.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";
import { type LibId, load } from "./_libs.ts";
import { median } from "./_stats.ts";
import { startRedis } from "../tests/_servers/redis.ts";

const libs = (process.argv[2] ?? "redlease,fenced,raw").split(",") as LibId[];
const CYCLES = Number(process.argv[3] ?? 4_000), REPS = Number(process.argv[4] ?? 7);
const here = fileURLToPath(new URL(".", import.meta.url));
const TMP = join(here, "results", "tmp");
mkdirSync(TMP, { recursive: true });
const bundle = join(TMP, "redlease-sequential.mjs");
await build({
  entryPoints: [join(here, "..", "mod.ts")],
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  external: ["redis", "ioredis"],
  outfile: bundle,
  logLevel: "silent",
});

const server = await startRedis([], { label: "bench" });
const adapters = await Promise.all(
  libs.map(async (lib) => (await load(lib, false, pathToFileURL(bundle).href)).connect(server.url)),
);
const rows = libs.map(() => ({ p50: [] as number[], cpu: [] as number[], user: [] as number[] }));
let seq = 0;
for (let rep = 0; rep < REPS; rep++) {
  for (let i = 0; i < libs.length; i++) {
    const ad = adapters[i];
    for (let k = 0; k < 200; k++) await ad.release(await ad.acquire(`warm:${seq++}`));
    const lat = new Float64Array(CYCLES);
    const c0 = process.cpuUsage();
    for (let k = 0; k < CYCLES; k++) {
      const t = performance.now();
      await ad.release(await ad.acquire(`seq:${seq++}`));
      lat[k] = performance.now() - t;
    }
    const c = process.cpuUsage(c0);
    lat.sort();
    rows[i].p50.push(lat[CYCLES >> 1] * 1000);
    rows[i].cpu.push((c.user + c.system) / CYCLES);
    rows[i].user.push(c.user / CYCLES);
  }
}
console.log(`sequential acquire + release, ${CYCLES} cycles × ${REPS} reps per library, Node ${process.version}`);
console.log("library | cycle p50 µs | client CPU µs / cycle | of which user | p50 per rep");
for (let i = 0; i < libs.length; i++) {
  const r = rows[i];
  console.log(
    `${libs[i]} | ${median(r.p50).toFixed(1)} | ${median(r.cpu).toFixed(1)} | ${median(r.user).toFixed(1)} | ` +
      r.p50.map((x) => x.toFixed(0)).join(", "),
  );
}
await Promise.all(adapters.map((a) => a.close()));
await server.stop();
