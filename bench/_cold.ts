/**
 * B5 cold start, run by bench/run.ts in a fresh process per library. Not meant to be run by hand.
 *
 *   node --import tsx bench/_cold.ts <lib> <redis url> <redis port> <redlease module url>
 *
 * Times, from just before the dynamic import of the Redis client and the library: importing the client, importing
 * the library, connecting a new client, the first acquire (the first lease), and the first release; counts TCP connects, round trips and the
 * commands written on the way, also as of the client being connected (so that the first acquire's own share is known). Prints one line `@@ <json>`.
 */
import { type LibId, load } from "./_libs.ts";
import { readWire, startWire, stopWire } from "./_wire.ts";

const [lib, url, port, redleaseUrl] = process.argv.slice(2);
const boot = performance.now(); // process start → this line (node, the tsx loader, this file)
startWire(Number(port));
const t0 = performance.now();
await import(lib === "redlease" || lib === "raw" ? "redis" : "ioredis"); // the client library alone
const tc = performance.now();
const loaded = await load(lib as LibId, false, redleaseUrl); // the lock library (the client is cached by now)
const t1 = performance.now();
const ad = await loaded.connect(url);
const t2 = performance.now();
const wireAtConnect = readWire(); // the client's own handshake (CLIENT SETINFO …) is not the library's
const h = await ad.acquire(`cold:${lib}:${process.pid}`);
const t3 = performance.now();
const wireToLease = readWire();
await ad.release(h);
const t4 = performance.now();
const wire = stopWire();
process.stdout.write(
  `@@ ${
    JSON.stringify({
      bootMs: boot,
      importClientMs: tc - t0,
      importMs: t1 - tc,
      connectMs: t2 - t1,
      acquireMs: t3 - t2,
      releaseMs: t4 - t3,
      toFirstLeaseMs: t3 - t0,
      wireAtConnect,
      wireToLease,
      wire,
    })
  }\n`,
);
await ad.close();
setTimeout(() => process.exit(0), 500).unref();
