// Order dependence: a script call whose EVALSHA meets NOSCRIPT is re-sent as EVAL, and then runs after the commands
// sent meanwhile on the same connection (a promoted replica, a restart or SCRIPT FLUSH empties the script cache). No
// outcome may depend on two commands running in the order they were sent.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { acquire, extend, inspect, type Lease, LockTimeoutError, release } from "../mod.ts";
import { redlock } from "../src/redlock.ts";
import { type Masters, startMasters } from "./_servers/masters.ts";
import { type Client, type RedisServer, sleep, startRedis } from "./_redis.ts";

let srv: RedisServer;
let waiter: Client;
let holder: Client;
let other: Client;
let admin: Client;
let n = 0;
const fresh = () => `order-test-${++n}`;

/** Empty the script cache, then cache acquire.lua alone (as a server that ran an acquire since a failover has). */
async function onlyAcquireCached(): Promise<void> {
  await admin.sendCommand(["SCRIPT", "FLUSH"]);
  await acquire(other, fresh(), { leaseMs: 1_000, waitMs: 0 });
}

describe("ordering: no outcome depends on two commands running in the order sent", () => {
  before(async () => {
    srv = await startRedis();
    [waiter, holder, other, admin] = [await srv.client(), await srv.client(), await srv.client(), await srv.client()];
  });
  after(async () => {
    await srv.stop();
  });

  for (const owner of [undefined, "worker-1"]) {
    test(`acquire() never returns a grant that the undo of its own late grant frees (undo re-sent after NOSCRIPT; owner ${owner ?? "generated"})`, async () => {
      const name = fresh();
      // The holder's fixed lease ends at ~1000 ms; the queued waiter re-checks then (its heartbeat is its claim window).
      await acquire(holder, name, { leaseMs: 1_000, waitMs: 0 });
      const t0 = performance.now();
      const waiting = acquire(waiter, name, { leaseMs: 250, waitMs: 10_000, owner });
      await sleep(100);
      await onlyAcquireCached();
      // Writes (scripts too) wait from ~700 to ~1300 ms: the waiter's re-check at ~1000 ms is granted at ~1300 ms,
      // later than its 250 ms lease allows, so it undoes that grant (release.lua: NOSCRIPT, re-sent as EVAL) and
      // re-checks.
      await sleep(Math.max(0, 700 - (performance.now() - t0)));
      await admin.sendCommand(["CLIENT", "PAUSE", "600", "WRITE"]);
      const lease: Lease = await waiting;
      const held = await inspect(other, name);
      assert.equal(held.held, true, "the lease acquire() returned is held in Redis");
      assert.deepEqual(held.owners.map((o) => [o.owner, o.holds]), [[lease.owner, 1]], "once, by its owner");
      await assert.rejects(acquire(other, name, { waitMs: 0 }), LockTimeoutError, "nobody else gets it meanwhile");
      assert.equal(lease.signal.aborted, false);
      assert.equal(await release(lease), true, "and it is released by its holder");
      assert.equal((await inspect(other, name)).held, false, "which frees it");
    });
  }
});

describe("ordering: Redlock", () => {
  let masters: Masters;
  let clients: Client[];
  let plain: Client;
  before(async () => {
    masters = await startMasters(3);
    clients = await Promise.all(masters.map((m) => m.client()));
    plain = await masters[0].client();
  });
  after(async () => {
    await masters.stopAll();
  });

  test("a renewal that runs after the release (re-sent after NOSCRIPT) does not put the lease back on that master", async () => {
    const name = fresh();
    const lease = await acquire(redlock(clients), name);
    // Master 0 lost its scripts, then ran acquire.lua and release.lua again (another lease): extend.lua is not cached.
    await plain.sendCommand(["SCRIPT", "FLUSH"]);
    await release(await acquire(plain, fresh()));
    // The renewal's EVALSHA meets NOSCRIPT on master 0 and is re-sent as EVAL, after the release sent meanwhile.
    const renewed = extend(lease);
    assert.equal(await release(lease), true);
    await renewed;
    for (const [i, c] of clients.entries()) {
      assert.equal((await inspect(c, name)).held, false, `master ${i} does not hold the released lease`);
    }
  });
});
