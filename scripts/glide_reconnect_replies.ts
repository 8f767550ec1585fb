/**
 * A reproduction of a Valkey GLIDE bug, run by hand (not part of `npm test`), for an upstream report and to check a
 * new GLIDE release: after a dropped connection GLIDE subscribes the client's channels again by itself, one SUBSCRIBE
 * per channel, all in flight at once, and GLIDE 2.5.2 hands their confirmations to the commands in flight on that
 * connection as their replies (a `{ kind: "Subscribe" }` object, then each ECHO the value of the one before it).
 * Four channels stay subscribed on a plain GLIDE client (no redlease in between) while `CLIENT KILL TYPE pubsub`
 * drops its connection every 150 ms and ECHOs run on it. redlease/glide subscribes its waiters on a connection of
 * their own for this reason (docs/clients.md; tests/glide_pubsub_replies.test.ts checks that through the driver).
 *
 *   node --import tsx scripts/glide_reconnect_replies.ts [--seconds 20]
 *
 * Prints the GLIDE version and what it saw; exits 0 when a reply was mixed up (reproduced), 1 when none was in the
 * time given.
 */
import { readFileSync } from "node:fs";
import { GlideClient, Logger } from "@valkey/valkey-glide";
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
  const admin = await srv.client();
  for (const ch of ["re-a", "re-b", "re-c", "re-d"]) await client.subscribe(new Set([ch]), 5_000); // one at a time
  void (async () => {
    for (;;) await client.getPubSubMessage(); // (read, as a subscriber does; ends when the client closes)
  })().catch(() => {});
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
      const r = await client.customCommand(["ECHO", v]).catch(() => v); // a call failed by the drop: not a mix-up
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
