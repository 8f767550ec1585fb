/**
 * Measures what the topology notes report: Redlock acquire latency over 5 local masters, and a Sentinel
 * failover with a lease held under `replicas: 1` (kill -> promotion -> the holder's first renewal on the new
 * primary). Prints; asserts nothing.
 *
 *   node --import tsx bench/measure_topology.ts [--iterations 1000]
 */
import { loadavg } from "node:os";
import { acquire, inspect, release } from "../mod.ts";
import { redlock } from "../src/redlock.ts";
import { sleep, startMasters, startSentinel } from "../harness/topology.ts";

const iterations = Number(process.argv[process.argv.indexOf("--iterations") + 1]) || 1000;
const pct = (xs: number[], p: number) =>
  xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const load = () => loadavg().map((x) => x.toFixed(2)).join(" ");

const masters = await startMasters(5);
try {
  const clients = await Promise.all(masters.map((m) => m.client()));
  await release(await acquire(redlock(clients), "warm"));
  const acquireMs: number[] = [];
  const cycleMs: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    const lease = await acquire(redlock(clients), `redlock-${i}`);
    const t1 = performance.now();
    await release(lease);
    acquireMs.push(t1 - t0);
    cycleMs.push(performance.now() - t0);
  }
  console.log(
    `Redlock, 5 masters, ${iterations} sequential acquisitions: acquire p50 ${pct(acquireMs, 0.5).toFixed(3)} ms, ` +
      `p99 ${pct(acquireMs, 0.99).toFixed(3)} ms; acquire+release p50 ${pct(cycleMs, 0.5).toFixed(3)} ms`,
  );
} finally {
  await masters.stopAll();
}

const s = await startSentinel();
try {
  const client = await s.sentinelClient();
  const lease = await acquire(client, "failover", { replicas: 1, watchdogMs: 6_000 }); // renewed every 2 s
  await sleep(100);
  const killed = await s.killMaster();
  const port = await s.waitForFailover(s.master.port);
  const promoted = performance.now() - killed;
  const node = await s.nodeClient(port);
  const ttl0 = (await inspect(node, "failover")).remainingMs;
  let renewed = NaN;
  for (const end = performance.now() + 20_000; performance.now() < end;) {
    const info = await inspect(node, "failover");
    if (info.remainingMs > ttl0 + 200) {
      renewed = performance.now() - killed;
      break;
    }
    await sleep(20);
  }
  console.log(
    `Sentinel failover (down-after 1000 ms): primary killed -> replica promoted ${promoted.toFixed(0)} ms; ` +
      `-> the holder's first renewal on the new primary ${
        renewed.toFixed(0)
      } ms; lease aborted: ${lease.signal.aborted}`,
  );
  await release(lease);
} finally {
  await s.stop();
}
console.log(`load average ${load()}`);
