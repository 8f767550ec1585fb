// Order dependence: a script call whose EVALSHA meets NOSCRIPT is re-sent as EVAL, and then runs after the commands
// sent meanwhile on the same connection (a promoted replica, a restart or SCRIPT FLUSH empties the script cache). No
// outcome may depend on two commands running in the order they were sent.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { acquire, type Driver, extend, inspect, type Lease, LockTimeoutError, release } from "../mod.ts";
import { nodeRedis } from "../src/adapters/node_redis.ts";
import { acquire as ACQUIRE, release as RELEASE } from "../src/_scripts.ts";
import { redlock } from "../src/redlock.ts";
import { type Masters, startMasters } from "../harness/masters.ts";
import { type Client, type RedisServer, sleep, startRedis } from "./_redis.ts";
import { pollFor } from "../harness/wait.ts";

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
      // The holder's fixed lease ends at ~2000 ms; the queued waiter re-checks then (its heartbeat is its claim window,
      // 1000 ms, or the holder's time left). The waiter's lease (500 ms) leaves the checks after acquire() returns
      // time to run on a busy machine.
      await acquire(holder, name, { leaseMs: 2_000, waitMs: 0 });
      const t0 = performance.now();
      const waiting = acquire(waiter, name, { leaseMs: 500, waitMs: 10_000, owner });
      await pollFor("the waiter queued", async () => (await inspect(other, name)).waiters === 1 || undefined, 10_000);
      await onlyAcquireCached();
      // Writes (scripts too) wait from ~1400 to ~2600 ms: the waiter's re-check at ~2000 ms is granted at ~2600 ms,
      // later than its 500 ms lease allows, so it undoes that grant (release.lua: NOSCRIPT, re-sent as EVAL) and
      // re-checks.
      await sleep(Math.max(0, 1_400 - (performance.now() - t0)));
      await admin.sendCommand(["CLIENT", "PAUSE", "1200", "WRITE"]);
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

/**
 * A real driver whose first acquire.lua call is sent `delayMs` late, so that its grant (taken at once) comes later
 * than its lease allows; once that reply is in, writes pause for `pauseMs`, so the grant's undo answers late.
 */
function lateFirstGrant(client: Client, delayMs: number, pauseMs: number): Driver {
  const real = nodeRedis(client);
  let first = true;
  return {
    ...real,
    evalScript: async (sha, keys, args, signal) => {
      if (sha !== ACQUIRE.sha || !first) return real.evalScript(sha, keys, args, signal);
      first = false;
      await sleep(delayMs);
      const reply = await real.evalScript(sha, keys, args, signal);
      await admin.sendCommand(["CLIENT", "PAUSE", String(pauseMs), "WRITE"]);
      return reply;
    },
  };
}

