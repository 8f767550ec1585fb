// acquire() over several names: one lease over all of them, all or nothing, one script call when uncontended on one
// server, never deadlocking against another acquire of overlapping names, each name with its own fence, and a
// signal that aborts when any name is lost. Two clients stand for two processes.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { acquire, extend, forceUnlock, inspect, LeaseLostError, LockTimeoutError, release, withLock } from "../mod.ts";
import { redlock } from "../src/redlock.ts";
import { nodeRedisDriver } from "../src/_node_redis.ts";
import type { Driver } from "../src/driver.ts";
import { acquireAll } from "../src/_scripts.ts";
import { abortedWithin, type Client, noCommands, type RedisServer, sleep, startRedis } from "./_redis.ts";
import { waitUntil } from "../harness/wait.ts";

let srv: RedisServer;
let a: Client;
let b: Client;
let admin: Client;
let n = 0;
const fresh = () => `names-test-${++n}-${Math.random().toString(36).slice(2)}`;

async function evalshaCalls(): Promise<number> {
  const info = await admin.info("commandstats");
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0);
}

describe("several names at once", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
    admin = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("one lease over all names, each with its own fence, in one script call when they are free", async () => {
    const [x, y, z] = [fresh(), fresh(), fresh()];
    await release(await acquire(a, [x, y])); // the script is loaded
    const before = await evalshaCalls();
    const lease = await acquire(a, [z, x, y]);
    assert.equal(await evalshaCalls() - before, 1, "one EVALSHA took all three");
    assert.deepEqual(lease.names, [z, x, y]);
    assert.equal(lease.fences.length, 3);
    assert.equal(lease.fence, lease.fences[0]);
    for (const [i, name] of lease.names.entries()) {
      const info = await inspect(admin, name);
      assert.deepEqual(info.owners.map((o) => o.owner), [lease.owner]);
      assert.equal(info.fence, lease.fences[i]);
    }
    await assert.rejects(acquire(b, x, { waitMs: 0 }), LockTimeoutError);
    assert.equal(await release(lease), true);
    for (const name of [x, y, z]) assert.equal((await inspect(admin, name)).held, false);
    assert.equal(await release(lease), false, "released once");
  });

  test("all or nothing: a busy name fails the acquire and leaves the others untaken", async () => {
    const [x, y] = [fresh(), fresh()];
    const other = await acquire(b, y);
    await assert.rejects(acquire(a, [x, y], { waitMs: 0 }), LockTimeoutError);
    assert.equal((await inspect(admin, x)).held, false, "x was not kept");
    const waited = acquire(a, [x, y], { waitMs: 300 });
    await assert.rejects(waited, LockTimeoutError);
    assert.equal((await inspect(admin, x)).held, false, "x was given back when the wait ran out");
    assert.equal((await inspect(admin, x)).waiters + (await inspect(admin, y)).waiters, 0);
    await release(other);
  });

  test("a wait that runs out on a later name reports the whole call's wait in waitedMs, not that name's", async () => {
    const [x, y] = [fresh(), fresh()].sort(); // x is taken first
    const first = await acquire(b, x, { leaseMs: 10_000 });
    const other = await acquire(b, y, { leaseMs: 10_000 });
    setTimeout(() => void release(first), 600); // x comes free after 600 ms, y never
    const t0 = performance.now();
    const err = await acquire(a, [x, y], { waitMs: 1_200 }).then(() => undefined, (e) => e);
    const ms = performance.now() - t0;
    assert.ok(err instanceof LockTimeoutError, String(err));
    assert.equal(err.lockName, y);
    assert.ok(Number.isInteger(err.waitedMs), String(err.waitedMs));
    assert.ok(err.waitedMs >= 1_200 && err.waitedMs <= Math.ceil(ms), `waitedMs ${err.waitedMs}, waited ${ms} ms`);
    assert.equal((await inspect(admin, x)).held, false, "x was given back");
    await release(other);
  });

  test("a waiting acquire gets every name once the holder releases; fences increase per name", async () => {
    const [x, y] = [fresh(), fresh()];
    const holder = await acquire(b, [y, x]);
    const t0 = performance.now();
    const waiting = acquire(a, [x, y], { waitMs: 5_000 });
    // Queued for the first name it found busy.
    await waitUntil("a waiter", 10_000, async () => {
      const now = (await inspect(admin, x)).waiters + (await inspect(admin, y)).waiters;
      return now === 1 || `${now} waiters`;
    }, 10);
    await release(holder);
    const got = await waiting;
    assert.ok(performance.now() - t0 < 2_000);
    assert.ok(got.fences[0] > holder.fences[1] && got.fences[1] > holder.fences[0]);
    await release(got);
  });

  test("acquires of overlapping names in opposite orders never deadlock, and never overlap", async () => {
    const [x, y, z] = [fresh(), fresh(), fresh()];
    let inside = 0;
    let overlaps = 0;
    const worker = async (client: Client, names: string[]) => {
      for (let i = 0; i < 15; i++) {
        await withLock(client, names, async () => {
          if (++inside > 1) overlaps++;
          await sleep(2);
          inside--;
        }, { waitMs: 20_000 });
      }
    };
    await Promise.all([worker(a, [x, y, z]), worker(b, [z, y, x]), worker(a, [y, x]), worker(b, [z, x])]);
    assert.equal(overlaps, 0);
  });

  test("the loss of any name aborts the lease's signal; release then reports it", async () => {
    const [x, y] = [fresh(), fresh()];
    const lease = await acquire(a, [x, y], { watchdogMs: 300 });
    assert.equal(await extend(lease, 5_000), true, "extend() extends every name");
    assert.equal(await forceUnlock(admin, y), true);
    assert.equal(await extend(lease), false);
    const reason = await abortedWithin(lease.signal, 2_000);
    assert.ok(reason instanceof LeaseLostError, String(reason));
    assert.equal(reason.lockName, y);
    assert.equal(await release(lease), false, "not every name was still held");
    assert.equal((await inspect(admin, x)).held, false, "the other name is released");
  });

  test("re-entry with the lease as owner re-enters every name; a token is refused", async () => {
    const [x, y] = [fresh(), fresh()];
    const lease = await acquire(a, [x, y]);
    const again = await acquire(a, [y, x], { owner: lease, waitMs: 0 });
    assert.deepEqual(again.fences, [lease.fences[1], lease.fences[0]]);
    assert.deepEqual((await inspect(admin, x)).owners.map((o) => o.holds), [2]);
    assert.throws(() => lease.token, TypeError);
    await release(again);
    await release(lease);
    assert.equal((await inspect(admin, y)).held, false);
  });

  test("bad names are rejected before any Redis command, with Redlock too", async () => {
    await assert.rejects(acquire(noCommands(), []), RangeError);
    await assert.rejects(acquire(noCommands(), ["a", "a"]), RangeError);
    await assert.rejects(acquire(noCommands(), ["a", ""]), RangeError);
    await assert.rejects(acquire(noCommands(), ["a", 3 as unknown as string]), TypeError);
    await assert.rejects(acquire(noCommands(), Array.from({ length: 65 }, (_, i) => `n${i}`)), RangeError);
    await assert.rejects(acquire(redlock([noCommands(), noCommands(), noCommands()]), ["a", "a"]), RangeError);
    await assert.rejects(withLock(noCommands(), [], () => 1), RangeError);
  });
});

