// Valkey GLIDE carries a client's commands and its waiters' subscriptions on one connection (RESP3). With two
// subscription changes in flight at once, GLIDE 2.5.2 hands the confirmation of one to another command as its reply,
// and each reply after it to the command after its own (27 Nov: an ECHO of v16634 answered v16633, a script's reply
// could go to another lease's call). The adapter makes one subscription change at a time; these tests send what
// waiters do (channels subscribed and unsubscribed, two at once) beside commands on the same client, and check every
// reply is its own command's.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { GlideClient } from "@valkey/valkey-glide";
import { acquire, type Lease, release } from "../mod.ts";
import { glide } from "../src/adapters/glide.ts";
import type { Driver } from "../src/driver.ts";
import { type RedisServer, sleep, startRedis } from "./_redis.ts";
import { glideClient } from "./_glide.ts";

let srv: RedisServer;
const clients: GlideClient[] = [];

describe("GLIDE: replies stay with their commands while waiters subscribe", () => {
  before(async () => {
    srv = await startRedis();
  });
  after(async () => {
    for (const c of clients) c.close();
    await srv.stop();
  });

  test("four channels subscribed and unsubscribed at once beside ECHOs: every ECHO answered with its own value", async () => {
    const client = await glideClient(srv.url);
    clients.push(client);
    const driver: Driver = glide(client);
    const noop = () => {};
    let sent = 0, wrong = 0, odd = 0;
    const seen: string[] = [];
    const echo = async (v: string) => {
      const r = await driver.command!("", ["ECHO", v]);
      sent++;
      if (r === v) return;
      if (typeof r === "string") wrong++;
      else odd++;
      if (seen.length < 3) seen.push(`${v} answered ${JSON.stringify(r)}`);
    };
    // (Without one change at a time, 27 of 35,632 ECHOs in 3 s came back wrong on Node, 30 of 43,088 on Bun: 3 s of
    // rounds, or 60,000 ECHOs. One at a time, rounds are slower: 176 ECHOs in 3 s on Deno in a CI run, so at least
    // 40 rounds, for 20 s at most.)
    const CHANNELS = ["ch-a", "ch-b", "ch-c", "ch-d"];
    const t0 = performance.now();
    let n = 0, rounds = 0;
    while (
      (performance.now() - t0 < 3_000 || rounds < 40) && performance.now() - t0 < 20_000 && sent < 60_000
    ) {
      rounds++;
      const ops: Promise<unknown>[] = CHANNELS.map((ch) => driver.subscribe!(ch, noop));
      for (let i = 0; i < 8; i++) ops.push(echo(`v${n++}`));
      ops.push(...CHANNELS.map((ch) => driver.unsubscribe!(ch, noop)));
      await Promise.all(ops);
    }
    assert.ok(rounds >= 40, `only ${rounds} rounds in 20 s`);
    assert.equal(wrong + odd, 0, `${wrong} ECHOs got another's value, ${odd} a non-string, of ${sent}: ${seen}`);
  });

  test("waiters on many names, each subscribing, beside leases taken and released on the same client", async () => {
    const client = await glideClient(srv.url);
    clients.push(client);
    const driver = glide(client);
    const holders = await Promise.all(Array.from({ length: 8 }, (_, i) => acquire(driver, `held-${i}`)));
    let waiting: Promise<Lease>[] = [];
    try {
      // Waiters subscribe to 8 channels at once while 200 leases are taken and released beside them: a reply that
      // went to another call would fail a release (false) or hand a lease another's fence.
      const waiters = waiting = holders.map((h) => acquire(driver, h.name, { waitMs: 10_000 }));
      const fences = new Set<number>();
      for (let round = 0; round < 25; round++) {
        const leases = await Promise.all(Array.from({ length: 8 }, (_, i) => acquire(driver, `free-${round}-${i}`)));
        for (const l of leases) {
          assert.ok(!fences.has(l.fence), `fence ${l.fence} given twice`);
          fences.add(l.fence);
        }
        assert.deepEqual(await Promise.all(leases.map((l) => release(l))), Array(8).fill(true));
      }
      for (const h of holders) assert.equal(await release(h), true);
      const next = await Promise.all(waiters);
      assert.deepEqual(next.map((l) => l.name), holders.map((h) => h.name));
      for (const l of next) assert.equal(await release(l), true);
    } finally {
      for (const h of holders) await release(h).catch(() => {});
      // (A round that failed left its waiters: settled and released here, not left to reject unheard.)
      for (const w of await Promise.allSettled(waiting)) if (w.status === "fulfilled") await release(w.value);
    }
  });
  // After a dropped connection GLIDE subscribes every channel again at once, and GLIDE 2.5.2 hands those
  // confirmations to the commands in flight on that connection as their replies
  // (scripts/glide_reconnect_replies.ts). The waiters subscribe on a connection of their own, which runs no script.
  test("every connection of the client dropped again and again while 4 waiter channels are subscribed: every ECHO answered with its own value", async () => {
    const client = await glideClient(srv.url);
    clients.push(client);
    const driver = glide(client);
    const admin = await srv.client();
    const noop = () => {};
    for (const ch of ["re-a", "re-b", "re-c", "re-d"]) await driver.subscribe!(ch, noop);
    let n = 0, sent = 0, kills = 0;
    const seen: string[] = [];
    const end = performance.now() + 3_000;
    const killer = (async () => {
      while (performance.now() < end) {
        await sleep(150);
        // The subscriber's connection and the commands' both (not this test's own).
        await admin.sendCommand(["CLIENT", "KILL", "TYPE", "pubsub"]);
        await admin.sendCommand(["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
        kills++;
      }
    })();
    while (performance.now() < end) {
      await Promise.all(Array.from({ length: 8 }, async () => {
        const v = `v${n++}`;
        const r = await driver.command!("", ["ECHO", v]).catch(() => v); // a call failed by the drop: not a mix-up
        sent++;
        if (r !== v && seen.length < 3) seen.push(`${v} answered ${JSON.stringify(r)}`);
      }));
    }
    await killer;
    assert.ok(kills >= 5 && sent > 100, `${kills} drops, ${sent} ECHOs`);
    assert.deepEqual(seen, [], `mixed up in ${sent} ECHOs over ${kills} drops`);
    for (const ch of ["re-a", "re-b", "re-c", "re-d"]) await driver.unsubscribe!(ch, noop);
  });

  // GLIDE waits, in each SUBSCRIBE, for every channel it wants, and keeps wanting one whose SUBSCRIBE timed out (here
  // one the ACL refuses): the adapter unsubscribes it before the next change in its order, or the waiter's SUBSCRIBE
  // queued behind it timed out too (after 10 s, where GLIDE's own bound is 5).
  test("a waiter's subscription queued behind one the ACL refuses still subscribes", async () => {
    const admin = await srv.client();
    await admin.sendCommand([
      "ACL",
      "SETUSER",
      "refused-ch",
      "on",
      ">pw",
      "resetchannels",
      "+@all",
      "~*",
      "&redlease:*",
    ]);
    const url = new URL(srv.url);
    url.username = "refused-ch";
    url.password = "pw";
    const client = await glideClient(url.toString());
    clients.push(client);
    const driver = glide(client);
    const t0 = performance.now();
    const refused = driver.subscribe!("not-granted", () => {});
    const allowed = driver.subscribe!("redlease:{w}:ch", () => {});
    await assert.rejects(refused);
    await allowed;
    assert.ok(performance.now() - t0 < 8_000, `subscribed after ${Math.round(performance.now() - t0)} ms`);
  });
});
