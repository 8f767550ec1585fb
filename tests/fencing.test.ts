import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { acquire, forceUnlock, inspect, release } from "../mod.ts";
import { type Client, type RedisServer, sleep, startRedis } from "./_redis.ts";
import { waitUntil } from "../harness/wait.ts";

let srv: RedisServer;
let a: Client;
let b: Client;
let n = 0;
const fresh = () => `fence-test-${++n}-${Math.random().toString(36).slice(2)}`;

describe("fencing tokens", () => {
  before(async () => {
    srv = await startRedis();
    [a, b] = [await srv.client(), await srv.client()];
  });
  after(async () => {
    await srv.stop();
  });

  test("fences strictly increase over 1,000 acquire/release cycles by alternating clients", async () => {
    const name = fresh();
    let last = 0;
    for (let i = 0; i < 1_000; i++) {
      // (Free each time: a waitMs only so that a reply slowed by a busy machine is not a LockTimeoutError.)
      const lease = await acquire(i % 2 ? a : b, name, { waitMs: 5_000 });
      assert.ok(lease.fence > last, `cycle ${i}: ${lease.fence} <= ${last}`);
      assert.ok(Number.isSafeInteger(lease.fence));
      last = lease.fence;
      await release(lease);
    }
  });

  test("fences strictly increase across expiry, even once Redis has forgotten the name", async () => {
    const name = fresh();
    const first = await acquire(a, name, { leaseMs: 50 });
    await sleep(120);
    assert.equal(await a.exists(`redlease:{${name}}`), 0, "the expired lease left no key");
    const second = await acquire(b, name, { waitMs: 0 });
    assert.ok(second.fence > first.fence);
    await release(second);
  });

  test("fences strictly increase across forceUnlock()", async () => {
    const name = fresh();
    const first = await acquire(a, name);
    await forceUnlock(b, name);
    const second = await acquire(b, name, { waitMs: 0 });
    assert.ok(second.fence > first.fence);
    assert.equal((await inspect(a, name)).fence, second.fence);
    await release(second);
    await release(first);
  });

  test("fences strictly increase across waiting handoffs", async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const granted: number[] = [];
    const waits = [b, a, b].map((client) =>
      acquire(client, name).then(async (l) => {
        granted.push(l.fence);
        await release(l);
      })
    );
    await sleep(50);
    await release(holder);
    await Promise.all(waits);
    assert.equal(granted.length, 3);
    let last = holder.fence;
    for (const f of granted) {
      assert.ok(f > last);
      last = f;
    }
  });

  test("reentrant acquires keep the first hold's fence", async () => {
    const name = fresh();
    const first = await acquire(a, name);
    const again = await acquire(a, name, { owner: first });
    assert.equal(again.fence, first.fence);
    await release(again);
    await release(first);
  });

  test("names used once leave no permanent keys behind", async () => {
    const names = Array.from({ length: 20 }, fresh);
    for (const name of names) await release(await acquire(a, name));
    const held = await acquire(a, fresh());
    const waiter = acquire(b, held.name, { waitMs: 5_000 });
    // Its queue entry is among the keys checked (after a fixed 30 ms it could still be missing).
    await waitUntil(
      "the waiter is queued",
      10_000,
      async () => (await inspect(a, held.name)).waiters === 1 || "not yet",
    );
    const keys = await a.keys("redlease:*");
    assert.ok(keys.length >= 21);
    for (const key of keys) assert.ok((await a.pTTL(key)) > 0, `${key} has a TTL`);
    await release(held);
    await release(await waiter);
  });
});
