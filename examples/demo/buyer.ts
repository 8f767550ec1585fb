/**
 * One app server of the flash-sale demo (examples/demo/main.ts starts several). Not meant to be run by hand.
 *
 *   node --import tsx examples/demo/buyer.ts <redis url> <namespace> <index> <config json>
 *
 * Line protocol. stdout: `READY` once connected and warmed up; during a run `PROGRESS <handled>` at most every
 * 100 ms, then `RESULT <json of WorkerCounts>`. stdin: `RUN <mode>` starts serving this app server's share of
 * the requests in that mode (all app servers get it at the same moment); `EXIT` closes and exits.
 */
import process from "node:process";
import { createInterface } from "node:readline";
import { createClient } from "redis";
import { withLock } from "../../mod.ts";
import { type Mode, MODES, type SaleConfig, saleKeys, serve, share } from "./_flash_sale.ts";

const [url, ns, index, json] = process.argv.slice(2);
if (!url || !ns || index === undefined || !json) {
  console.error("usage: buyer.ts <redis url> <namespace> <index> <config json>");
  process.exit(2);
}
try {
  const config = JSON.parse(json) as SaleConfig;
  const client = createClient({ url });
  client.on("error", (e) => console.error(`app server ${index}: ${e}`));
  await client.connect();
  // Warm up: load the lease scripts and open the connections, so that the measured runs start hot.
  await withLock(client, `warmup:${index}`, () => {}, { prefix: saleKeys(ns, "redlease").leasePrefix });
  const requests = share(config, Number(index));
  const say = (line: string) => new Promise((resolve) => process.stdout.write(`${line}\n`, resolve));

  const lines = createInterface({ input: process.stdin });
  await say("READY");
  for await (const line of lines) {
    if (line === "EXIT") break;
    const mode = line.startsWith("RUN ") ? line.slice(4) as Mode : undefined;
    if (!mode || !MODES.includes(mode)) {
      console.error(`app server ${index}: unexpected line ${JSON.stringify(line)}`);
      process.exit(2);
    }
    let last = 0;
    const counts = await serve(client, mode, config, saleKeys(ns, mode), requests, (c) => {
      const now = performance.now();
      if (now - last >= 100) {
        last = now;
        void say(`PROGRESS ${c.handled}`);
      }
    });
    await say(`RESULT ${JSON.stringify(counts)}`);
  }
  await client.quit();
} catch (e) {
  // One line for the demo to show, instead of a stack trace in the middle of its progress bars.
  console.error(`app server ${index}: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}
process.exit(0);
