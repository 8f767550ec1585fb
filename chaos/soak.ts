/**
 * Soak: 200,000 acquire/release cycles with contention, then check that heap, timers, listeners and connections
 * are back at their baseline.
 *
 *   npm run chaos -- --soak [--cycles 200000] [--seed 1]
 *   node --expose-gc --import tsx chaos/soak.ts [--cycles N] [--seed S]   (the same, directly)
 *
 * One process, two clients, 8 concurrent loops over 50 names; 30 % of cycles go to 3 hot names, so many acquires
 * wait in the queue and are woken by a handoff. The mix: plain acquire/release (watchdog), fixed leases,
 * withLock, and — not counted as cycles — `waitMs: 0` attempts that fail and waits cancelled by an AbortSignal.
 *
 * Measured before (after a warm-up) and after (once every loop is done): heap used after gc(); live timers,
 * counted by wrapping setTimeout/clearTimeout (the library's timers are unref'd, so
 * process.getActiveResourcesInfo() does not list them; it is printed too); event listeners on the clients; and
 * on the server: connections (CLIENT LIST), subscribed channels (PUBSUB CHANNELS), queue keys. Writes
 * chaos/results/soak.json and exits non-zero if anything did not return to baseline.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { acquire, inspect, LockTimeoutError, release, withLock } from "../mod.ts";
import { rng } from "../harness/rng.ts";
import { root } from "./_scenario.ts";
import { type Client, startChaosRedis } from "./_redis.ts";

const argv = process.argv.slice(2);
const opt = (name: string, dflt: number) => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
};
const CYCLES = opt("--cycles", 200_000);
const SEED = opt("--seed", 1);
const LOOPS = 8;
const NAMES = 50;
const HOT = 3;

// --- live timer accounting (before any library code runs a timer)
const live = new Set<unknown>();
{
  const st = globalThis.setTimeout;
  const ct = globalThis.clearTimeout;
  const wrapped = ((fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    const t: unknown = st(
      (...a: unknown[]) => {
        live.delete(t);
        fn(...a);
      },
      ms,
      ...args,
    );
    live.add(t);
    return t;
  }) as unknown as typeof setTimeout;
  globalThis.setTimeout = wrapped;
  globalThis.clearTimeout = ((t: Parameters<typeof clearTimeout>[0]) => {
    live.delete(t);
    ct(t);
  }) as typeof clearTimeout;
}

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) console.warn("no gc(): run with --expose-gc (npm run chaos -- --soak does) for meaningful heap figures");

const srv = await startChaosRedis();
const admin = await srv.client();
const clients: Client[] = [await srv.client(), await srv.client()];
const names = Array.from({ length: NAMES }, (_, i) => `soak:${i}`);
const lastFence = new Map<string, number>();
const tick = () => new Promise<void>((r) => setImmediate(r));

interface Snapshot {
  heapUsedMB: number;
  liveTimers: number;
  activeResources: Record<string, number>;
  clientListeners: number;
  serverConnections: number;
  subscribedChannels: number;
  queueKeys: number;
}

async function snapshot(): Promise<Snapshot> {
  await new Promise((r) => setTimeout(r, 100));
  for (let i = 0; i < 4; i++) {
    gc?.();
    await tick();
  }
  const activeResources: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) activeResources[r] = (activeResources[r] ?? 0) + 1;
  const list = await admin.sendCommand(["CLIENT", "LIST"]) as string;
  const channels = await admin.sendCommand(["PUBSUB", "CHANNELS"]) as string[];
  const queues = await admin.keys("redlease:*:q");
  const emitters = clients as unknown as Array<
    { eventNames(): Array<string | symbol>; listenerCount(e: string | symbol): number }
  >;
  return {
    heapUsedMB: Math.round(process.memoryUsage().heapUsed / 1e4) / 100,
    liveTimers: live.size,
    activeResources,
    clientListeners: emitters.reduce((n, c) => n + c.eventNames().reduce((m, e) => m + c.listenerCount(e), 0), 0),
    serverConnections: list.trim().split("\n").length,
    subscribedChannels: channels.length,
    queueKeys: queues.length,
  };
}

const stats = { cycles: 0, timeouts: 0, aborted: 0, waited: 0, errors: {} as Record<string, number>, fenceErrors: 0 };
let claimed = 0;
const heapTrend: Array<[number, number]> = [];

async function loop(k: number, until: number): Promise<void> {
  const client = clients[k % 2];
  const rand = rng(SEED * 1000 + k);
  while (claimed < until) {
    const i = claimed++;
    const r = rand();
    const name = r < 0.3 ? names[Math.floor(rand() * HOT)] : names[HOT + Math.floor(rand() * (NAMES - HOT))];
    const kind = Math.floor(rand() * 20);
    const t0 = performance.now();
    try {
      if (kind === 0) {
        // A single attempt that may find the lease held (not counted as a cycle).
        claimed--;
        try {
          const l = await acquire(client, name, { waitMs: 0 });
          await release(l);
        } catch (e) {
          if (!(e instanceof LockTimeoutError)) throw e;
          stats.timeouts++;
        }
        continue;
      }
      if (kind === 1) {
        // A wait cancelled almost at once (not counted as a cycle).
        claimed--;
        try {
          const l = await acquire(client, name, { signal: AbortSignal.timeout(1) });
          await release(l);
        } catch (e) {
          if ((e as Error).name !== "TimeoutError") throw e;
          stats.aborted++;
        }
        continue;
      }
      // Checked while the lease is held, so the previous holder of the name has recorded its fence already.
      const checkFence = (fence: number) => {
        if (!(fence > (lastFence.get(name) ?? 0))) stats.fenceErrors++;
        lastFence.set(name, Math.max(fence, lastFence.get(name) ?? 0));
      };
      if (kind === 2) {
        await withLock(client, name, async (_signal, lease) => {
          checkFence(lease.fence);
          await tick();
        }, { waitMs: 10_000 });
      } else {
        const lease = await acquire(client, name, kind === 3 ? { leaseMs: 5_000, waitMs: 10_000 } : { waitMs: 10_000 });
        checkFence(lease.fence);
        await tick();
        if (!(await release(lease))) throw new Error(`release of ${name} returned false`);
      }
      if (performance.now() - t0 > 2) stats.waited++;
      stats.cycles++;
      if (stats.cycles % 50_000 === 0) {
        gc?.();
        heapTrend.push([stats.cycles, Math.round(process.memoryUsage().heapUsed / 1e4) / 100]);
        console.log(`  ${stats.cycles} cycles, heap ${heapTrend.at(-1)![1]} MB, live timers ${live.size}`);
      }
    } catch (e) {
      const c = (e as Error).constructor?.name ?? "non-error";
      stats.errors[c] = (stats.errors[c] ?? 0) + 1;
      if (stats.errors[c] <= 3) console.error(`  cycle ${i}: ${String(e)}`);
    }
  }
}

try {
  // Warm-up: scripts loaded, subscriber connections open, JIT warm.
  const warm = Math.min(5_000, Math.floor(CYCLES / 10));
  await Promise.all(Array.from({ length: LOOPS }, (_, k) => loop(k, warm)));
  const warmCycles = stats.cycles;
  const before = await snapshot();
  console.log(`baseline after ${warmCycles} warm-up cycles:`, JSON.stringify(before));

  stats.cycles = 0;
  claimed = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: LOOPS }, (_, k) => loop(k + LOOPS, CYCLES)));
  const seconds = (performance.now() - t0) / 1000;
  const after = await snapshot();

  const leftovers = [];
  for (const n of names) {
    const info = await inspect(clients[0], n);
    if (info.held || info.waiters > 0) leftovers.push(info);
  }

  const rows: Array<[string, unknown, unknown]> = [
    ["heap used after gc (MB)", before.heapUsedMB, after.heapUsedMB],
    ["live timers (setTimeout not yet fired or cleared)", before.liveTimers, after.liveTimers],
    ["process.getActiveResourcesInfo()", JSON.stringify(before.activeResources), JSON.stringify(after.activeResources)],
    ["event listeners on the 2 clients", before.clientListeners, after.clientListeners],
    ["server connections (CLIENT LIST, incl. 1 admin)", before.serverConnections, after.serverConnections],
    ["subscribed channels (PUBSUB CHANNELS)", before.subscribedChannels, after.subscribedChannels],
    ["queue keys left (redlease:*:q)", before.queueKeys, after.queueKeys],
  ];
  const problems: string[] = [];
  if (stats.cycles < CYCLES) problems.push(`only ${stats.cycles} of ${CYCLES} cycles completed`);
  if (Object.keys(stats.errors).length > 0) problems.push(`errors: ${JSON.stringify(stats.errors)}`);
  if (stats.fenceErrors > 0) problems.push(`${stats.fenceErrors} fences not above the previous one for their name`);
  if (after.heapUsedMB - before.heapUsedMB > 8) {
    problems.push(`heap grew by ${(after.heapUsedMB - before.heapUsedMB).toFixed(2)} MB`);
  }
  if (after.liveTimers > before.liveTimers) problems.push(`${after.liveTimers - before.liveTimers} more live timers`);
  if (after.clientListeners !== before.clientListeners) problems.push("client listener count changed");
  if (after.serverConnections > before.serverConnections) problems.push("more server connections");
  if (after.subscribedChannels > 0) problems.push(`${after.subscribedChannels} channels still subscribed`);
  if (after.queueKeys > 0) problems.push(`${after.queueKeys} queue keys left`);
  if (leftovers.length > 0) problems.push(`leases still held or queued: ${JSON.stringify(leftovers.slice(0, 3))}`);
  for (const [k, v] of Object.entries(after.activeResources)) {
    if (v > (before.activeResources[k] ?? 0)) {
      problems.push(`more active ${k} resources (${before.activeResources[k] ?? 0} → ${v})`);
    }
  }

  const out: string[] = [];
  out.push(
    `Soak: ${stats.cycles} acquire/release cycles in ${seconds.toFixed(1)} s (${
      Math.round(stats.cycles / seconds)
    }/s), ` +
      `${LOOPS} loops on 2 clients over ${NAMES} names (30 % on ${HOT} hot names); ${stats.waited} cycles waited > 2 ms; ` +
      `plus ${stats.timeouts} waitMs:0 attempts that found the lease held and ${stats.aborted} waits cancelled by a signal; ` +
      `seed ${SEED}.`,
  );
  out.push("");
  out.push("| measure | before | after |");
  out.push("|---|---|---|");
  for (const [k, b, a] of rows) out.push(`| ${k} | ${b} | ${a} |`);
  out.push("");
  out.push(`heap during the run (cycles → MB): ${heapTrend.map(([c, m]) => `${c} → ${m}`).join(", ")}`);
  out.push(
    problems.length === 0 ? "verdict: ok, everything back at baseline" : `verdict: FAIL — ${problems.join("; ")}`,
  );
  console.log(`\n${out.join("\n")}`);
  const dir = join(root, "chaos", "results");
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "soak.json"),
    JSON.stringify(
      {
        at: new Date().toISOString(),
        cycles: stats.cycles,
        seconds,
        stats,
        before,
        after,
        heapTrend,
        leftovers,
        problems,
      },
      null,
      2,
    ),
  );
  process.exitCode = problems.length === 0 ? 0 : 1;
} finally {
  await srv.stop();
}
