/**
 * B5 cold start over HTTP, run by bench/run.ts in a fresh process. Not meant to be run by hand.
 *
 *   node --import tsx bench/_cold_http.ts <redis url> <redlease module url>
 *
 * Starts the test HTTP bridge (harness/http_bridge.ts: the Upstash REST protocol in front of the redis-server) before
 * timing, then times importing the library and its HTTP adapter, the first acquire (the first lease) through a new
 * `upstash()` driver, and the first release; counts the requests (every command is one request) and their commands,
 * a round trip being requests sent before any reply came back. Prints one line `@@ <json>`, shaped as _cold.ts's.
 */
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { startHttpBridge } from "../harness/http_bridge.ts";
import type { WireCounts } from "./_wire.ts";

const [url, redleaseUrl] = process.argv.slice(2);
const boot = performance.now();
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bridge = await startHttpBridge(url);

const counts: WireCounts = { roundTrips: 0, connects: 0, commands: {} };
let answered = true;
const counted = (input: string, init: RequestInit): Promise<Response> => {
  const command = JSON.parse(String(init.body)) as string[];
  const name = command[0].toLowerCase() + (command[0] === "SCRIPT" ? `|${command[1].toLowerCase()}` : "");
  counts.commands[name] = (counts.commands[name] ?? 0) + 1;
  if (answered) counts.roundTrips++;
  answered = false;
  const p = fetch(input, init);
  const settle = () => void (answered = true);
  p.then(settle, settle);
  return p;
};
const snapshot = (): WireCounts => ({ ...counts, commands: { ...counts.commands } });
const requests = (w: WireCounts) => Object.values(w.commands).reduce((a, b) => a + b, 0);

const t0 = performance.now();
// deno-lint-ignore no-explicit-any
const [rl, { upstash }] = await Promise.all([
  import(redleaseUrl) as Promise<any>,
  import(
    pathToFileURL(join(root, "src", "adapters", "http.ts")).href
  ),
]);
const t1 = performance.now();
const driver = upstash({ url: bridge.url, token: bridge.token, fetch: counted });
const t2 = performance.now();
const bridged0 = bridge.requests;
const lease = await rl.acquire(driver, `cold:http:${process.pid}`, { waitMs: 10_000 });
const t3 = performance.now();
const wireToLease = snapshot();
if (bridge.requests - bridged0 !== requests(wireToLease)) {
  throw new Error(`the bridge served ${bridge.requests - bridged0} requests, the driver sent ${requests(wireToLease)}`);
}
await rl.release(lease);
const t4 = performance.now();
const wire = snapshot();
process.stdout.write(
  `@@ ${
    JSON.stringify({
      bootMs: boot,
      importClientMs: 0,
      importMs: t1 - t0,
      connectMs: t2 - t1,
      acquireMs: t3 - t2,
      releaseMs: t4 - t3,
      toFirstLeaseMs: t3 - t0,
      wireAtConnect: { roundTrips: 0, connects: 0, commands: {} },
      wireToLease,
      wire,
    })
  }\n`,
);
await bridge.stop();
setTimeout(() => process.exit(0), 500).unref();
