/**
 * One scheduler process of the leader-election demo (examples/demo/main.ts starts several). Not meant to be run by hand.
 *
 *   node --import tsx examples/demo/scheduler.ts <redis url> <namespace> <lease ms> <slot ms>
 *
 * Campaigns for `<namespace>:scheduler`; while leading, runs the job of every time slot (one per `slot ms`): WORK_MS of
 * work, then a commit fenced by its term (see COMMIT in _scheduler.ts). Prints `READY`, `LEADER <term>` each time it
 * is elected, and `WORK` as each job's work starts. Runs until killed.
 */
import process from "node:process";
import { createClient } from "redis";
import { campaign, release } from "../../mod.ts";
import { COMMIT, schedulerKeys, WORK_MS } from "./_scheduler.ts";

const [url, ns, leaseText, slotText] = process.argv.slice(2);
if (!url || !ns || !leaseText || !slotText) {
  console.error("usage: scheduler.ts <redis url> <namespace> <lease ms> <slot ms>");
  process.exit(2);
}
const leaseMs = Number(leaseText), slotMs = Number(slotText);
const keys = schedulerKeys(ns);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const client = createClient({ url });
client.on("error", () => {});
await client.connect();
console.log("READY");
for (;;) {
  const leadership = await campaign(client, keys.election, {
    watchdogMs: leaseMs,
    value: String(process.pid),
    prefix: ns,
  });
  console.log(`LEADER ${leadership.fence}`);
  let last = Math.floor(Date.now() / slotMs) - 1;
  while (!leadership.signal.aborted) {
    const slot = Math.floor(Date.now() / slotMs);
    if (slot > last) {
      last = slot;
      console.log("WORK");
      await sleep(WORK_MS); // the job's work; a process paused here commits late, with its old term
      await client.eval(COMMIT, {
        keys: [keys.maxTerm, keys.jobs, keys.refused],
        arguments: [String(leadership.fence), String(slot), String(Date.now())],
      });
    }
    await sleep(Math.max(1, (slot + 1) * slotMs - Date.now()));
  }
  await release(leadership).catch(() => {});
}
