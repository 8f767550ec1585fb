/**
 * Redis cost of the exclusive lease scripts of two versions, A against B, in alternating rounds on one throwaway
 * redis-server (issue 30: the machine is shared, so only a comparison within one run means anything). A version is
 * a git revision (its src/_scripts.ts, read with `git show`) or the path of a module that exports the scripts as
 * src/_scripts.ts does (`.` for the working tree's). Per path: Redis CPU µs/call (used_cpu_user + used_cpu_sys) and
 * EVALSHA usec/call (commandstats), medians over rounds, and the median of the per-round B ÷ A ratios of the CPU with
 * their range. Prints; never asserts.
 *
 *   node --import tsx bench/scripts_ab.ts A B [N=10000] [rounds=9]
 *   node --import tsx bench/scripts_ab.ts 2fbd63b .            (a revision against the working tree)
 *
 * Each round runs every path for A and for B (the order alternating between rounds) on fresh names: the uncontended
 * acquire and release, the acquire of a name released moments ago (its kept fence) and its release, a waiter
 * queueing behind a holder, the handoff to it, that waiter's release of its grant before claiming it, and the
 * claim and a renewal (extend.lua) of another such grant. ARGV as src/_protocol.ts builds them on one server.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { createClient } from "redis";
import { startRedis } from "../harness/redis.ts";
import { median, parseCommandStats, parseCpuMicros, r2 } from "./_stats.ts";

interface Script {
  readonly sha: string;
  readonly source: string;
}
interface Scripts {
  readonly acquire: Script;
  readonly release: Script;
  readonly extend: Script;
}

const [a, b] = [process.argv[2], process.argv[3]];
const N = Number(process.argv[4] ?? 10_000), ROUNDS = Number(process.argv[5] ?? 9);
if (!a || !b || !(Number.isInteger(N) && N > 0 && Number.isInteger(ROUNDS) && ROUNDS > 0)) {
  console.error("node --import tsx bench/scripts_ab.ts A B [N=10000] [rounds=9]   (A, B: git revision, module, or .)");
  process.exit(1);
}

/** The scripts of a version: a module path (`.`: the working tree's src/_scripts.ts) or a git revision's. */
async function load(version: string): Promise<Scripts> {
  if (version === ".") return await import("../src/_scripts.ts");
  if (version.endsWith(".ts")) return await import(resolve(version));
  const dir = join(import.meta.dirname, "results", "tmp");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `scripts-${version.replace(/[^\w.-]/g, "_")}.ts`);
  writeFileSync(file, execFileSync("git", ["show", `${version}:src/_scripts.ts`], { encoding: "utf8" }));
  return await import(file);
}
const versions = [await load(a), await load(b)];

const server = await startRedis([], { label: "bench" });
const c = createClient({ url: server.url }), admin = createClient({ url: server.url });
const sub = createClient({ url: server.url });
for (const x of [c, admin, sub]) x.on("error", () => {});
await Promise.all([c.connect(), admin.connect(), sub.connect()]);
// A subscriber to every grant channel, so that handoffs find a live waiter.
await sub.pSubscribe("redlease:*", () => {});
for (const v of versions) {
  for (const s of [v.acquire, v.release, v.extend]) await c.sendCommand(["SCRIPT", "LOAD", s.source]);
}

async function all(make: (i: number) => string[]): Promise<unknown[]> {
  const replies: unknown[] = new Array(N);
  let next = 0;
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (next < N) {
      const i = next++;
      replies[i] = await c.sendCommand(make(i));
    }
  }));
  return replies;
}

/** Per path: per version, each round's [Redis CPU µs/call, EVALSHA usec/call]. */
const results = new Map<string, [number[][], number[][]]>();
async function measure(path: string, v: number, make: (i: number) => string[], expect: (r: unknown) => boolean) {
  await admin.sendCommand(["CONFIG", "RESETSTAT"]);
  const cpu0 = parseCpuMicros(String(await admin.sendCommand(["INFO", "cpu"])));
  const replies = await all(make);
  const info = String(await admin.sendCommand(["INFO", "cpu", "commandstats"]));
  const bad = replies.filter((r) => !expect(r));
  if (bad.length) console.error(`${path} (${v ? "B" : "A"}): ${bad.length} of ${N} replies not as expected`);
  const row = results.get(path) ?? [[], []];
  row[v].push([(parseCpuMicros(info) - cpu0) / N, (parseCommandStats(info).evalsha?.usec ?? 0) / N]);
  results.set(path, row);
  return replies;
}

