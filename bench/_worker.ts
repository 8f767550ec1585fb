/**
 * Benchmark worker for bench/run.ts. Not meant to be run by hand.
 *
 *   node --import tsx bench/_worker.ts <redlease module url>
 *
 * Line protocol: one JSON request per stdin line; one reply per request on stdout as `@@ <json>` (other stdout
 * output is forwarded by the parent as noise). Requests:
 *   preload {libs}                 import these libraries (so that rounds do not pay for it)
 *   setup {lib, tuned, url}        import the library, connect one client, run two uncontended cycles (scripts load)
 *   loops {loops, ms, prefix}      warm-up: `loops` concurrent acquire+release loops on fresh names for `ms`
 *   uncontended {loops, until}     measured: the same until wall time `until`; latency percentiles, CPU
 *   probe {port, cycles}           `cycles` sequential cycles with wire accounting (round trips, commands)
 *   contend {name, start, end, port}  from wall `start` until `end`: acquire `name` → 1 ms critical section →
 *                                  release; returns per acquisition the wall times [acquire called, acquired,
 *                                  release called, last Redis read before acquired, release written], failures,
 *                                  CPU
 *   teardown                       close the client
 *   exit
 * Wall time = performance.timeOrigin + performance.now(); the reply to setup carries this process's
 * (wall − monotonic clock) so the parent can put every process on one clock.
 */
import { createInterface } from "node:readline";
import { type Adapter, type LibId, load } from "./_libs.ts";
import { clockSkewMs, pct, sortedF64 } from "./_stats.ts";
import { readWire, startStamps, startWire, stopWire } from "./_wire.ts";

const redleaseUrl = process.argv[2];
if (!redleaseUrl) {
  console.error("usage: _worker.ts <redlease module url>");
  process.exit(2);
}

const wall = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
let skew: number | undefined;

let ad: Adapter | undefined;
let seq = 0;
const fresh = (prefix: string) => `${prefix}:${process.pid}:${seq++}`;

async function cycle(name: string): Promise<void> {
  await ad!.release(await ad!.acquire(name));
}

async function loops(n: number, until: number, prefix: string, lat?: number[]): Promise<number> {
  let cycles = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (wall() < until) {
      const s = performance.now();
      await cycle(fresh(prefix));
      lat?.push(performance.now() - s);
      cycles++;
    }
  }));
  return cycles;
}

const cpuMicros = (u: NodeJS.CpuUsage) => u.user + u.system;

// deno-lint-ignore no-explicit-any
async function handle(req: any): Promise<unknown> {
  switch (req.op) {
    case "setup": {
      const loaded = await load(req.lib as LibId, Boolean(req.tuned), redleaseUrl);
      ad = await loaded.connect(req.url, req.seat);
      if (req.lib !== "ring") {
        await cycle(fresh("setup"));
        await cycle(fresh("setup"));
      }
      return { skew: skew ??= clockSkewMs(), pid: process.pid };
    }
    case "preload":
      for (const lib of req.libs as LibId[]) await load(lib, false, redleaseUrl);
      return {};
    case "loops":
      return { cycles: await loops(req.loops, wall() + req.ms, "warm") };
    case "uncontended": {
      const lat: number[] = [];
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const cycles = await loops(req.loops, req.until, "u", lat);
      const ms = performance.now() - t0;
      const cpu = cpuMicros(process.cpuUsage(cpu0));
      const s = sortedF64(lat);
      return { cycles, ms, p50: pct(s, 50), p99: pct(s, 99), cpuUs: cpu };
    }
    case "probe": {
      // Sequential cycles with the socket patched: round trips and client-sent commands per cycle.
      await cycle(fresh("probe"));
      startWire(req.port);
      for (let i = 0; i < req.cycles; i++) await cycle(fresh("probe"));
      readWire();
      return stopWire();
    }
    case "contend": {
      const recs: number[] = [];
      let failures = 0, firstError: string | undefined;
      const delay = req.start - wall();
      if (delay > 0) await sleep(delay);
      const stamps = startStamps(req.port);
      const cpu0 = process.cpuUsage();
      // Voluntary context switches: each is the process waking from a wait (a reply, a message, a timer).
      const vcs0 = process.resourceUsage().voluntaryContextSwitches;
      try {
        while (wall() < req.end) {
          const c = wall();
          let h: unknown;
          try {
            h = await ad!.acquire(req.name);
          } catch (e) {
            failures++;
            firstError ??= String(e);
            continue;
          }
          const a = wall();
          const d = stamps.lastData; // the reply / message that unblocked this acquisition was read then
          await sleep(1); // the critical section
          const r = wall();
          stamps.arm();
          await ad!.release(h);
          recs.push(c, a, r, d, stamps.writeAt); // writeAt: the release command was written then
          if (req.pauseMs) await sleep(req.pauseMs); // diagnostic (--pause): stay out of the queue for a while
        }
      } finally {
        stamps.stop();
      }
      const wakeups = process.resourceUsage().voluntaryContextSwitches - vcs0;
      return { recs, failures, firstError, cpuUs: cpuMicros(process.cpuUsage(cpu0)), wakeups };
    }
    case "teardown":
      await ad?.close();
      ad = undefined;
      return {};
    case "exit":
      setImmediate(() => process.exit(0));
      return {};
    default:
      throw new Error(`unknown request ${JSON.stringify(req)}`);
  }
}

// Requests are handled one at a time, in order.
let chain: Promise<unknown> = Promise.resolve();
createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  chain = chain.then(async () => {
    let reply: unknown;
    try {
      reply = { ok: true, ...(await handle(JSON.parse(line)) as object) };
    } catch (e) {
      reply = { ok: false, error: e instanceof Error ? (e.stack ?? e.message) : String(e) };
    }
    process.stdout.write(`@@ ${JSON.stringify(reply)}\n`);
  });
}).on("close", () => {
  // The parent went away (or closed our stdin): do not linger.
  setTimeout(() => process.exit(0), 200).unref();
  void chain.finally(() => process.exit(0));
});