/**
 * A driver over a node-redis client whose script calls can be held back: `hang` makes every later call never
 * answer; `delayAll` delays the reply of the all-at-once script by that many ms.
 */
function gated(client: Client) {
  const base = nodeRedisDriver(client);
  const gate = { hang: false, delayAll: 0 };
  const driver: Driver = {
    evalScript: (sha, keys, args, signal) => {
      if (gate.hang) return new Promise(() => {});
      const r = base.evalScript(sha, keys, args, signal);
      return sha === acquireAll.sha && gate.delayAll > 0
        ? r.then((v) => new Promise((res) => setTimeout(() => res(v), gate.delayAll)))
        : r;
    },
    evalSource: base.evalSource && ((src, keys, args, signal) => base.evalSource!(src, keys, args, signal)),
    loadScript: (src, key, signal) => base.loadScript(src, key, signal),
    subscribe: base.subscribe && ((c, l) => base.subscribe!(c, l)),
    unsubscribe: base.unsubscribe && ((c, l) => base.unsubscribe!(c, l)),
  };
  return { driver, gate };
}

// Found by an adversarial review: each failed before its fix.
describe("several names at once: edge cases", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
    admin = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("a name lost while a later one is awaited is taken again: the lease never comes back with a name gone", async () => {
    const [x, y] = [`a-${fresh()}`, `b-${fresh()}`]; // x sorts first
    const other = await acquire(b, y, { leaseMs: 600 });
    const lease = await acquire(a, [x, y], { leaseMs: 300, waitMs: 5_000 }); // x's 300 ms lapse while y is awaited
    assert.equal(lease.signal.aborted, false);
    assert.ok(lease.remainingMs > 0);
    assert.deepEqual((await inspect(admin, x)).owners.map((o) => o.owner), [lease.owner], "x is held again");
    await assert.rejects(acquire(b, x, { waitMs: 0 }), LockTimeoutError);
    await release(lease);
    await release(other).catch(() => {});
  });

  test("a failed acquire does not wait for the give-back beyond its bounds", async () => {
    const { driver, gate } = gated(await srv.client());
    const [x, y] = [`a-${fresh()}`, `b-${fresh()}`];
    const other = await acquire(b, y);
    const ctl = new AbortController();
    const p = acquire(driver, [x, y], { watchdogMs: 10_000, waitMs: 60_000, signal: ctl.signal });
    await waitUntil("x taken, y awaited", 10_000, async () => {
      const [ix, iy] = [await inspect(admin, x), await inspect(admin, y)];
      return (ix.held && iy.waiters === 1) || `x held: ${ix.held}, ${iy.waiters} waiting for y`;
    }, 10);
    gate.hang = true; // Redis stops answering this client
    const t0 = performance.now();
    ctl.abort(new Error("stop"));
    await assert.rejects(p, /stop/);
    // (Redis never answers, waitMs is 60 s: only the abort ends it. 1 s for a loaded machine's turns.)
    assert.ok(performance.now() - t0 < 1_000, `rejected ${performance.now() - t0} ms after the abort`);
    await release(other);
  });

  test("an all-at-once reply that comes after the lease ran out is undone, not re-entered", async () => {
    const { driver, gate } = gated(await srv.client());
    const [x, y] = [fresh(), fresh()];
    await release(await acquire(driver, [fresh(), fresh()])); // the script is cached
    // Past the local deadline (3000 ms less the drift allowance, 32 ms) but before Redis's TTL ends.
    gate.delayAll = 2_985;
    const lease = await acquire(driver, [x, y], { leaseMs: 3_000, waitMs: 10_000 });
    gate.delayAll = 0;
    assert.deepEqual(
      (await inspect(admin, x)).owners.map((o) => o.holds),
      [1],
      "one hold, not a re-entry of a stale one",
    );
    assert.equal(await release(lease), true);
    assert.equal((await inspect(admin, x)).held, false);
    assert.equal((await inspect(admin, y)).held, false);
  });

  test("a lease.owner passed back re-enters whichever name comes first", async () => {
    const [x, y] = [fresh(), fresh()];
    const single = await acquire(a, y); // its owner is an id, not a string scoped to the client
    for (const names of [[x, y], [y, x]]) {
      const both = await acquire(a, names, { owner: single.owner, waitMs: 500 });
      assert.equal(both.owner, single.owner);
      await release(both);
    }
    await release(single);
  });
});
