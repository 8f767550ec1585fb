// Valkey GLIDE on Redis Cluster: a call GLIDE gives back with a MOVED or ASK (it stops following redirections after its
// retries) ran on no node, and redlease/glide has redlease send it again (`unsent`) while its caller waits. Real
// redirections of a slot being migrated: the source MIGRATING, the target not yet IMPORTING, so the source answers ASK
// and the target MOVED back, until the slot is given to the target. Every node's INFO commandstats shows the acquire's
// script rejected many times (never run), then run once. And the other side: a call that was on the wire when its
// master died (GLIDE: "Failed to receive command response") is not called unsent. Node only: a cluster takes seconds to
// start.
import assert from "node:assert/strict";
import { test } from "node:test";
import { acquire, inspect, release } from "../mod.ts";
import { glide } from "../src/adapters/glide.ts";
import { keysOf } from "../src/_protocol.ts";
import { parseInfo, pause, sleep, startCluster, type StartedCluster } from "../harness/topology.ts";
import { glideCluster } from "./_glide.ts";

let n = 0;
const fresh = () => `redirect-${++n}-${Math.random().toString(36).slice(2)}`;

/** The scripts' calls on every master: run (`calls`) and refused before running (`rejected`, a MOVED or an ASK). */
async function scriptStats(c: StartedCluster): Promise<{ calls: number; rejected: number }> {
  let calls = 0, rejected = 0;
  for (const m of c.masters()) {
    const info = parseInfo(String(await c.command(m.port, "INFO", "commandstats")));
    for (const cmd of ["evalsha", "eval"]) {
      const stat = info[`cmdstat_${cmd}`] ?? "";
      calls += Number(/\bcalls=(\d+)/.exec(stat)?.[1] ?? 0);
      rejected += Number(/\brejected_calls=(\d+)/.exec(stat)?.[1] ?? 0);
    }
  }
  return { calls, rejected };
}

test("GLIDE: an acquire GLIDE fails with MOVED/ASK ran nowhere, is sent again, and runs once when the slot settles", async () => {
  const c = await startCluster({ masters: 3, replicasPerMaster: 0 });
  const g = await glideCluster(c.masters().map((m) => m.port));
  try {
    const driver = glide(g);
    // Warm: the scripts are cached on every master (no NOSCRIPT below).
    for (const m of c.masters()) {
      for (;;) {
        const name = fresh();
        if (c.ownerOf(c.slotOf(keysOf("redlease", name).hash)).port !== m.port) continue;
        await release(await acquire(driver, name));
        break;
      }
    }
    const name = fresh();
    const slot = c.slotOf(keysOf("redlease", name).hash);
    const from = c.ownerOf(slot);
    const to = c.masters().find((m) => m.port !== from.port)!;
    await c.command(from.port, "CLUSTER", "SETSLOT", slot, "MIGRATING", to.id);
    const before = await scriptStats(c);
    const pending = acquire(driver, name, { waitMs: 20_000 });
    const outcome = pending.then(() => "granted", (e: unknown) => `rejected: ${String(e)}`);
    await sleep(1_500);
    const during = await scriptStats(c);
    assert.equal(during.calls - before.calls, 0, "the script ran nowhere while redirected");
    // GLIDE tries 4 times per call: more rejections than that means redlease sent the call again.
    assert.ok(during.rejected - before.rejected > 8, `redirected ${during.rejected - before.rejected} times`);
    assert.equal(await Promise.race([outcome, sleep(0).then(() => "pending")]), "pending", "still waiting");
    // The slot is the target's (no keys to move: the script never ran).
    for (const m of c.masters()) await c.command(m.port, "CLUSTER", "SETSLOT", slot, "NODE", to.id);
    assert.equal(await outcome, "granted");
    const lease = await pending;
    const after = await scriptStats(c);
    console.log(
      `GLIDE: redirected ${during.rejected - before.rejected} times; script runs: ${after.calls - before.calls}`,
    );
    assert.equal(after.calls - before.calls, 1, "the acquire's script ran once");
    const seen = await inspect(driver, name);
    assert.equal(seen.held, true);
    assert.equal(seen.fence, lease.fence);
    assert.deepEqual(seen.owners.map((o) => [o.owner, o.holds]), [[lease.owner, 1]], "held once, by the acquire");
    assert.equal(await release(lease), true);
  } finally {
    g.close();
    await c.stop();
  }
});

test("GLIDE: a call on the wire when its master dies is not called unsent (Redis may have run it)", async () => {
  const c = await startCluster({ masters: 3, replicasPerMaster: 0 });
  const g = await glideCluster(c.masters().map((m) => m.port));
  try {
    const driver = glide(g);
    const m = c.masters()[0]!;
    let key = fresh();
    while (c.ownerOf(c.slotOf(key)).port !== m.port) key = fresh();
    await driver.command!(key, ["SET", key, "0"]); // GLIDE's connection to m is up
    pause(m.pid); // m reads nothing more: the next call is written and left unanswered
    const failure = driver.command!(key, ["INCR", key]).then(() => undefined, (e: unknown) => e);
    await sleep(300);
    await c.kill(m.port);
    const e = await failure;
    assert.ok(e instanceof Error, `the call failed: ${String(e)}`);
    console.log(`GLIDE: the call on the wire failed with: ${e.message}`);
    assert.equal(driver.unsent!(e), false, `not unsent: ${e.message}`);
  } finally {
    g.close();
    await c.stop();
  }
});
