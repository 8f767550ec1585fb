/**
 * Valkey GLIDE: what redlease's hot path costs when its scripts run through `customCommand(["EVALSHA", …])` (what
 * redlease/glide sends, leaving NOSCRIPT recovery to redlease) against GLIDE's `invokeScript` (a `Script` object per
 * script, with which GLIDE EVALSHAs and loads the script itself on NOSCRIPT), in alternating rounds in one process on
 * one throwaway redis-server. A cycle is `acquire()` + `release()` of an uncontended exclusive lease through the real
 * API, over two drivers that differ only in `evalScript`. Per way: cycles/s with `C` concurrent loops and the
 * process's CPU µs per cycle (JavaScript and GLIDE's Rust core threads together), medians over rounds with the
 * range. Prints; never asserts.
 *
 *   node --import tsx bench/glide_scripts.ts [cycles=20000] [rounds=7] [concurrency=64]
 */
import { GlideClient, Logger, Script } from "@valkey/valkey-glide";
import { startRedis } from "../harness/redis.ts";
import { acquire, release } from "../mod.ts";
import { glide } from "../src/adapters/glide.ts";
import * as all from "../src/_scripts.ts";
import type { Driver } from "../src/driver.ts";
import { median } from "./_stats.ts";

const N = Number(process.argv[2] ?? 20_000), ROUNDS = Number(process.argv[3] ?? 7), C = Number(process.argv[4] ?? 64);
Logger.setLoggerConfig("error");
const srv = await startRedis();
const connect = () => GlideClient.createClient({ addresses: [{ host: "127.0.0.1", port: srv.port }] });
const [c1, c2] = [await connect(), await connect()];

// Every script of redlease as a GLIDE Script, by SHA1.
const scripts = new Map<string, Script>();
for (const s of Object.values(all)) {
  if (typeof s === "object" && s !== null && "sha" in s && "source" in s) scripts.set(s.sha, new Script(s.source));
}
const viaCustomCommand = glide(c1);
const viaInvokeScript: Driver = {
  ...glide(c2),
  evalScript: (sha, keys, args) => c2.invokeScript(scripts.get(sha)!, { keys: [...keys], args: [...args] }),
};
const ways: Record<string, Driver> = { customCommand: viaCustomCommand, invokeScript: viaInvokeScript };

async function round(driver: Driver): Promise<{ perSec: number; cpuUs: number }> {
  let i = 0;
  const cpu0 = process.cpuUsage(), t0 = performance.now();
  await Promise.all(Array.from({ length: C }, async () => {
    while (i < N) await release(await acquire(driver, `glide-${i++ % 1000}`));
  }));
  const ms = performance.now() - t0, cpu = process.cpuUsage(cpu0);
  return { perSec: N / ms * 1000, cpuUs: (cpu.user + cpu.system) / N };
}

const results: Record<string, { perSec: number[]; cpuUs: number[] }> = {};
for (const name of Object.keys(ways)) {
  results[name] = { perSec: [], cpuUs: [] };
  await round(ways[name]); // warm-up (and the scripts cached on the server)
}
for (let r = 0; r < ROUNDS; r++) {
  for (const name of r % 2 ? Object.keys(ways).reverse() : Object.keys(ways)) {
    const { perSec, cpuUs } = await round(ways[name]);
    results[name].perSec.push(perSec);
    results[name].cpuUs.push(cpuUs);
  }
}
console.log(`GLIDE: ${N} acquire + release cycles × ${ROUNDS} rounds, ${C} concurrent loops (medians, range)`);
for (const [name, r] of Object.entries(results)) {
  const range = (xs: number[], f: (x: number) => string) => `${f(Math.min(...xs))}–${f(Math.max(...xs))}`;
  console.log(
    `${name.padEnd(14)} ${Math.round(median(r.perSec))} cycles/s (${range(r.perSec, (x) => String(Math.round(x)))})` +
      `   ${median(r.cpuUs).toFixed(1)} CPU µs/cycle (${range(r.cpuUs, (x) => x.toFixed(1))})`,
  );
}
for (const s of scripts.values()) s.release();
c1.close();
c2.close();
await srv.stop();
