/**
 * A reproduction, run by hand (not part of `npm test`): after a dropped connection, Valkey GLIDE subscribes the
 * client's channels again by itself, one SUBSCRIBE per channel, all in flight at once and outside redlease/glide's
 * one-subscription-change-at-a-time order; GLIDE 2.5.2 then hands their confirmations to the commands in flight as
 * replies (a `{ kind: "Subscribe" }` object, then each ECHO the value of the one before it; through redlease, a
 * release of a held lease answered `false`). Four waiter channels stay subscribed on a GLIDE client through the
 * redlease driver while `CLIENT KILL TYPE pubsub` drops its connection every 150 ms and ECHOs run on it; no
 * subscription change of redlease's is in flight. docs/clients.md describes the limitation; this is its evidence
 * for an upstream report, and the check to run on a new GLIDE release.
 *
 *   node --import tsx scripts/glide_reconnect_replies.ts [--seconds 20]
 *
 * Prints the GLIDE version and what it saw; exits 0 when a reply was mixed up (reproduced), 1 when none was in the
 * time given (a GLIDE that no longer does it: docs/clients.md's limitation can go).
 */
import { readFileSync } from "node:fs";
import { GlideClient, Logger } from "@valkey/valkey-glide";
import { glide } from "../src/adapters/glide.ts";
import { sleep, startRedis } from "../harness/redis.ts";

const i = process.argv.indexOf("--seconds");
const seconds = i > 0 ? Number(process.argv[i + 1]) : 20;
const version = JSON.parse(
  readFileSync(new URL("../node_modules/@valkey/valkey-glide/package.json", import.meta.url), "utf8"),
).version;
Logger.setLoggerConfig("off");
const srv = await startRedis([], { label: "glide-reconnect" });
const client = await GlideClient.createClient({ addresses: [{ host: "127.0.0.1", port: srv.port }] });
try {
  const driver = glide(client);
  const admin = await srv.client();
  const noop = () => {};
  for (const ch of ["re-a", "re-b", "re-c", "re-d"]) await driver.subscribe!(ch, noop);
  let n = 0, sent = 0, kills = 0;
  const seen: string[] = [];
  const end = performance.now() + seconds * 1000;
  const killer = (async () => {
    while (seen.length === 0 && performance.now() < end) {
      await sleep(150);
      await admin.sendCommand(["CLIENT", "KILL", "TYPE", "pubsub"]);
      kills++;
    }
  })();
  while (seen.length === 0 && performance.now() < end) {
    await Promise.all(Array.from({ length: 8 }, async () => {
      const v = `v${n++}`;
      const r = await driver.command!("", ["ECHO", v]).catch(() => v); // a call failed by the drop: not a mix-up
      sent++;
      if (r !== v && seen.length < 3) seen.push(`${v} answered ${JSON.stringify(r)}`);
    }));
  }
  await killer;
  console.log(`GLIDE ${version}: ${sent} ECHOs over ${kills} dropped connections`);
  console.log(seen.length > 0 ? `reproduced: ${seen.join("; ")}` : "not reproduced");
  process.exitCode = seen.length > 0 ? 0 : 1;
} finally {
  client.close();
  await srv.stop();
}
