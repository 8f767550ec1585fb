import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { acquire, type Driver, inspect, type Lease, LockTimeoutError, RedisTimeoutError, release } from "../mod.ts";
import { nodeRedis } from "../src/adapters/node_redis.ts";
import { type Client, holdsOf, queued, type RedisServer, sleep, startRedis, until } from "./_redis.ts";
import { waitUntil } from "../harness/wait.ts";

let srv: RedisServer;
let a: Client;
let b: Client;
let c: Client;
let n = 0;
const fresh = () => `wait-test-${++n}-${Math.random().toString(36).slice(2)}`;

async function channels(client: Client): Promise<string[]> {
  return await client.sendCommand(["PUBSUB", "CHANNELS", "redlease:*"]) as string[];
}

/** Until Redis has `count` redlease channels with a subscriber (a subscription is dropped a turn after its last use). */
function subscribed(count: number): Promise<void> {
  return waitUntil(`${count} subscriptions`, 10_000, async () => {
    const now = await channels(c);
    return now.length === count || `subscribed to ${now.join(", ") || "nothing"}`;
  }, 10);
}

describe("waiting for a held lease", () => {
  before(async () => {
    srv = await startRedis();
    [a, b, c] = [await srv.client(), await srv.client(), await srv.client()];
  });
  after(async () => {
    await srv.stop();
  });

  test("a waiter is handed the lease by the release within a few ms, not after the TTL", async () => {
    const name = fresh();
    const holder = await acquire(a, name); // watchdog: 30 s TTL
    // (claimMs 10 s: a waiter that missed the message would look again only after 10 s.)
    const waiting = acquire(b, name, { waitMs: 15_000, claimMs: 10_000 });
    await queued(c, name, 1);
    const t0 = performance.now();
    await release(holder);
    const next = await waiting;
    const took = performance.now() - t0;
    assert.ok(took < 2_000, `handoff took ${took} ms`);
    assert.ok(next.fence > holder.fence);
    const info = await inspect(c, name);
    assert.deepEqual(holdsOf(info), [{ owner: next.owner, holds: 1 }]);
    assert.equal(info.waiters, 0);
    assert.ok(info.remainingMs > 29_000, "the handed-over lease has the waiter's own TTL");
    await release(next);
    await subscribed(0); // dropped one event-loop turn after the last waiter or queue-won hold
    assert.deepEqual(await channels(c), [], "no subscription outlives its waiters");
  });

  test("waiters are served first come, first served, one release waking exactly one", async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const order: string[] = [];
    const leases: Promise<Lease>[] = [];
    for (const [label, client] of [["b1", b], ["c1", c], ["b2", b], ["c2", c]] as const) {
      leases.push(acquire(client, name, { waitMs: 10_000 }).then((l) => (order.push(label), l)));
      await queued(c, name, leases.length); // fix the queue order
    }
    assert.equal((await inspect(a, name)).waiters, 4);
    await release(holder);
    for (let i = 0; i < 4; i++) {
      await until(`${i + 1} granted`, () => order.length > i);
      // The others still wait, in the queue: the release woke exactly one.
      assert.equal((await inspect(c, name)).waiters, 3 - i, `${3 - i} still queued after ${i} releases`);
      assert.equal(order.length, i + 1, `exactly ${i + 1} granted after ${i} releases`);
      await release(await leases[i]);
    }
    assert.deepEqual(order, ["b1", "c1", "b2", "c2"]);
  });

  test("an AbortSignal cancels a wait at once with its reason and leaves nothing behind", async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const ctl = new AbortController();
    const waiting = acquire(b, name, { waitMs: Infinity, signal: ctl.signal });
    await queued(c, name, 1);
    assert.equal((await channels(c)).length, 1);
    const reason = new Error("user gave up");
    const t0 = performance.now();
    ctl.abort(reason);
    await assert.rejects(waiting, (e) => e === reason);
    assert.ok(performance.now() - t0 < 1_000); // (waitMs Infinity: only the signal ends it)
    // The entry's removal and the unsubscribe land a moment after the rejection.
    await queued(c, name, 0);
    await subscribed(0);
    assert.equal((await inspect(c, name)).waiters, 0);
    assert.deepEqual(await channels(c), []);
    // The holder's release now frees the lease instead of handing it to the cancelled waiter.
    await release(holder);
    assert.equal((await inspect(c, name)).held, false);
  });

  test("waitMs runs out with LockTimeoutError and leaves the queue", async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const t0 = performance.now();
    const err = await acquire(b, name, { waitMs: 200 }).then(() => null, (e) => e);
    const took = performance.now() - t0;
    assert.ok(err instanceof LockTimeoutError, String(err));
    assert.ok(took >= 190 && took < 1_000, `gave up after ${took} ms`);
    assert.ok(err.remainingMs > 25_000);
    assert.equal((await inspect(c, name)).waiters, 0);
    await release(holder);
    assert.equal((await inspect(c, name)).held, false);
  });

  test("a holder that dies without releasing delays waiters by at most its remaining lease", async () => {
    const name = fresh();
    await acquire(a, name, { leaseMs: 300 }); // never released
    const t0 = performance.now();
    const next = await acquire(b, name, { waitMs: 5_000 });
    const took = performance.now() - t0;
    assert.ok(took >= 250 && took < 1_000, `acquired after ${took} ms`);
    await release(next);
  });

  test("a waiter whose client died is skipped: the release goes to the next live waiter", async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const doomed = await srv.client();
    const dead = acquire(doomed, name, { waitMs: 10_000 }).catch((e) => e);
    await queued(c, name, 1);
    const alive = acquire(b, name, { waitMs: 10_000 });
    await queued(c, name, 2);
    // Kill the waiter's connections from the server side: its queue entry stays, its subscriber is gone.
    const list = String(await c.sendCommand(["CLIENT", "LIST"]));
    await doomed.disconnect();
    for (const line of list.split("\n")) {
      const id = /id=(\d+)/.exec(line)?.[1];
      if (id && /cmd=(ssubscribe|subscribe)/.test(line)) {
        await c.sendCommand(["CLIENT", "KILL", "ID", id]).catch(() => {});
      }
    }
    assert.equal((await inspect(c, name)).waiters, 2, "the dead waiter's entry is still queued");
    await release(holder);
    const next = await alive;
    assert.deepEqual(holdsOf(await inspect(c, name)), [{ owner: next.owner, holds: 1 }]);
    await release(next);
    assert.equal((await inspect(c, name)).waiters, 0);
    void dead;
  });

  test("a client that waited for a name queues at once while it stays subscribed: one command per contended acquire", async () => {
    const name = fresh();
    const count = async () => {
      const info = await c.info("commandstats");
      const calls = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
      return { evalsha: calls("evalsha"), subscribe: calls("subscribe"), unsubscribe: calls("unsubscribe") };
    };
    // Two clients take turns on one name, each releasing and at once asking again. A claim window the busiest
    // machine meets: each grant is taken from the release's message, neither re-checked on a heartbeat nor claimed
    // by a call of its own because the hold ran past half the window.
    // Each holds until the other is queued (read with ZCARD, not a script call), or done: a release whose grant
    // message was read before the reply that queued its waiter costs that waiter a re-check (a race a busy machine
    // makes common, which the count is not about).
    let running = 0;
    const queue = `redlease:{${name}}:q`;
    const loop = async (client: Client, turns: number) => {
      running++;
      for (let i = 0; i < turns; i++) {
        const l = await acquire(client, name, { waitMs: 10_000, claimMs: 5_000 });
        await sleep(2);
        await waitUntil(
          "the other queued",
          10_000,
          async () => running < 2 || await c.zCard(queue) > 0 || "not yet",
          1,
        );
        await release(l);
      }
      running--;
    };
    const first = await acquire(a, name);
    const warm = [loop(a, 1), loop(b, 1)];
    await queued(c, name, 2);
    await release(first);
    await Promise.all(warm);
    const before = await count();
    await Promise.all([loop(a, 20), loop(b, 20)]);
    const after = await count();
    const acquisitions = 40;
    const evalsha = after.evalsha - before.evalsha;
    const subscribes = after.subscribe - before.subscribe;
    console.log(`${evalsha} EVALSHA, ${subscribes} SUBSCRIBE for ${acquisitions} contended acquire+release cycles`);
    assert.ok(evalsha <= acquisitions * 2 + 4, `${evalsha} EVALSHA for ${acquisitions} acquire+release cycles`);
    assert.ok(subscribes <= 2, `${subscribes} SUBSCRIBEs`);
  });

  test("a subscription that never completes (subscriber reconnecting) cannot outlast waitMs or the signal", async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const real = nodeRedis(b);
    const stuck: Driver = { ...real, subscribe: () => new Promise<void>(() => {}) };
    const t0 = performance.now();
    // No answer to its SUBSCRIBE by waitMs + 250 ms: an outage, not contention (issue 31).
    await assert.rejects(acquire(stuck, name, { waitMs: 300 }), RedisTimeoutError);
    const took = performance.now() - t0;
    assert.ok(took >= 530 && took < 1_500, `gave up after ${took} ms`);
    const ctl = new AbortController();
    const reason = new Error("enough");
    setTimeout(() => ctl.abort(reason), 100);
    await assert.rejects(acquire(stuck, name, { waitMs: Infinity, signal: ctl.signal }), (e) => e === reason);
    assert.equal((await inspect(c, name)).waiters, 0, "it never queued");
    await release(holder);
  });

  test("two waits by one owner: the second re-enters and leaves no queue entry behind", async () => {
    const name = fresh();
    const other = await acquire(a, name, { leaseMs: 5_000 });
    const first = acquire(b, name, { owner: "shared-owner", waitMs: 10_000 });
    const second = acquire(b, name, { owner: "shared-owner", waitMs: 10_000 });
    await queued(c, name, 2);
    await release(other);
    const [x, y] = await Promise.all([first, second]);
    const info = await inspect(c, name);
    assert.equal(info.owners.length, 1);
    assert.ok(info.owners[0].owner.endsWith(":shared-owner"), info.owners[0].owner);
    assert.equal(info.owners[0].holds, 2);
    assert.equal(info.waiters, 0, "the re-entering waiter left the queue");
    const late = acquire(a, name, { waitMs: 15_000, claimMs: 10_000 }); // (a missed message: 10 s)
    await queued(c, name, 1);
    await release(x);
    const t0 = performance.now();
    await release(y);
    const next = await late;
    assert.ok(performance.now() - t0 < 2_000, "the next waiter got the lease at once, not after a phantom's lease");
    await release(next);
  });

  test("an abort that lands while a queue check is in flight ends the wait at once", async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const real = nodeRedis(b);
    let calls = 0; // this client's script calls not answered yet
    const slow: Driver = {
      ...real,
      evalScript: (sha, keys, args) => {
        calls++;
        return sleep(200).then(() => real.evalScript(sha, keys, args)).finally(() => calls--);
      },
    };
    const ctl = new AbortController();
    const reason = new Error("stop waiting");
    setTimeout(() => ctl.abort(reason), 300); // during the queueing EVALSHA (200 ms .. 400 ms)
    const t0 = performance.now();
    await assert.rejects(acquire(slow, name, { waitMs: Infinity, signal: ctl.signal }), (e) => e === reason);
    const took = performance.now() - t0;
    assert.ok(took < 1_500, `rejected after ${took} ms`);
    // The abort settles at once; the undo of the in-flight queueing call lands when this (slow) client sends it: wait
    // until every call it made is answered (the queueing call too, which a busy machine may not have sent yet).
    await waitUntil("the queueing call and its undo answered", 10_000, async () => {
      const queued = (await inspect(c, name)).waiters;
      return (calls === 0 && queued === 0) || `${calls} calls in flight, ${queued} queued`;
    }, 10);
    assert.equal((await inspect(c, name)).waiters, 0);
    await release(holder);
  });

  test("many local waiters share one subscription per name and all get the lease in turn", async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const waits = Array.from({ length: 10 }, () => acquire(b, name, { waitMs: 10_000 }));
    await queued(c, name, 10);
    assert.equal((await channels(c)).length, 1);
    await release(holder);
    const fences: number[] = [];
    for (const w of waits) {
      const l = await w;
      fences.push(l.fence);
      await release(l);
    }
    assert.equal(new Set(fences).size, 10);
    await subscribed(0);
    assert.deepEqual(await channels(c), []);
  });
});
