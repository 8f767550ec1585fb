/**
 * Worker for bench/measure.ts, measure C (handoff). Not meant to be run by hand.
 *
 *   node --import tsx bench/_measure_worker.ts <redis url> <lease name> <worker index>
 *
 * Protocol (line-based): connects, warms up (script load, subscriber connection), prints `READY` on stdout, then
 * reads `GO <startWall> <endWall>` from stdin (wall = performance.timeOrigin + performance.now(), in ms). From
 * startWall until endWall it loops acquire (waitMs 60 s) → 1 ms critical section → release on the lease name,
 * then prints one line `RESULT <json>` with its records [[acquiredWall, releaseCallWall], ...] and exits.
 */
import { createClient } from "redis";
import { acquire, release } from "../mod.ts";

const [url, name, index] = process.argv.slice(2);
if (!url || !name || index === undefined) {
  console.error("usage: _measure_worker.ts <redis url> <lease name> <worker index>");
  process.exit(2);
}

const wall = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function readGo(): Promise<[number, number]> {
  return new Promise((resolve, reject) => {
    let buf = "";
    const onData = (chunk: Buffer) => {
      buf += chunk.toString("utf8");
      const nl = buf.indexOf("\n");
      if (nl < 0) return;
      process.stdin.off("data", onData);
      process.stdin.pause();
      const m = /^GO (\S+) (\S+)$/.exec(buf.slice(0, nl).trim());
      if (!m) return reject(new Error(`bad go line: ${JSON.stringify(buf.slice(0, nl))}`));
      resolve([Number(m[1]), Number(m[2])]);
    };
    process.stdin.on("data", onData);
    process.stdin.once("end", () => reject(new Error("stdin closed before GO")));
  });
}

const client = createClient({ url });
client.on("error", (e) => console.error(`worker ${index}: redis error:`, e));
await client.connect();
try {
  // Warm-up: loads the scripts (one uncontended cycle) and opens the subscriber connection (one contended
  // wait on a warm-up name the parent holds for a moment), so the timed phase sees only steady-state traffic.
  await release(await acquire(client, `${name}:warm:${index}`));
  await release(await acquire(client, `${name}:warm`, { waitMs: 30_000 }));

  console.log("READY");
  const [startWall, endWall] = await readGo();
  const delay = startWall - wall();
  if (delay > 0) await sleep(delay);

  const records: [number, number][] = [];
  while (wall() < endWall) {
    const lease = await acquire(client, name, { waitMs: 60_000 });
    const acquired = wall();
    await sleep(1);
    const releasing = wall();
    records.push([acquired, releasing]);
    await release(lease);
  }
  console.log(`RESULT ${JSON.stringify({ worker: Number(index), records })}`);
} finally {
  await client.quit().catch(() => {});
}
// The library's timers are unref'd and its subscriber closes with the client: the process should exit by itself.
// If something keeps it alive, say so and exit anyway.
setTimeout(() => {
  console.error(`worker ${index}: still alive 2 s after client.quit(); exiting`);
  process.exit(3);
}, 2_000).unref();
