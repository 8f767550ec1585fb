/**
 * A Sentinel failover as a lease user sees it, per client: a primary with two replicas and three sentinels, a loop
 * of `acquire(…, { waitMs: 0 })` on fresh names every 50 ms, the primary SIGKILLed; printed: when a sentinel names a
 * new primary that reports role:master ("promoted"), and the first grant after it. node-redis v5 `createSentinel`
 * and ioredis in sentinel mode (through `ioredis()`). Prints; asserts nothing. (Cluster failovers are measured by
 * tests/cluster_failover.node.test.ts, and both by the chaos topology scenarios.)
 *
 *   node --import tsx bench/measure_failover.ts [--runs 3]
 */
import { acquire, type RedisLike } from "../mod.ts";
import { ioredis } from "../src/adapters/ioredis.ts";
import { startSentinel } from "../harness/sentinel.ts";

const runs = Number(process.argv[process.argv.indexOf("--runs") + 1]) || 3;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
// (Leases that cannot be given back during the outage lapse by their TTL: their warnings are expected here.)
console.warn = () => {};

async function once(clientKind: "node-redis v5" | "ioredis"): Promise<{ promotedMs: number; grantMs: number }> {
  const s = await startSentinel({ replicas: 2 });
  try {
    const client: RedisLike = clientKind === "ioredis" ? ioredis(await s.ioredisClient()) : await s.sentinelClient();
    let promoted = 0, granted = 0, stop = false, i = 0;
    const loop = (async () => {
      while (!stop) {
        try {
          await acquire(client, `failover-${i++}`, { waitMs: 0, leaseMs: 1_000 });
          if (promoted && !granted) granted = performance.now();
        } catch { /* the outage */ }
        await sleep(50);
      }
    })();
    await sleep(500);
    const old = s.master.port;
    const killed = await s.killMaster();
    await s.waitForFailover(old, 30_000);
    promoted = performance.now();
    while (!granted && performance.now() - promoted < 20_000) await sleep(10);
    stop = true;
    await loop;
    return { promotedMs: promoted - killed, grantMs: granted ? granted - promoted : NaN };
  } finally {
    await s.stop();
  }
}

for (const kind of ["node-redis v5", "ioredis"] as const) {
  for (let r = 1; r <= runs; r++) {
    const { promotedMs, grantMs } = await once(kind);
    console.log(
      `${kind}, run ${r}: promoted ${Math.round(promotedMs)} ms after the kill; first grant ${
        Number.isNaN(grantMs) ? "none within 20 s" : `${Math.round(grantMs)} ms`
      } after the promotion`,
    );
  }
}
process.exit(0);
