/**
 * B2 taken apart (issue 30): 64 concurrent acquire + release loops on ONE client, redlease against redis-semaphore's
 * Mutex (ioredis) and the raw protocol (node-redis: SET NX PX + EVALSHA compare-and-delete), in alternating rounds
 * inside one process against one throwaway redis-server, one factor at a time:
 *
 *   node --import tsx bench/uncontended.ts [--entry dist|src|bundle|FILE] [--names fresh|fixed] [--warm MS]
 *     [--round MS] [--rounds N] [--libs redlease,semaphore,raw] [--opts lease|watchdog] [--flush] [--redis "ARGS"]
 *     [--vs FILE]
 *
 *   --entry   dist: ../dist/mod.js (the built package users install; `node_modules/.bin/tsup` first), src: ../mod.ts
 *             through tsx, bundle: bench/results/tmp/uncontended-bundle.mjs (this tree's package build, as npm run
 *             bench loads it), FILE: that module (another checkout's build, from bench/_bundle.ts)
 *   --libs    any of redlease, redlease-io (redlease on the ioredis client, through the same build's adapter),
 *             semaphore, raw, and redlease-vs (with --vs)
 *   --names   fresh: a new name every cycle (redlease keeps each released name's fence 10 s), fixed: loop i uses name i
 *   --opts    lease: { leaseMs: 30000, waitMs: 0 } (measurement 1), watchdog: { waitMs: 10000 } (npm run bench)
 *   --flush   FLUSHALL (sync) before every round: no retained keys from earlier rounds
 *   --vs      FILE: a second redlease module, run as `redlease-vs` (an A/B of two checkouts' bundles)
 *   --redis   extra redis-server arguments, space-separated, `_` for a space inside one (--save 60_10000)
 *
 * Per round and library: cycles/s; Redis CPU per cycle three ways (INFO cpu used_cpu_user+sys of the process, the
 * main thread's used_cpu_*_main_thread, /proc/<pid>/stat utime+stime at 10 ms ticks); commandstats usec per call of
 * EVALSHA / SET; client CPU per cycle (process.cpuUsage); keys and used_memory at the end of the
 * round, keys expired during it; othersPct: the CPU the rest of the machine used in the round, % of one core.
 * Prints medians [min–max] over rounds. Never asserts.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createClient } from "redis";
import { Redis } from "ioredis";
import { Mutex } from "redis-semaphore";
import { startRedis } from "../harness/redis.ts";
import { bundleRedlease } from "./_bundle.ts";
import { adapterBundle } from "./_libs.ts";
import { machineBusyUs } from "./_stats.ts";

const root = join(fileURLToPath(new URL(".", import.meta.url)), "..");
const arg = (k: string, d: string) => {
  const i = process.argv.indexOf(`--${k}`);
  return i < 0 ? d : process.argv[i + 1];
};
const flag = (k: string) => process.argv.includes(`--${k}`);
const entry = arg("entry", "dist");
const names = arg("names", "fresh");
const warmMs = Number(arg("warm", "2000"));
const roundMs = Number(arg("round", "2000"));
const rounds = Number(arg("rounds", "5"));
const libs = arg("libs", "redlease,semaphore,raw").split(",");
const optsKind = arg("opts", "lease");
const flush = flag("flush");
const LOOPS = 64;

let url: string;
if (entry === "src") url = pathToFileURL(join(root, "mod.ts")).href;
else if (entry === "bundle") {
  const out = join(root, "bench/results/tmp/uncontended-bundle.mjs");
  await bundleRedlease(root, out);
  url = pathToFileURL(out).href;
} else if (entry === "dist") url = pathToFileURL(join(root, "dist/mod.js")).href;
else url = pathToFileURL(entry).href; // a module file: another checkout's bundle
// deno-lint-ignore no-explicit-any
const rl: any = await import(url);
// The same build's ioredis adapter (redlease/ioredis), for the redlease-io row.
const adapterUrl = entry === "dist"
  ? pathToFileURL(join(root, "dist/ioredis.js")).href
  : entry === "src"
  ? pathToFileURL(join(root, "src/adapters/ioredis.ts")).href
  : adapterBundle(url);
// deno-lint-ignore no-explicit-any
const rlIo: any = libs.includes("redlease-io") ? await import(adapterUrl) : undefined;
// --vs FILE: a second redlease module (another checkout's bundle) as the library `redlease-vs`, for an A/B in one run
const vsFile = arg("vs", "");
// deno-lint-ignore no-explicit-any
const rlVs: any = vsFile ? await import(pathToFileURL(vsFile).href) : undefined;
if (vsFile && !libs.includes("redlease-vs")) libs.push("redlease-vs");

// --redis "ARGS": extra redis-server arguments after the harness defaults (e.g. "--appendonly yes")
const redisArgs = arg("redis", "").split(" ").filter(Boolean).map((a) => a.replaceAll("_", " "));
const server = await startRedis(redisArgs, { label: "uncontended" });
const admin = createClient({ url: server.url });
await admin.connect();
const nr = createClient({ url: server.url });
await nr.connect();
const io = new Redis(server.url, { lazyConnect: true });
await io.connect();

const RAW_DEL = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`;
const rawSha = String(await nr.sendCommand(["SCRIPT", "LOAD", RAW_DEL]));
const rlOpts = optsKind === "lease" ? { leaseMs: 30_000, waitMs: 0 } : { waitMs: 10_000 };
const ioDriver = rlIo?.ioredis(io);
let tok = 0;

type Cycle = (name: string) => Promise<void>;
const cycles: Record<string, Cycle> = {
  redlease: async (name) => {
    const l = await rl.acquire(nr, name, rlOpts);
    await rl.release(l);
  },
  "redlease-io": async (name) => {
    const l = await rl.acquire(ioDriver, name, rlOpts);
    await rl.release(l);
  },
  "redlease-vs": async (name) => {
    const l = await rlVs.acquire(nr, name, rlOpts);
    await rlVs.release(l);
  },
  semaphore: async (name) => {
    const m = new Mutex(io, name, { lockTimeout: 30_000 });
    await m.acquire();
    await m.release();
  },
  raw: async (name) => {
    const t = `t${tok++}`;
    const ok = await nr.sendCommand(["SET", `raw:${name}`, t, "NX", "PX", "30000"]);
    if (ok !== "OK") throw new Error("raw: not acquired");
    await nr.sendCommand(["EVALSHA", rawSha, "1", `raw:${name}`, t]);
  },
};

let seq = 0;
async function run(lib: string, ms: number): Promise<number> {
  const until = performance.now() + ms;
  const cyc = cycles[lib];
  let n = 0;
  await Promise.all(Array.from({ length: LOOPS }, async (_, i) => {
    while (performance.now() < until) {
      await cyc(names === "fixed" ? `${lib}:fixed:${i}` : `${lib}:${seq++}`);
      n++;
    }
  }));
  return n;
}

const info = async (sec: string) => String(await admin.sendCommand(["INFO", sec]));
const field = (s: string, k: string) => Number(new RegExp(`${k}:([\\d.]+)`).exec(s)?.[1] ?? NaN);
const procCpuUs = () => {
  const f = readFileSync(`/proc/${server.pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10_000; // utime + stime, 100 ticks/s
};
async function cpuNow() {
  const s = await info("cpu");
  return {
    all: (field(s, "used_cpu_user") + field(s, "used_cpu_sys")) * 1e6,
    main: (field(s, "used_cpu_user_main_thread") + field(s, "used_cpu_sys_main_thread")) * 1e6,
    proc: procCpuUs(),
  };
}
function usecPerCall(cs: string, cmd: string) {
  const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+),usec=(\\d+)`).exec(cs);
  return m ? { calls: Number(m[1]), usec: Number(m[2]) } : { calls: 0, usec: 0 };
}

// warm-up: every library, alternating in slices, warmMs each in total
for (let s = 0; s < 4 && warmMs > 0; s++) for (const lib of libs) await run(lib, warmMs / 4);

type Row = Record<string, number>;
const res: Record<string, Row[]> = Object.fromEntries(libs.map((l) => [l, []]));
for (let r = 0; r < rounds; r++) {
  const order = libs.map((_, i) => libs[(i + r) % libs.length]);
  for (const lib of order) {
    if (flush) await admin.sendCommand(["FLUSHALL", "SYNC"]);
    await admin.sendCommand(["CONFIG", "RESETSTAT"]);
    const c0 = await cpuNow();
    const busy0 = machineBusyUs();
    const u0 = process.cpuUsage();
    const t0 = performance.now();
    const n = await run(lib, roundMs);
    const dt = performance.now() - t0;
    const u = process.cpuUsage(u0);
    const c1 = await cpuNow();
    const busy = machineBusyUs() - busy0;
    const cs = await info("commandstats");
    const mem = await info("memory");
    const ks = await info("keyspace");
    const stats = await info("stats");
    const ev = usecPerCall(cs, "evalsha");
    const set = usecPerCall(cs, "set");
    const allUsec = [...cs.matchAll(/usec=(\d+)/g)].reduce((a, m) => a + Number(m[1]), 0);
    res[lib].push({
      cps: n / (dt / 1000),
      redisUs: (c1.all - c0.all) / n,
      mainUs: (c1.main - c0.main) / n,
      procUs: (c1.proc - c0.proc) / n,
      cmdUsecPerCycle: allUsec / n,
      evalshaUsecPerCall: ev.calls ? ev.usec / ev.calls : 0,
      setUsecPerCall: set.calls ? set.usec / set.calls : 0,
      clientUs: (u.user + u.system) / n,
      // The rest of the machine in the window, % of one core (this process and Redis excluded).
      othersPct: Math.max(0, busy - (c1.all - c0.all) - u.user - u.system) / (dt * 10),
      keys: Number(/keys=(\d+)/.exec(ks)?.[1] ?? 0),
      expiredInRound: field(stats, "expired_keys"),
      usedMemMB: field(mem, "used_memory") / 1e6,
      luaMemKB: field(mem, "used_memory_vm_eval") / 1e3 || field(mem, "used_memory_lua") / 1e3,
    });
  }
}

const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const f = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(1));
console.log(
  `entry=${entry} names=${names} opts=${optsKind} warm=${warmMs} round=${roundMs} rounds=${rounds} flush=${flush} ` +
    `redis-args=${JSON.stringify(redisArgs)} redis ${server.version} pid ${server.pid}; median [min–max] over rounds`,
);
const cols = Object.keys(res[libs[0]][0]);
for (const lib of libs) {
  const rows = res[lib];
  console.log(
    `${lib.padEnd(10)} ` +
      cols.map((c) => {
        const xs = rows.map((r) => r[c]);
        return `${c}=${f(med(xs))}[${f(Math.min(...xs))}–${f(Math.max(...xs))}]`;
      }).join(" "),
  );
}
if (libs.includes("redlease")) {
  const base = med(res.redlease.map((r) => r.cps));
  for (const l of libs.filter((l) => l !== "redlease")) {
    const ratios = res.redlease.map((r, i) => r.cps / res[l][i].cps);
    const each = ratios.map((x) => x.toFixed(2)).join(" ");
    const other = f(med(res[l].map((r) => r.cps)));
    console.log(`redlease / ${l} cycles/s: median ${med(ratios).toFixed(2)} [${each}]  (${f(base)} vs ${other})`);
  }
}
await Promise.all([admin.quit(), nr.quit(), io.quit()]);
await server.stop();
