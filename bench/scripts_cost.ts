/**
 * Redis-side cost of each redlease script path next to the raw commands, on a throwaway redis-server: for each path,
 * N calls on distinct keys (64 in flight on one node-redis connection), with CONFIG RESETSTAT before and INFO
 * commandstats / cpu after. Prints; never asserts.
 *
 *   node --import tsx bench/scripts_cost.ts [N=20000] [runs=3]
 *   USEC=1 node --import tsx bench/scripts_cost.ts      (also each command's usec per call)
 *
 * Each row is measured `runs` times (all rows, then again) and the median is printed.
 *
 * The ARGV of each script follows src/ (see the comments at the top of lua/*.lua); every reply is checked against
 * the path the row means to take, and a row whose replies differ is flagged.
 *
 * usec/call is commandstats' time inside the command (for EVALSHA: the whole script, including the commands it
 * calls); Redis CPU/call is used_cpu_user + used_cpu_sys per call (adds parsing, the event loop and socket I/O).
 * The scripts are the ones in src/_scripts.ts (generated from lua/), as they are in the working tree now.
 */
import { createHash } from "node:crypto";
import { loadavg } from "node:os";
import { createClient } from "redis";
import { acquire as ACQUIRE, release as RELEASE } from "../src/_scripts.ts";
import { FAIR_HANDOFF, FAIR_QUEUE, FENCED_ACQUIRE, FENCED_RELEASE } from "./_libs.ts";
import { startRedis } from "../harness/redis.ts";
import { median, parseCommandStats, parseCpuMicros, r2 } from "./_stats.ts";

if (process.argv.includes("--help") || process.argv.includes("-h")) {
  console.log(
    "node --import tsx bench/scripts_cost.ts [N=20000] [runs=3]   (USEC=1: each command's usec per call too)",
  );
  process.exit(0);
}
const N = Number(process.argv[2] ?? 20_000);
const RUNS = Number(process.argv[3] ?? 3);
if (!(Number.isInteger(N) && N > 0 && Number.isInteger(RUNS) && RUNS > 0)) {
  throw new TypeError(
    `Cannot measure as 'N' and 'runs' must be positive integers: current values are ${process.argv.slice(2, 4)}`,
  );
}
const server = await startRedis([], { label: "bench" });
const c = createClient({ url: server.url });
const admin = createClient({ url: server.url });
const sub = createClient({ url: server.url });
for (const x of [c, admin, sub]) x.on("error", () => {});
await Promise.all([c.connect(), admin.connect(), sub.connect()]);

const sha1 = (s: string) => createHash("sha1").update(s).digest("hex");
const CAD = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
const NOOP = "return 0";
// The least a fenced lease that keeps FIFO across expiry must do (what acquire.lua and release.lua do on their
// uncontended paths, and nothing else): acquire reads the server time for the fence, creates the key with its TTL
// (or finds it taken) and checks that nobody is queued; release reads the record, checks the owner, checks that
// nobody is queued and keeps the fence (or deletes the key: the second release row). B1/B2 run the same pair as
// their `fenced` floor (bench/_libs.ts).
const FLOOR_ACQUIRE = FENCED_ACQUIRE;
const FLOOR_RELEASE = FENCED_RELEASE;
// Contended, the least a fair (FIFO) notified lock does: the waiter joins a list, the release pops the next one,
// makes it the holder and PUBLISHes to it (bench/_libs.ts runs this lock in B3 as its fair floor).
const FIFO_QUEUE = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end " +
  "redis.call('RPUSH', KEYS[2], ARGV[1]) return 0";
const FIFO_HANDOFF = "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end " +
  "local n = redis.call('LPOP', KEYS[2]) if n then redis.call('SET', KEYS[1], n, 'PX', ARGV[2]) " +
  "redis.call('PUBLISH', KEYS[1] .. ':w', n) return 3 else redis.call('DEL', KEYS[1]) end return 2";
// The same with what redlease's guarantees need of Redis and nothing else (B3 runs it as `fairfenced`).
for (
  const s of [
    CAD,
    NOOP,
    FLOOR_ACQUIRE,
    FLOOR_RELEASE,
    ACQUIRE.source,
    RELEASE.source,
    FIFO_QUEUE,
    FIFO_HANDOFF,
    FAIR_QUEUE,
    FAIR_HANDOFF,
  ]
) {
  await c.sendCommand(["SCRIPT", "LOAD", s]);
}

async function all(make: (i: number) => string[]): Promise<unknown[]> {
  const inFlight = 64, replies: unknown[] = new Array(N);
  let next = 0;
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (next < N) {
      const i = next++;
      replies[i] = await c.sendCommand(make(i));
    }
  }));
  return replies;
}

