/**
 * Redis commands per acquisition by kind of lease, counting the commands the scripts call (INFO commandstats):
 * W client loops on one name, each acquiring, holding ~1 ms and releasing, on a throwaway redis-server. Prints the
 * calls per acquisition of every command, and the client-sent ones (EVALSHA) apart. Never asserts.
 *
 *   node --import tsx bench/kinds_cost.ts [W=8] [n=4] [acquisitions=3000] [kind=permits|shared|exclusive]
 */
import { createClient } from "redis";
import { acquire, release } from "../mod.ts";
import { startRedis } from "../harness/redis.ts";

const W = Number(process.argv[2] ?? 8), N = Number(process.argv[3] ?? 4), K = Number(process.argv[4] ?? 3000);
const kind = process.argv[5] ?? "permits";
const server = await startRedis([], { label: "bench" });
const admin = createClient({ url: server.url });
await admin.connect();
const clients = await Promise.all(Array.from({ length: W }, async () => {
  const c = createClient({ url: server.url });
  c.on("error", () => {});
  await c.connect();
  return c;
}));
const opts = kind === "permits" ? { permits: N } : kind === "shared" ? { shared: true } : {};
// warm
for (const c of clients) await release(await acquire(c, "w", opts as never));
await admin.sendCommand(["CONFIG", "RESETSTAT"]);
let done = 0;
const t0 = performance.now();
await Promise.all(clients.map(async (c) => {
  while (done < K) {
    const l = await acquire(c, "x", { ...opts, waitMs: 30_000 } as never);
    done++;
    await new Promise((r) => setTimeout(r, 1));
    await release(l);
  }
}));
const el = performance.now() - t0;
const info = String(await admin.sendCommand(["INFO", "commandstats"]));
const cpu = String(await admin.sendCommand(["INFO", "cpu"]));
let total = 0, lua = 0, clientCmds = 0;
const rows: [string, number, number][] = [];
for (const m of info.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g)) {
  const [_, name, calls, usec] = m;
  if (name === "config" || name === "info") continue;
  rows.push([name, Number(calls), Number(usec)]);
}
for (const [name, calls] of rows) {
  if (
    name === "evalsha" || name === "eval" || name.startsWith("subscribe") || name === "ssubscribe" ||
    name === "unsubscribe"
  ) clientCmds += calls;
  else lua += calls;
}
rows.sort((a, b) => b[1] - a[1]);
console.log(`${kind} W=${W} n=${N} acquisitions=${done} ${(done / el * 1000).toFixed(0)}/s`);
for (const [name, calls, usec] of rows) {
  console.log(
    `  ${name.padEnd(18)} ${(calls / done).toFixed(2).padStart(7)}/acq  ${
      (usec / done).toFixed(2).padStart(7)
    } usec/acq`,
  );
}
console.log(`client cmds/acq ${(clientCmds / done).toFixed(2)}; lua+other/acq ${(lua / done).toFixed(2)}`);
const u = /used_cpu_user:([\d.]+)/.exec(cpu)!, s = /used_cpu_sys:([\d.]+)/.exec(cpu)!;
console.log(`cpu total ${(Number(u[1]) + Number(s[1])).toFixed(2)} s`);
for (const c of clients) await c.disconnect();
await admin.disconnect();
await server.stop();
process.exit(0);
