// Weighted permits (`weight` k of `permits` n): what the contract test of every adapter does not show — strict FIFO
// against a stream of light requests, a release that wakes exactly the waiters that now fit (counted in Redis's own
// command statistics), an expired hold that frees exactly its weight, and the argument checks of the entry points
// that are not acquire() (withLock, campaign, Redlock).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { acquire, campaign, inspect, type Lease, LeaseKindError, release, resume, withLock } from "../mod.ts";
import { redlock } from "../src/redlock.ts";
import { type Client, noCommands, queued, type RedisServer, runtimeName, sleep, startRedis } from "./_redis.ts";

/** The PUBLISH commands Redis has run (those from scripts included): one per waiter told of a grant. */
async function publishes(admin: Client): Promise<number> {
  const stats = String(await admin.sendCommand(["INFO", "commandstats"]));
  return Number(/cmdstat_publish:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

describe(`weighted permits (${runtimeName()})`, () => {
  let srv: RedisServer;
  let admin: Client;
  let seq = 0;
  const fresh = () => `weights-${Date.now()}-${seq++}`;

  before(async () => {
    srv = await startRedis();
    admin = await srv.client();
  });
  after(async () => {
    await admin?.quit();
    await srv?.stop();
  });

  test("a weight-3 waiter is not starved by a stream of weight-1 requests: none asked after it is served first", async () => {
    const name = fresh();
    const n = 3;
    let stop = false;
    // Light requests, each stamped with when it was asked and when it was granted.
    const light: Array<{ asked: number; granted: number }> = [];
    const loop = async (client: Client) => {
      while (!stop) {
        const request = { asked: performance.now(), granted: Infinity };
        light.push(request);
        const lease = await acquire(client, name, { permits: n, waitMs: 10_000 });
        request.granted = performance.now();
        await sleep(40);
        await release(lease);
      }
    };
    const clients = await Promise.all([srv.client(), srv.client(), srv.client()]);
    const loops = clients.map(loop);
    const q = `redlease:{${name}}:q`;
    const isQueued = async () =>
      (await admin.sendCommand(["ZRANGE", q, "0", "-1"]) as string[]).some((e) => e.includes(`|p${n}w${n}|`));
    let lease: Lease | undefined;
    let checked = 0;
    try {
      // Every permit is busy with light holds, again and again. (A heavy request that finds them all free at once, or
      // is granted before it is seen queued, tests nothing: asked again, up to 5 times.)
      // (On a loaded machine the stream takes a while to get going: up to 5 s.)
      for (let waited = 0; light.length <= 6 && waited < 5_000; waited += 50) await sleep(50);
      assert.ok(light.length > 6, `the light stream runs (${light.length} requests)`);
      for (let round = 0; round < 5 && checked === 0; round++) {
        let settled = false;
        const heavy = acquire(admin, name, { permits: n, weight: n, waitMs: 5_000 }).finally(() => (settled = true));
        while (!settled && !(await isQueued())) await sleep(1);
        // Once it is queued, every light request asked after that waits behind it.
        const queuedAt = performance.now();
        lease = await heavy;
        const grantedAt = performance.now();
        if (light.some((l) => l.asked > queuedAt && l.asked < grantedAt)) {
          checked++;
          assert.ok(grantedAt - queuedAt < 2_000, `served within ${Math.round(grantedAt - queuedAt)} ms`);
          const info = await inspect(admin, name);
          assert.equal(info.permitsTaken, n, "it holds all 3, and nobody else any");
          assert.equal(info.owners.length, 1);
          const jumped = light.filter((l) => l.asked > queuedAt && l.granted < grantedAt);
          assert.deepEqual(jumped, [], "no light request asked after the heavy one was granted before it");
        }
        await release(lease);
        lease = undefined;
        await sleep(100);
      }
      assert.ok(checked > 0, "a heavy request waited behind light ones");
    } finally {
      if (lease) await release(lease);
      stop = true;
      await Promise.all(loops);
      await Promise.all(clients.map((c) => c.quit()));
    }
  });

  test("a release of k wakes exactly the waiters at the head that now fit, in order, and no other", async () => {
    const name = fresh();
    const opts = (weight: number) => ({ permits: 4, weight, waitMs: 10_000 });
    const a = await acquire(admin, name, opts(2));
    const b = await acquire(admin, name, opts(2));
    const waiter = await srv.client();
    const done: string[] = [];
    // (The pending acquire in a box: awaiting the promise itself would wait for the lease.)
    const wait = async (label: string, weight: number, count: number) => {
      const box = { p: acquire(waiter, name, opts(weight)).then((lease) => (done.push(label), lease)) };
      await queued(admin, name, count);
      return box;
    };
    // Queued in this order: 1, 1, 3, 1.
    const { p: w1 } = await wait("w1", 1, 1);
    const { p: w2 } = await wait("w2", 1, 2);
    const { p: w3 } = await wait("w3", 3, 3);
    const { p: w4 } = await wait("w4", 1, 4);
    try {
      // 2 freed: w1 and w2 fit; w3 (3) does not, and w4 stays behind it.
      let told = await publishes(admin);
      await release(a);
      const [l1, l2] = await Promise.all([w1, w2]);
      assert.equal((await publishes(admin)) - told, 2, "two waiters told, no more");
      await sleep(100);
      // (Both are granted by the one release: which of them resolves first here is up to their messages.)
      assert.deepEqual([...done].sort(), ["w1", "w2"]);
      assert.equal((await inspect(admin, name)).waiters, 2);
      // 1 freed (3 of 4 taken then 2): still no room for w3, and w4 does not pass it.
      told = await publishes(admin);
      await release(l1);
      await sleep(100);
      assert.equal((await publishes(admin)) - told, 0, "nobody told");
      assert.equal(done.length, 2);
      // 2 more freed (1 of 4 taken): w3 fits, then 4 of 4 are taken and w4 waits.
      told = await publishes(admin);
      await release(b);
      const l3 = await w3;
      assert.equal((await publishes(admin)) - told, 1);
      await sleep(100);
      assert.deepEqual(done.slice(2), ["w3"]);
      const info = await inspect(admin, name);
      assert.equal(info.permitsTaken, 4);
      assert.deepEqual(info.owners.map((o) => o.weight).sort(), [1, 3]);
      await release(l3);
      const l4 = await w4;
      assert.ok(l1.fence < l2.fence && l2.fence < l3.fence && l3.fence < l4.fence, "granted in queue order");
      await release(l2);
      await release(l4);
      assert.equal((await inspect(admin, name)).held, false);
    } finally {
      await waiter.quit();
    }
  });

  test("a heavy waiter whose process died while queued does not block the waiters behind it that fit", async () => {
    const name = fresh();
    // 2 of 4 taken by a long hold (renewed by its watchdog); a waiter of weight 3 queued, then its process gone.
    const long = await acquire(admin, name, { permits: 4, weight: 2 });
    const dead = await srv.client();
    const heavy = acquire(dead, name, { permits: 4, weight: 3, waitMs: 30_000 }).then(
      (lease) => lease,
      (e: Error) => e,
    );
    await queued(admin, name, 1);
    await dead.disconnect();
    assert.ok((await heavy) instanceof Error, "its acquire ends with its connection");
    assert.equal((await inspect(admin, name)).waiters, 1, "its entry stays queued: nobody could remove it");
    try {
      // A light request fits in the 2 free permits: the dead entry ahead of it must not hold it back until the
      // long hold ends (it would have waited for as long as that holder runs).
      const t0 = performance.now();
      const light = await acquire(admin, name, { permits: 4, waitMs: 3_000 });
      assert.ok(performance.now() - t0 < 2_000, `granted in ${Math.round(performance.now() - t0)} ms`);
      const info = await inspect(admin, name);
      assert.equal(info.permitsTaken, 3);
      assert.equal(info.waiters, 0, "the dead entry is gone");
      await release(light);
    } finally {
      await release(long);
    }
  });

  test("a weighted hold that expires without a release frees exactly its weight", async () => {
    const name = fresh();
    const one = await acquire(admin, name, { permits: 5, waitMs: 0 });
    const three = await acquire(admin, name, { permits: 5, weight: 3, leaseMs: 150, waitMs: 0 });
    assert.equal((await inspect(admin, name)).permitsTaken, 4);
    await assert.rejects(acquire(admin, name, { permits: 5, weight: 2, waitMs: 0 }));
    await sleep(250);
    assert.equal(three.signal.aborted, true, "its holder is told");
    assert.equal((await inspect(admin, name)).permitsTaken, 1);
    // 4 free now, not 3 and not 5.
    await assert.rejects(acquire(admin, name, { permits: 5, weight: 5, waitMs: 0 }));
    const four = await acquire(admin, name, { permits: 5, weight: 4, waitMs: 0 });
    assert.ok(four.fence > three.fence);
    await release(four);
    await release(one);
    // Nothing is left of the weights: the holder records are gone with the holds.
    assert.equal(await admin.exists(`redlease:{${name}}:d`), 0);
  });

  test("every caller must agree on the number of permits, whatever the weight", async () => {
    const name = fresh();
    const held = await acquire(admin, name, { permits: 4, weight: 2 });
    await assert.rejects(
      acquire(admin, name, { permits: 5, weight: 2, waitMs: 0 }),
      (e) => e instanceof LeaseKindError && e.why === "mismatch" && e.found === 4,
    );
    await release(held);
  });

  test("withLock takes a weight; campaign and Redlock refuse it with TypeError before any command", async () => {
    const name = fresh();
    const inside = await withLock(admin, name, () => inspect(admin, name), { permits: 3, weight: 2 });
    assert.equal(inside.permitsTaken, 2);
    assert.equal(inside.owners[0].weight, 2);
    const idle = noCommands();
    await assert.rejects(
      Promise.resolve().then(() => withLock(idle, name, () => 1, { permits: 3, weight: 4 })),
      RangeError,
    );
    await assert.rejects(
      Promise.resolve().then(() => campaign(idle, name, { weight: 2 } as never)),
      (e: Error) => e instanceof TypeError && /'weight'/.test(e.message),
    );
    const group = redlock([noCommands(), idle, noCommands()]);
    await assert.rejects(
      Promise.resolve().then(() => acquire(group, name, { permits: 3, weight: 2 })),
      (e: Error) => e instanceof TypeError && /Redlock/.test(e.message),
    );
    assert.equal(idle.sent, 0);
  });

  test("a lease token of a weighted hold resumes it with its weight", async () => {
    const name = fresh();
    const held: Lease = await acquire(admin, name, { permits: 3, weight: 2 });
    const other = await srv.client();
    try {
      const taken = await resume(other, held.token);
      assert.equal(taken.fence, held.fence);
      await release(taken);
      const info = await inspect(admin, name);
      assert.equal(info.held, false, "the release of the resumed hold freed both permits");
    } finally {
      await other.quit();
    }
  });
});
