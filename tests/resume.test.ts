// Owner strings scoped to one client, lease.token and resume(): sharing a hold across processes goes through a token.
// Two clients stand for two processes here (each client has its own id, which scopes owner strings); the CLI tests
// run the same across real processes (a nested `redlease run`).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { acquire, extend, forceUnlock, inspect, LeaseLostError, LockTimeoutError, release, resume } from "../mod.ts";
import { redlock } from "../src/redlock.ts";
import { abortedWithin, type Client, holdsOf, noCommands, type RedisServer, sleep, startRedis } from "./_redis.ts";

let srv: RedisServer;
let a: Client;
let b: Client;
let n = 0;
const fresh = () => `resume-test-${++n}-${Math.random().toString(36).slice(2)}`;

// A client that sends nothing (any command fails the call): a TypeError proves the input was rejected before any
// command.
const idle = noCommands();

describe("owner scope, lease.token and resume()", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("the same owner string on two clients is two owners: they exclude each other", async () => {
    const name = fresh();
    const first = await acquire(a, name, { owner: "worker-1", leaseMs: 5_000 });
    // Before owners were scoped, this re-entered: both "inside together" with one fence.
    await assert.rejects(acquire(b, name, { owner: "worker-1", waitMs: 0 }), LockTimeoutError);
    assert.deepEqual(holdsOf(await inspect(b, name)), [{ owner: first.owner, holds: 1 }]);
    // On its own client the string re-enters, as does lease.owner passed back.
    const again = await acquire(a, name, { owner: "worker-1", waitMs: 0 });
    const third = await acquire(a, name, { owner: first.owner, waitMs: 0 });
    assert.equal(again.fence, first.fence);
    assert.equal(third.owner, first.owner);
    assert.deepEqual(holdsOf(await inspect(b, name)), [{ owner: first.owner, holds: 3 }]);
    for (const l of [third, again, first]) assert.equal(await release(l), true);
    assert.equal((await inspect(b, name)).held, false);
  });

  test("a dead holder's owner string does not let another process in by re-entry: it waits for the TTL", async () => {
    const name = fresh();
    const c = await srv.client();
    const dead = await acquire(c, name, { owner: "svc", watchdogMs: 600 });
    await c.disconnect(); // dies holding it: no release, no more renewals
    const t0 = performance.now();
    const next = await acquire(b, name, { owner: "svc", waitMs: 5_000 });
    assert.ok(performance.now() - t0 >= 300, "it waited for the dead holder's TTL instead of re-entering");
    assert.ok(next.fence > dead.fence, "a new grant, with a new fence");
    assert.notEqual(next.owner, dead.owner);
    assert.equal(await release(next), true);
  });

  test("resume() takes a hold over from its token: same owner and fence, renewed here, released here", async () => {
    const name = fresh();
    // TTLs of 1 s: short enough to see renewals, long enough for a stalled test process (see tests/_contract.ts).
    const lease = await acquire(a, name, { watchdogMs: 1_000 });
    assert.match(lease.token, /^rl1\.[A-Za-z0-9_-]+$/);
    const held = await resume(b, lease.token, { watchdogMs: 1_000 });
    assert.equal(held.name, name);
    assert.equal(held.owner, lease.owner);
    assert.equal(held.fence, lease.fence);
    assert.equal(held.token, lease.token);
    assert.ok(held.expiresAt > performance.now());
    assert.deepEqual(
      holdsOf(await inspect(a, name)),
      [{ owner: lease.owner, holds: 1 }],
      "the same hold, not a second",
    );
    // Another owner still cannot get in, and the hold outlives its TTL while both renew it.
    await sleep(1_300);
    await assert.rejects(acquire(b, name, { waitMs: 0 }), LockTimeoutError);
    assert.equal(await release(held), true);
    assert.equal((await inspect(a, name)).held, false, "released by the process that took it over");
    // The acquiring process left it alone; its own handle finds the hold gone at its next renewal.
    const reason = await abortedWithin(lease.signal, 2_000);
    assert.ok(reason instanceof LeaseLostError && reason.why === "not-held", String(reason));
  });

  test("an HTTP-handler-style hand-over: the acquiring client goes away, the worker keeps the lease alive", async () => {
    const name = fresh();
    const handler = await srv.client();
    const lease = await acquire(handler, name, { leaseMs: 1_000 }); // a short fixed lease: the hand-over window
    const token = lease.token;
    await handler.disconnect(); // the handler returns; nothing of it renews the lease
    const job = await resume(b, token, { watchdogMs: 1_000 });
    await sleep(1_500); // past the handler's fixed lease: the worker's renewals keep it
    assert.deepEqual(holdsOf(await inspect(a, name)), [{ owner: lease.owner, holds: 1 }]);
    assert.equal(job.signal.aborted, false);
    assert.equal(await extend(job), true);
    assert.equal(await release(job), true);
    assert.equal((await inspect(a, name)).held, false);
  });

  test("resume() of a hold that is gone rejects with LeaseLostError 'not-held' and changes nothing", async () => {
    const name = fresh();
    const lease = await acquire(a, name);
    const token = lease.token;
    await release(lease);
    await assert.rejects(resume(b, token), (e) => e instanceof LeaseLostError && e.why === "not-held");
    const next = await acquire(a, name, { waitMs: 0 });
    // A token names one grant: the same owner's next grant (a new fence) is not it.
    await assert.rejects(resume(b, token), (e) => e instanceof LeaseLostError && e.why === "not-held");
    assert.deepEqual(holdsOf(await inspect(a, name)), [{ owner: next.owner, holds: 1 }]);
    await release(next);
  });

  test("resume() within the client that holds it re-enters: one more hold, each handle released once", async () => {
    const name = fresh();
    const lease = await acquire(a, name);
    const again = await resume(a, lease.token);
    assert.equal(again.fence, lease.fence);
    assert.deepEqual(holdsOf(await inspect(b, name)), [{ owner: lease.owner, holds: 2 }]);
    assert.equal(await release(again), true);
    assert.equal(lease.signal.aborted, false);
    assert.equal((await inspect(b, name)).held, true);
    assert.equal(await release(lease), true);
    assert.equal((await inspect(b, name)).held, false);
  });

  test("a token keeps the prefix and an odd name whole", async () => {
    const name = `${fresh()}:{ü}%7D`;
    const lease = await acquire(a, name, { prefix: "jobs", leaseMs: 5_000 });
    const held = await resume(b, lease.token, { leaseMs: 5_000 });
    assert.equal(held.name, name);
    assert.deepEqual(holdsOf(await inspect(b, name, { prefix: "jobs" })), [{ owner: lease.owner, holds: 1 }]);
    assert.equal(await release(held), true);
    assert.equal((await inspect(b, name, { prefix: "jobs" })).held, false);
  });

  test("bad tokens and options fail with TypeError or RangeError before any Redis command", async () => {
    const lease = await acquire(a, fresh(), { leaseMs: 5_000 });
    const good = lease.token;
    const body = good.slice(4);
    const enc = (v: unknown) =>
      "rl1." + btoa(JSON.stringify(v)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
    const bad: unknown[] = [
      undefined,
      42,
      "",
      "rl1.",
      body,
      "rl2." + body,
      "rl1.%%%",
      enc(["n", "redlease:{n}", "o"]), // too short
      enc(["n", "redlease:{m}", "o", "7"]), // the key is not the name's
      enc(["n", ":{n}", "o", "7"]), // no prefix
      enc(["n", "redlease:{n}", "o", "07"]), // not a fence
      enc(["n", "redlease:{n}", "", "7"]), // empty owner
      enc({ n: "n" }),
    ];
    for (const t of bad) {
      await assert.rejects(
        resume(idle, t as string),
        (e: Error) => e instanceof TypeError && /Cannot resume lease as 'token' must be a lease\.token/.test(e.message),
        String(t),
      );
    }
    await assert.rejects(resume(idle, good, { leaseMs: 0 }), RangeError);
    await assert.rejects(resume(idle, good, { leaseMs: 10, watchdogMs: 300 }), TypeError);
    await assert.rejects(resume(idle, good, { timeoutMs: -1 }), RangeError);
    await assert.rejects(resume({} as Client, good), TypeError);
    const ac = new AbortController();
    ac.abort(new Error("stop"));
    await assert.rejects(resume(idle, good, { signal: ac.signal }), /stop/);
    assert.equal(idle.sent, 0);
    await release(lease);
  });

  test("resume() within the holding client of a name with ':{' re-enters that lease's own key", async () => {
    const name = `${fresh()}:{x`;
    const lease = await acquire(a, name, { leaseMs: 5_000 });
    const again = await resume(a, lease.token, { leaseMs: 5_000 });
    assert.equal(again.fence, lease.fence);
    assert.deepEqual(holdsOf(await inspect(b, name)), [{ owner: lease.owner, holds: 2 }]);
    assert.equal(await release(again), true);
    assert.equal(await release(lease), true);
    assert.equal((await inspect(b, name)).held, false);
  });

  test("resume() within the holding client of a hold Redis dropped rejects 'not-held' and takes nothing", async () => {
    const name = fresh();
    const lease = await acquire(a, name, { leaseMs: 10_000 });
    await forceUnlock(b, name); // the holding client has not heard of it yet
    await assert.rejects(
      resume(a, lease.token, { leaseMs: 10_000 }),
      (e) => e instanceof LeaseLostError && e.why === "not-held",
    );
    assert.equal((await inspect(b, name)).held, false, "no new grant left behind");
    const other = await acquire(b, name, { leaseMs: 10_000 });
    await assert.rejects(resume(a, lease.token), (e) => e instanceof LeaseLostError && e.why === "not-held");
    assert.deepEqual(holdsOf(await inspect(b, name)), [{ owner: other.owner, holds: 1 }]);
    await release(other);
  });

  test("lease.owner passed back re-enters on the client holding it, resumed or not, and nowhere else", async () => {
    const name = fresh();
    const lease = await acquire(a, name, { owner: "job", leaseMs: 5_000 });
    const held = await resume(b, lease.token, { leaseMs: 5_000 });
    const again = await acquire(b, name, { owner: held.owner, waitMs: 0 }); // b holds it (resumed)
    assert.equal(again.fence, lease.fence);
    assert.deepEqual(holdsOf(await inspect(a, name)), [{ owner: lease.owner, holds: 2 }]);
    await release(again);
    await release(held);
    // A default owner's id is no exception: on a client that does not hold it, it is another owner.
    const mine = await acquire(a, name, { leaseMs: 5_000 });
    await assert.rejects(acquire(b, name, { owner: mine.owner, waitMs: 0 }), LockTimeoutError);
    await release(mine);
  });

  test("the same owner string on one client and on a Redlock group including it is two owners", async () => {
    const others = await Promise.all([startRedis(), startRedis()]);
    try {
      const name = fresh();
      const single = await acquire(a, name, { owner: "w", leaseMs: 5_000 });
      const group = redlock([a, await others[0].client(), await others[1].client()]);
      // The group gets its majority from the two other masters; on `a` it is busy, not a re-entry of `single`.
      const together = await acquire(group, name, { owner: "w", waitMs: 2_000, leaseMs: 5_000 });
      assert.notEqual(together.owner, single.owner);
      assert.deepEqual(holdsOf(await inspect(b, name)), [{ owner: single.owner, holds: 1 }]);
      await release(together);
      assert.deepEqual(holdsOf(await inspect(b, name)), [{ owner: single.owner, holds: 1 }]);
      await release(single);
    } finally {
      await Promise.all(others.map((o) => o.stop()));
    }
  });

  test("a Redlock lease has no token", async () => {
    const name = fresh();
    const others = await Promise.all([startRedis(), startRedis()]);
    const lease = await acquire(redlock([a, await others[0].client(), await others[1].client()]), name, {
      leaseMs: 5_000,
    });
    assert.throws(() => lease.token, (e: Error) => e instanceof TypeError && /Redlock/.test(e.message));
    await release(lease);
    await Promise.all(others.map((o) => o.stop()));
  });
});
