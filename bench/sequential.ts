/**
 * B1 taken apart: one sequential loop of acquire + release (fresh names) per library, the libraries alternating
 * on one throwaway redis-server in one process, with the client's CPU per cycle split into user and system time.
 * B1 (bench/run.ts) gives the latency of each library in its own process; this tells, in one run, how much of a
 * difference in latency is the client's own work, which the sequential loop runs cold (it sleeps in every round
 * trip, so the same JavaScript costs several times what bench/client_cost.ts measures hot). Prints; never asserts.
 *
 *   node --import tsx bench/sequential.ts [libs=redlease,wire,fenced,raw] [cycles=4000] [reps=7]
 *   node --import tsx bench/sequential.ts redlease=/tmp/base,redlease,raw      (another checkout's redlease beside)
 *
 * Library ids are those of bench/_libs.ts, and `wire`: redlease's acquire and release scripts sent by node-redis
 * itself with the arguments redlease sends on an uncontended cycle (4 keys and 3 arguments each, fresh owner and attempt
 * ids), and no other client work: the floor of redlease's protocol, which tells its Lua and wire format apart from
 * its JavaScript. `<id>=<tree>` runs a redlease variant from another checkout of redlease (e.g. `git worktree add
 * /tmp/base <ref>`). redlease runs as the tree's package build (dist/mod.js), as bench/run.ts runs it.
 * Each rep runs 200 unmeasured cycles, then `cycles` measured ones, per library in turn; medians over reps.
 */
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { bundleRedlease } from "./_bundle.ts";
import { createClient } from "redis";
import { type Adapter, type LibId, load, type Loaded } from "./_libs.ts";
import { acquire as ACQUIRE, release as RELEASE } from "../src/_scripts.ts";
import { median } from "./_stats.ts";
import { startRedis } from "../harness/redis.ts";

const ids = (process.argv[2] ?? "redlease,wire,fenced,raw").split(",");
const CYCLES = Number(process.argv[3] ?? 4_000), REPS = Number(process.argv[4] ?? 7);
const here = fileURLToPath(new URL(".", import.meta.url));
const TMP = join(here, "results", "tmp");
mkdirSync(TMP, { recursive: true });

/** `tree`'s mod.ts as its package build ships it (bench/_bundle.ts), as a file URL. */
async function bundleOf(tree: string, i: number): Promise<string> {
  const outfile = join(TMP, `redlease-sequential-${i}.mjs`);
  await bundleRedlease(tree, outfile);
  return pathToFileURL(outfile).href;
}

/** redlease's uncontended cycle as node-redis sends it, without redlease (see the header). */
const wire: Loaded = {
  async connect(url): Promise<Adapter> {
    const c = createClient({ url });
    await c.connect();
    for (const s of [ACQUIRE, RELEASE]) await c.sendCommand(["SCRIPT", "LOAD", s.source]);
    // Ids shaped as redlease's attemptId(): 16 random characters and a base-36 counter.
    const prefix = crypto.randomUUID().slice(0, 16);
    let n = 0;
    const keys = (h: string) => ["4", h, `${h}:q`, `${h}:s`, `${h}:d`];
    return {
      async acquire(name) {
        const h = `redlease:{${name}}`, owner = prefix + (++n).toString(36), attempt = prefix + (++n).toString(36);
        const fence = await c.sendCommand([
          "EVALSHA",
          ACQUIRE.sha,
          ...keys(h),
          owner,
          "30000",
          attempt,
        ]);
        return { h, owner, fence: String(fence) };
      },
      async release(x) {
        const { h, owner, fence } = x as { h: string; owner: string; fence: string };
        if (
          Number(
            await c.sendCommand(["EVALSHA", RELEASE.sha, ...keys(h), owner, "10000", fence]),
          ) !== 2
        ) {
          throw new Error("wire: release did not free the lease");
        }
      },
      close: async () => void await c.quit(),
    };
  },
};

const libs = await Promise.all(ids.map(async (id, i) => {
  if (id === "wire") return { id, loaded: wire };
  const [lib, tree] = id.split("=") as [LibId, string | undefined];
  const loaded = await load(lib, false, await bundleOf(resolve(tree ?? join(here, "..")), i));
  if (!loaded) throw new Error(`unknown library '${lib}' (see bench/_libs.ts)`);
  return { id, loaded };
}));

const server = await startRedis([], { label: "bench" });
const adapters = await Promise.all(libs.map((l) => l.loaded.connect(server.url)));
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
    `${libs[i].id} | ${median(r.p50).toFixed(1)} | ${median(r.cpu).toFixed(1)} | ${median(r.user).toFixed(1)} | ` +
      r.p50.map((x) => x.toFixed(0)).join(", "),
  );
}
await Promise.all(adapters.map((a) => a.close()));
await server.stop();