const id = (i: number, part: string) => `${(i * 2654435761 >>> 0).toString(16).padStart(8, "0")}-${part}`;
const owner = (i: number) => id(i, "1111-4111-8111-111111111111");
const waiter = (i: number) => id(i, "2222-4222-8222-222222222222");
const keys = (p: string, i: number) => ["", ":q", ":s", ":d"].map((s) => `redlease:{${p}${i}}${s}`);
const wid = (i: number) => waiter(i).replaceAll("-", "");
const entry = (i: number) => `${"c".repeat(32)}|${wid(i)}|30000|1000|x|${waiter(i)}`;
const num = (r: unknown) => Number(r);

/** One round of every path for version `v`, on names prefixed `p`. */
async function round(v: number, p: string) {
  const { acquire: A, release: L, extend: E } = versions[v];
  const acq = (
    k: string[],
    o: string,
    attempt: string,
    ...rest: string[]
  ) => ["EVALSHA", A.sha, "4", ...k, o, "30000", attempt, ...rest];
  const rel = (k: string[], o: string, fence: unknown) => ["EVALSHA", L.sha, "4", ...k, o, "10000", String(fence)];
  const queue = (k: string[], i: number) => acq(k, waiter(i), wid(i), entry(i), "30000", "PUBLISH");
  const f1 = await measure("acquire: free", v, (i) => acq(keys(p, i), owner(i), `a${wid(i)}`), (r) => num(r) > 0);
  await measure("release: last hold, no waiter", v, (i) => rel(keys(p, i), owner(i), f1[i]), (r) => num(r) === 2);
  const f2 = await measure(
    "acquire: its fence kept by a release moments ago",
    v,
    (i) => acq(keys(p, i), waiter(i), wid(i)),
    (r) => num(r) > 0,
  );
  await measure("release: after that re-acquire", v, (i) => rel(keys(p, i), waiter(i), f2[i]), (r) => num(r) === 2);
  const fb = await all((i) => acq(keys(`b${p}`, i), owner(i), `a${wid(i)}`));
  await measure(
    "acquire: held by another, queue the waiter",
    v,
    (i) => queue(keys(`b${p}`, i), i),
    (r) => Array.isArray(r),
  );
  await measure(
    "release: hand over to the queued waiter",
    v,
    (i) => rel(keys(`b${p}`, i), owner(i), fb[i]),
    (r) => num(r) === 3,
  );
  await measure(
    "release: a grant not yet claimed",
    v,
    (i) => rel(keys(`b${p}`, i), waiter(i), ""),
    (r) => num(r) === 2,
  );
  const fc = await all((i) => acq(keys(`c${p}`, i), owner(i), `a${wid(i)}`));
  await all((i) => queue(keys(`c${p}`, i), i));
  await all((i) => rel(keys(`c${p}`, i), owner(i), fc[i]));
  const ext = (i: number) => ["EVALSHA", E.sha, "1", keys(`c${p}`, i)[0], waiter(i), "30000", "", "", "GT"];
  await measure("extend: claim a grant", v, ext, (r) => num(r) === 1);
  await measure("extend: renew", v, ext, (r) => num(r) === 1);
}

try {
  for (let r = 0; r < ROUNDS; r++) {
    for (const v of r % 2 ? [1, 0] : [0, 1]) await round(v, `r${r}v${v}:`);
  }
  console.log(
    `\nbench/scripts_ab.ts ${a} (A) against ${b} (B): N = ${N} calls per path, 64 in flight, ${ROUNDS} alternating ` +
      `rounds; load average ${loadavg().map(r2).join(" ")}\n`,
  );
  console.log("| path | A CPU µs/call | B CPU µs/call | B ÷ A (range) | A usec/call | B usec/call |");
  console.log("|---|---|---|---|---|---|");
  for (const [path, [ra, rb]] of results) {
    const ratios = ra.map((x, i) => rb[i][0] / x[0]);
    const m = (rows: number[][], k: number) => r2(median(rows.map((x) => x[k])));
    console.log(
      `| ${path} | ${m(ra, 0)} | ${m(rb, 0)} | ${r2(median(ratios))} (${r2(Math.min(...ratios))}–${
        r2(Math.max(...ratios))
      }) | ${m(ra, 1)} | ${m(rb, 1)} |`,
    );
  }
} finally {
  await Promise.all([c.quit(), admin.quit(), sub.quit()].map((p) => p.catch(() => {})));
  await server.stop();
}