describe("ordering: a late grant's undo that answers late", () => {
  before(async () => {
    srv = await startRedis();
    [waiter, other, admin] = [await srv.client(), await srv.client(), await srv.client()];
  });
  after(async () => {
    await srv.stop();
  });

  test("a fixed owner waits for it (else its new attempt would re-enter the grant being undone)", async () => {
    const name = fresh();
    await onlyAcquireCached();
    // The grant (2000 ms lease) is late; its undo meets NOSCRIPT only when writes resume 1500 ms later, and is re-sent.
    const lease = await acquire(lateFirstGrant(waiter, 2_100, 1_500), name, {
      leaseMs: 2_000,
      waitMs: 10_000,
      owner: "worker-1",
    });
    assert.deepEqual((await inspect(other, name)).owners.map((o) => [o.owner, o.holds]), [[lease.owner, 1]]);
    assert.equal(await release(lease), true);
    assert.equal((await inspect(other, name)).held, false, "the one release frees it");
  });

  test("an abort while waiting for it rejects at once", async () => {
    const name = fresh();
    await onlyAcquireCached();
    const abort = new AbortController();
    const acquiring = acquire(lateFirstGrant(waiter, 2_100, 1_500), name, {
      leaseMs: 2_000,
      waitMs: 10_000,
      signal: abort.signal,
    });
    await sleep(2_300); // the late grant is in, its undo is waiting for writes to resume
    const t0 = performance.now();
    abort.abort(new Error("stop"));
    await assert.rejects(acquiring, /stop/);
    const ms = performance.now() - t0;
    // (Not after the undo, which waits for writes to resume 1.5 s later; 700 ms for a loaded machine's turns.)
    assert.ok(ms < 700, `rejected ${Math.round(ms)} ms after the abort`);
    await sleep(1_000); // writes resume at ~3600 ms, and the undo runs
    await pollFor(
      "the undone grant to be gone",
      async () => (await inspect(other, name)).held ? undefined : true,
      3_000,
    );
  });
  test("a fixed owner's late re-entry of its own live hold waits for the undo too (the grant never lapses there)", async () => {
    const name = fresh();
    const real = nodeRedis(waiter);
    let acquires = 0, releases = 0, late = false;
    // The 2nd acquire.lua call (the re-entry) is sent 400 ms late, so its reply comes after its 300 ms lease; the
    // undo of that late grant is then sent 1000 ms late (as an undo re-sent after NOSCRIPT behind a pause).
    const driver: Driver = {
      ...real,
      evalScript: async (sha, keys, args, signal) => {
        if (sha === ACQUIRE.sha && ++acquires === 2) {
          await sleep(400);
          late = true;
        } else if (sha === RELEASE.sha && late && ++releases === 1) await sleep(1_000);
        return real.evalScript(sha, keys, args, signal);
      },
    };
    await release(await acquire(other, fresh())); // the scripts cached
    const first = await acquire(driver, name, { owner: "worker-1" }); // watchdog: its TTL is renewed
    const second = await acquire(driver, name, { owner: "worker-1", leaseMs: 300, waitMs: 5_000 });
    assert.deepEqual((await inspect(other, name)).owners.map((o) => o.holds), [2], "two handles, two holds");
    assert.equal(await release(second), true);
    assert.equal(await release(first), true);
    assert.equal((await inspect(other, name)).held, false, "the final release frees it");
  });
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

  test("a renewal that runs after the release does not put the lease back where the hold had no fence", async () => {
    const name = fresh();
    // Master 0 is held by another client when the group acquires: the hold has no fence there.
    await acquire(plain, name, { leaseMs: 300 });
    const lease = await acquire(redlock(clients), name);
    await sleep(400); // free on master 0 again; the watchdog renews only every 10 s
    await plain.sendCommand(["SCRIPT", "FLUSH"]);
    await release(await acquire(plain, fresh())); // extend.lua not cached on master 0
    const renewed = extend(lease);
    assert.equal(await release(lease), true);
    await renewed;
    for (const [i, c] of clients.entries()) {
      assert.equal((await inspect(c, name)).held, false, `master ${i} does not hold the released lease`);
    }
  });

  test("renewals still put the lease back on a master that restarted empty, after a contender tried there", async () => {
    const name = fresh();
    const contender = await Promise.all(masters.map((m) => m.client()));
    const lease = await acquire(redlock(clients), name, { watchdogMs: 900 });
    await plain.sendCommand(["FLUSHALL"]); // master 0 restarted empty
    // Granted on master 0 alone, then undone there: master 0 keeps the contender's (newer) fence.
    await assert.rejects(acquire(redlock(contender), name, { waitMs: 0, nodeTimeoutMs: 2_000 }), LockTimeoutError);
    // The holder's renewals (every 300 ms): one puts it back.
    await pollFor("a renewal on master 0", async () => (await inspect(plain, name)).held || undefined, 10_000);
    assert.equal((await inspect(plain, name)).held, true, "the holder's renewal put it back on master 0");
    await (await masters[1].client()).sendCommand(["FLUSHALL"]); // then master 1 restarted empty
    await assert.rejects(
      acquire(redlock(contender), name, { waitMs: 0, nodeTimeoutMs: 2_000 }),
      LockTimeoutError,
      "nobody else gets it",
    );
    assert.equal(lease.signal.aborted, false);
    assert.equal(await release(lease), true);
  });

  test("an earlier renewal, re-sent after NOSCRIPT, does not put the lease back after the release", async () => {
    const name = fresh();
    const admin0 = await masters[0].client();
    await acquire(plain, name, { leaseMs: 300 }); // master 0 busy at the group's acquire: no fence there
    const lease = await acquire(redlock(clients), name);
    await sleep(400); // free on master 0
    await plain.sendCommand(["SCRIPT", "FLUSH"]);
    await release(await acquire(plain, fresh())); // extend.lua not cached on master 0
    await admin0.sendCommand(["CLIENT", "PAUSE", "600", "WRITE"]);
    const slow = extend(lease); // bound: the lease's remaining time
    const quick = extend(lease, undefined, { timeoutMs: 50 }); // a later call on master 0, given up on
    assert.equal(await quick, true);
    await sleep(50);
    assert.equal(await release(lease), true);
    await slow.catch(() => {}); // (a majority answered it already, or it ended with the release)
    await sleep(800); // writes resume on master 0
    for (const [i, c] of clients.entries()) {
      assert.equal((await inspect(c, name)).held, false, `master ${i} does not hold the released lease`);
    }
  });

  test("a reentrant hold's renewal still puts the lease back on a master that granted only the re-entry", async () => {
    const name = fresh();
    const plain2 = await masters[2].client();
    await acquire(plain2, name, { leaseMs: 300 }); // master 2 busy at the first acquire
    // (Each master's reply bounded by 1 s, not 50 ms: on a loaded CI run a live master's renewal reply came later.)
    const first = await acquire(redlock(clients), name, { owner: "w", nodeTimeoutMs: 1_000 });
    await sleep(400);
    // Re-entry; master 2 grants it fresh.
    const second = await acquire(redlock(clients), name, { owner: "w", nodeTimeoutMs: 1_000 });
    assert.equal(second.fence, first.fence);
    assert.equal(await release(first), true); // master 2 drops its only count, and keeps the fence
    masters[1].pause(); // one master of three unreachable
    try {
      assert.equal(await extend(second), true, "masters 0 and 2 hold it");
    } finally {
      masters[1].resume();
    }
    assert.equal(await release(second), true);
  });

  test("a master's grant still in flight at the release is not sent again after it (NOSCRIPT)", async () => {
    const name = fresh();
    const admin2 = await masters[2].client();
    await admin2.sendCommand(["SCRIPT", "FLUSH"]);
    await admin2.sendCommand(["SCRIPT", "LOAD", RELEASE.source]); // release.lua cached on master 2, acquire.lua not
    await admin2.sendCommand(["CLIENT", "PAUSE", "150", "WRITE"]);
    const lease = await acquire(redlock(clients), name, { waitMs: 5_000 }); // masters 0 and 1 grant it; 2 is slow
    assert.equal(await release(lease), true);
    await sleep(400); // writes resume on master 2
    for (const [i, c] of clients.entries()) {
      assert.equal((await inspect(c, name)).held, false, `master ${i} does not hold the released lease`);
    }
  });
});