/** Per row label: one entry per run of [usec/call, Redis CPU µs/call, Lua calls/call, their usec], and the names. */
const rows = new Map<string, { runs: number[][]; names: string }>();
/** Runs the row; `expect` checks each reply, so that a changed script contract shows up instead of a wrong path. */
async function measure(
  label: string,
  make: (i: number) => string[],
  expect: (reply: unknown) => boolean,
  top = ["evalsha"],
): Promise<unknown[]> {
  await admin.sendCommand(["CONFIG", "RESETSTAT"]);
  const cpu0 = parseCpuMicros(String(await admin.sendCommand(["INFO", "cpu"])));
  const replies = await all(make);
  const bad = replies.filter((r) => !expect(r));
  if (bad.length) {
    console.error(`  ${label}: ${bad.length} of ${N} replies not as expected (e.g. ${String(bad[0])}): wrong path`);
    label += ` (**${bad.length} replies not as expected**)`;
  }
  const info = String(await admin.sendCommand(["INFO", "cpu", "commandstats"]));
  const st = parseCommandStats(info);
  const cpu = parseCpuMicros(info) - cpu0;
  const client = top.filter((k) => st[k]);
  const usec = client.map((k) => st[k].usec).reduce((a, b) => a + b, 0) / N;
  const inner = Object.entries(st).filter(([k]) => !client.includes(k));
  const row = rows.get(label) ?? { runs: [], names: "" };
  row.runs.push([
    usec,
    cpu / N,
    inner.reduce((s, [, v]) => s + v.calls, 0) / N,
    inner.reduce((s, [, v]) => s + v.usec, 0) / N,
  ]);
  row.names =
    inner.map(([k, v]) => `${k} ${r2(v.calls / N)}` + (process.env.USEC ? ` (${r2(v.usec / N)})` : "")).join(", ") ||
    "–";
  rows.set(label, row);
  return replies;
}

const owner = (i: number) => `${(i * 2654435761 >>> 0).toString(16).padStart(8, "0")}-1111-4111-8111-111111111111`;
const waiter = (i: number) => `${(i * 2654435761 >>> 0).toString(16).padStart(8, "0")}-2222-4222-8222-222222222222`;
const K = (p: string, i: number) => [`redlease:{${p}${i}}`, `redlease:{${p}${i}}:q`];
/** redlease's scripts take the holder set and its records too (lua/_holders.lua). */
const KR = (p: string, i: number) => [...K(p, i), `redlease:{${p}${i}}:s`, `redlease:{${p}${i}}:d`];
const cid = "c".repeat(32);
const wid = (i: number) => waiter(i).replaceAll("-", "");
const entry = (i: number) => `${cid}|${wid(i)}|30000|1000|x|${waiter(i)}`;
const aid = (i: number) => `a${wid(i)}`;

