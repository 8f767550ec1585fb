/**
 * Lazy script sending (EVALSHA first, the text by EVAL only after NOSCRIPT: what redlease does) against preloading
 * (SCRIPT LOAD of every script when a client is first used, as the design card first said), measured on the wire of
 * a new node-redis client's first acquire + release: round trips, commands and bytes written. Two servers states:
 * one that has the scripts (a warm server, the serverless cold start) and one that lost them (SCRIPT FLUSH: as a
 * promoted replica, a restart or a flush leaves it; Redis 7 replicas do not receive scripts). Prints; asserts
 * nothing.
 *
 *   node --import tsx bench/measure_script_loading.ts
 */
import { createClient } from "redis";
import { acquire, release } from "../mod.ts";
import * as scripts from "../src/_scripts.ts";
import { readWire, startWire, stopWire } from "./_wire.ts";
import { startRedis } from "../harness/redis.ts";

const all = Object.values(scripts).filter((s): s is scripts.Script => typeof s === "object" && "source" in s);
const srv = await startRedis();
const admin = await srv.client();
const url = `redis://127.0.0.1:${srv.port}`;

async function bytesIn(): Promise<number> {
  return Number(/total_net_input_bytes:(\d+)/.exec(await admin.info("stats"))![1]);
}

async function once(preload: boolean, flushed: boolean, i: number) {
  if (flushed) await admin.sendCommand(["SCRIPT", "FLUSH"]);
  else await release(await acquire(admin, `warm-${i}`)); // the scripts a cold start uses, cached
  const b0 = await bytesIn();
  startWire(srv.port);
  const client = await createClient({ url }).connect();
  const atConnect = readWire();
  if (preload) await Promise.all(all.map((s) => client.sendCommand(["SCRIPT", "LOAD", s.source])));
  await release(await acquire(client, `cold-${i}`));
  const wire = stopWire();
  const bytes = await bytesIn() - b0;
  await client.disconnect();
  const commands = Object.entries(wire.commands).map(([k, v]) => [k, v - (atConnect.commands[k] ?? 0)] as const)
    .filter(([, v]) => v > 0);
  return { roundTrips: wire.roundTrips - atConnect.roundTrips, commands: Object.fromEntries(commands), bytes };
}

console.log(`${all.length} scripts, ${all.reduce((n, s) => n + s.source.length, 0)} characters of Lua in all`);
let i = 0;
for (const flushed of [false, true]) {
  for (const preload of [false, true]) {
    const r = await once(preload, flushed, ++i);
    // (bytes: what the server read from every client meanwhile: the new client's handshake too, of about 150 bytes.)
    console.log(
      `${flushed ? "server lost its scripts" : "server has the scripts"} | ${preload ? "preload" : "lazy   "} | ` +
        `${r.roundTrips} round trips | ${JSON.stringify(r.commands)} | ~${r.bytes} bytes to Redis`,
    );
  }
}
await srv.stop();