try {
  console.error(`redis ${server.version}, N = ${N}, load average ${loadavg().map(r2).join(" ")}`);
  // A subscriber to every grant channel, so that handoffs find a live waiter (PUBLISH counts pattern receivers).
  await sub.pSubscribe("redlease:*", () => {});

  for (let run = 0; run < RUNS; run++) {
    const num = (r: unknown) => Number(r);
    await measure(
      "raw: SET key token NX PX 10000 (free)",
      (i) => ["SET", `raw:${run}:${i}`, owner(i), "NX", "PX", "10000"],
      (r) => r === "OK",
      ["set"],
    );
    await measure(
      "raw: EVALSHA compare-and-delete (held)",
      (i) => ["EVALSHA", sha1(CAD), "1", `raw:${run}:${i}`, owner(i)],
      (r) => num(r) === 1,
    );
    await measure("EVALSHA `return 0`, 2 keys + 5 args (script floor)", (i) => [
      "EVALSHA",
      sha1(NOOP),
      "2",
      ...K(`n${run}:`, i),
      owner(i),
      "30000",
      "",
      "",
      "",
      "",
    ], (r) => num(r) === 0);
    await measure("floor: fenced acquire (TIME, SET NX PX GET, EXISTS queue)", (i) => [
      "EVALSHA",
      sha1(FLOOR_ACQUIRE),
      "2",
      ...K(`f${run}:`, i),
      owner(i),
      "30000",
    ], (r) => num(r) > 0);
    await measure("floor: release keeping the fence (GET, EXISTS queue, SET PX)", (i) => [
      "EVALSHA",
      sha1(FLOOR_RELEASE),
      "2",
      ...K(`f${run}:`, i),
      owner(i),
      "10000",
    ], (r) => num(r) === 2);
    await all((i) => ["EVALSHA", sha1(FLOOR_ACQUIRE), "2", ...K(`g${run}:`, i), owner(i), "30000"]);
    await measure("floor: release deleting the key (GET, EXISTS queue, DEL)", (i) => [
      "EVALSHA",
      sha1(FLOOR_RELEASE),
      "2",
      ...K(`g${run}:`, i),
      owner(i),
      "del",
    ], (r) => num(r) === 2);
    // ARGV as src/_protocol.ts builds them on one server: acquire (owner, ms, attempt id; a waiter adds its queue
    // entry, the queue ttl and the publish command); release (owner, fence retention ms, fence of the hold).
    const fa = await measure("acquire.lua: free (uncontended acquire)", (i) => [
      "EVALSHA",
      ACQUIRE.sha,
      "4",
      ...KR(`a${run}:`, i),
      owner(i),
      "30000",
      aid(i),
    ], (r) => num(r) > 0);
    await measure("release.lua: last hold, no waiter (uncontended release)", (i) => [
      "EVALSHA",
      RELEASE.sha,
      "4",
      ...KR(`a${run}:`, i),
      owner(i),
      "10000",
      String(fa[i]),
    ], (r) => num(r) === 2);
    // The same names again, released moments ago: their records are the kept fences (FENCE_RETAIN_MS), as when
    // one name is locked and unlocked in a loop.
    const fr = await measure("acquire.lua: free, its fence kept by a release moments ago", (i) => [
      "EVALSHA",
      ACQUIRE.sha,
      "4",
      ...KR(`a${run}:`, i),
      waiter(i),
      "30000",
      wid(i),
    ], (r) => num(r) > 0);
    await measure("release.lua: last hold, no waiter, after that re-acquire", (i) => [
      "EVALSHA",
      RELEASE.sha,
      "4",
      ...KR(`a${run}:`, i),
      waiter(i),
      "10000",
      String(fr[i]),
    ], (r) => num(r) === 2);
    // Contended: hold b<i> by owner(i), then a waiter queues, then the holder releases and hands over.
    const fb = await all((i) => [
      "EVALSHA",
      ACQUIRE.sha,
      "4",
      ...KR(`b${run}:`, i),
      owner(i),
      "30000",
      aid(i),
    ]);
    await measure("acquire.lua: held by another, queue the waiter", (i) => [
      "EVALSHA",
      ACQUIRE.sha,
      "4",
      ...KR(`b${run}:`, i),
      waiter(i),
      "30000",
      wid(i),
      entry(i),
      "30000",
      "PUBLISH",
    ], (r) => Array.isArray(r) && num(r[0]) < 0);
    await measure("release.lua: last hold, hand over to the queued waiter", (i) => [
      "EVALSHA",
      RELEASE.sha,
      "4",
      ...KR(`b${run}:`, i),
      owner(i),
      "10000",
      String(fb[i]),
    ], (r) => num(r) === 3);
    // B3's usual case: the lease was handed over and its new holder has not claimed it (it releases first), when
    // the previous holder queues again.
    const third = (i: number) => waiter(i).replace("2222-4222-8222", "3333-4333-8333");
    const fc = await all((i) => [
      "EVALSHA",
      ACQUIRE.sha,
      "4",
      ...KR(`c${run}:`, i),
      owner(i),
      "30000",
      aid(i),
    ]);
    await all((i) => [
      "EVALSHA",
      ACQUIRE.sha,
      "4",
      ...KR(`c${run}:`, i),
      waiter(i),
      "30000",
      wid(i),
      `${cid}|${wid(i)}|30000|30000|x|${waiter(i)}`,
      "30000",
      "PUBLISH",
    ]);
    await all((
      i,
    ) => ["EVALSHA", RELEASE.sha, "4", ...KR(`c${run}:`, i), owner(i), "10000", String(fc[i])]);
    await measure("acquire.lua: handed over, not yet claimed, queue another waiter", (i) => [
      "EVALSHA",
      ACQUIRE.sha,
      "4",
      ...KR(`c${run}:`, i),
      third(i),
      "30000",
      `t${wid(i)}`,
      `${cid}|t${wid(i)}|30000|1000|x|${third(i)}`,
      "30000",
      "PUBLISH",
    ], (r) => Array.isArray(r) && num(r[0]) < 0);
    // The fair floors, the same way: hold, queue a waiter, hand over.
    await all((i) => ["SET", K(`l${run}:`, i)[0], owner(i), "PX", "30000"]);
    await measure("floor, fair: queue the waiter (SET NX PX, RPUSH)", (i) => [
      "EVALSHA",
      sha1(FIFO_QUEUE),
      "2",
      ...K(`l${run}:`, i),
      waiter(i),
      "30000",
    ], (r) => num(r) === 0);
    await measure("floor, fair: hand over (GET, LPOP, SET PX, PUBLISH)", (i) => [
      "EVALSHA",
      sha1(FIFO_HANDOFF),
      "2",
      ...K(`l${run}:`, i),
      owner(i),
      "30000",
    ], (r) => num(r) === 3);
    await all((i) => ["SET", K(`s${run}:`, i)[0], `1:${owner(i)}`, "PX", "30000"]);
    await measure(
      "floor, fair + fenced + expiring queue: queue the waiter (TIME, SET NX PX GET, PTTL, ZADD NX, PEXPIRE)",
      (i) => [
        "EVALSHA",
        sha1(FAIR_QUEUE),
        "2",
        ...K(`s${run}:`, i),
        waiter(i),
        "30000",
        entry(i),
        "30000",
      ],
      (r) => Array.isArray(r) && num(r[0]) < 0,
    );
    await measure("floor, fair + fenced + expiring queue: hand over (GET, ZPOPMIN, TIME, PUBLISH, SET PX)", (i) => [
      "EVALSHA",
      sha1(FAIR_HANDOFF),
      "2",
      ...K(`s${run}:`, i),
      owner(i),
      "30000",
    ], (r) => num(r) === 3);
    await measure(
      "PUBLISH to a live subscriber (notification floor)",
      (i) => ["PUBLISH", `redlease:{p${run}:${i}}:w:${cid}`, `${wid(i)}:1:1:1`],
      (r) => num(r) === 1,
      ["publish"],
    );
  }

  console.log(
    `\nbench/scripts_cost.ts: medians of ${RUNS} runs of N = ${N} calls per row, 64 in flight, Redis ${server.version}; acquire.lua ${
      ACQUIRE.sha.slice(0, 8)
    }, ` +
      `release.lua ${RELEASE.sha.slice(0, 8)}; load average ${loadavg().map(r2).join(" ")}\n`,
  );
  console.log(
    "| path | usec/call (commandstats) | Redis CPU µs/call | commands called from Lua | their usec | those commands |",
  );
  console.log("|---|---|---|---|---|---|");
  for (const [label, r] of rows) {
    const m = (k: number) => String(r2(median(r.runs.map((x) => x[k]))));
    console.log(`| ${label} | ${m(0)} | ${m(1)} | ${m(2)} | ${m(3)} | ${r.names} |`);
  }
  // One uncontended cycle (acquire + release), in Redis CPU: each run's pair, then the median over runs.
  const cpu = (label: string) => rows.get(label)!.runs.map((x) => x[1]);
  const pair = (a: string, b: string) => median(cpu(a).map((x, i) => x + cpu(b)[i]));
  const raw = pair("raw: SET key token NX PX 10000 (free)", "raw: EVALSHA compare-and-delete (held)");
  const floor = pair(
    "floor: fenced acquire (TIME, SET NX PX GET, EXISTS queue)",
    "floor: release keeping the fence (GET, EXISTS queue, SET PX)",
  );
  const floorDel = pair(
    "floor: fenced acquire (TIME, SET NX PX GET, EXISTS queue)",
    "floor: release deleting the key (GET, EXISTS queue, DEL)",
  );
  const ours = pair(
    "acquire.lua: free (uncontended acquire)",
    "release.lua: last hold, no waiter (uncontended release)",
  );
  const again = pair(
    "acquire.lua: free, its fence kept by a release moments ago",
    "release.lua: last hold, no waiter, after that re-acquire",
  );
  const fifo = pair(
    "floor, fair: queue the waiter (SET NX PX, RPUSH)",
    "floor, fair: hand over (GET, LPOP, SET PX, PUBLISH)",
  );
  const fair = pair(
    "floor, fair + fenced + expiring queue: queue the waiter (TIME, SET NX PX GET, PTTL, ZADD NX, PEXPIRE)",
    "floor, fair + fenced + expiring queue: hand over (GET, ZPOPMIN, TIME, PUBLISH, SET PX)",
  );
  const handoff = pair(
    "acquire.lua: held by another, queue the waiter",
    "release.lua: last hold, hand over to the queued waiter",
  );
  console.log(
    `\nContended handoff (a waiter queues, the holder hands over), Redis CPU µs: fair floor ${r2(fifo)}; ` +
      `with the fence and an expiring queue ${r2(fair)} (${r2(fair / fifo)}× the fair floor); redlease ${
        r2(handoff)
      } ` +
      `(${r2(handoff / fifo)}× the fair floor, ${r2(handoff / fair)}× the fenced one)`,
  );
  console.log(
    `\nUncontended cycle, Redis CPU µs (median over runs of acquire + release): raw ${r2(raw)}; ` +
      `fenced floor ${r2(floor)} (${r2(floor / raw)}× raw; ${r2(floorDel)} = ${
        r2(floorDel / raw)
      }× deleting the key); ` +
      `redlease ${r2(ours)} (${r2(ours / raw)}× raw, ${r2(ours / floor)}× the floor); ` +
      `redlease on a name released moments ago ${r2(again)} (${r2(again / floor)}× the floor)`,
  );
} finally {
  await Promise.all([c.quit(), admin.quit(), sub.quit()].map((p) => p.catch(() => {})));
  await server.stop();
}
