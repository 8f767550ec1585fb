import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  acquire,
  type Driver,
  extend,
  forceUnlock,
  inspect,
  LeaseLostError,
  LockTimeoutError,
  release,
  resume,
  withLock,
} from "../mod.ts";
import { nodeRedis } from "../src/adapters/node_redis.ts";
import { type Client, holdsOf, type RedisServer, sleep, startRedis } from "./_redis.ts";
import { waitUntil } from "../harness/wait.ts";

let srv: RedisServer;
let a: Client;
let b: Client;
let n = 0;
const fresh = () => `lease-test-${++n}-${Math.random().toString(36).slice(2)}`;

describe("leases on one Redis", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("acquire() holds the lease and release() frees it", async () => {
    const name = fresh();
    const lease = await acquire(a, name);
    assert.equal(lease.name, name);
    assert.equal(typeof lease.owner, "string");
    assert.ok(lease.fence > 0);
    assert.ok(lease.expiresAt > performance.now());
    const info = await inspect(b, name);
    assert.equal(info.held, true);
    assert.deepEqual(holdsOf(info), [{ owner: lease.owner, holds: 1 }]);
    assert.equal(info.fence, lease.fence);
    assert.equal(await release(lease), true);
    assert.equal((await inspect(b, name)).held, false);
    assert.equal(lease.signal.aborted, true);
    assert.equal((lease.signal.reason as DOMException).name, "AbortError");
  });

  test("two clients contend: the second gets LockTimeoutError with the holder's remaining time", async () => {
    const name = fresh();
    const lease = await acquire(a, name, { leaseMs: 5_000 });
    const err = await acquire(b, name, { waitMs: 0 }).then(() => null, (e) => e);
    assert.ok(err instanceof LockTimeoutError, String(err));
    assert.equal(err.name, "LockTimeoutError");
    assert.equal(err.lockName, name);
    assert.ok(err.remainingMs > 4_000 && err.remainingMs <= 5_000, String(err.remainingMs));
    const waited = await acquire(b, name, { waitMs: 150 }).then(() => null, (e) => e);
    assert.ok(waited instanceof LockTimeoutError);
    assert.ok(waited.waitedMs >= 140, String(waited.waitedMs));
    await release(lease);
    const second = await acquire(b, name, { waitMs: 0 });
    assert.ok(second.fence > lease.fence);
    await release(second);
  });

  test("reentrant holds count up and down; the key disappears at zero", async () => {
    const name = fresh();
    const first = await acquire(a, name);
    const second = await acquire(a, name, { owner: first, waitMs: 0 });
    const third = await acquire(a, name, { owner: first.owner, waitMs: 0 }); // the owner string, same client
    assert.equal(second.owner, first.owner);
    assert.equal(second.fence, first.fence);
    assert.equal(third.fence, first.fence);
    assert.deepEqual(holdsOf(await inspect(a, name)), [{ owner: first.owner, holds: 3 }]);
    await assert.rejects(acquire(b, name, { waitMs: 0 }), LockTimeoutError);
    assert.equal(await release(second), true);
    assert.equal(second.signal.aborted, true);
    assert.equal(first.signal.aborted, false);
    assert.deepEqual(holdsOf(await inspect(a, name)), [{ owner: first.owner, holds: 2 }]);
    assert.equal(await release(third), true);
    assert.equal(await release(first), true);
    const info = await inspect(a, name);
    assert.equal(info.held, false);
    assert.deepEqual(holdsOf(info), []);
    // Only the fence record remains, and it expires.
    assert.ok((await a.pTTL(`redlease:{${name}}`)) > 0);
  });

  test("a fixed lease expires in Redis and aborts its signal at the local deadline, without renewals", async () => {
    const name = fresh();
    const t0 = performance.now();
    // (1 s: a 300 ms lease was once granted with its reply later than that in a loaded CI run, on Bun.)
    const lease = await acquire(a, name, { leaseMs: 1_000 });
    assert.ok(lease.expiresAt <= t0 + 1_000);
    assert.ok(lease.expiresAt > performance.now());
    const reason = await new Promise<unknown>((r) =>
      lease.signal.addEventListener("abort", () => r(lease.signal.reason))
    );
    const at = performance.now() - t0;
    assert.ok(reason instanceof LeaseLostError);
    assert.equal(reason.why, "expired");
    assert.ok(at >= 950 && at < 2_500, `aborted after ${at} ms`);
    await waitUntil("Redis expired it too", 5_000, async () => !(await inspect(b, name)).held || "still held");
    assert.equal(await release(lease), false);
  });

  test("a watchdog lease survives three lease periods and frees right after release", async () => {
    const name = fresh();
    // A 1 s TTL (renewed every ~333 ms) over 3.1 s: with 300 ms, one stall of a loaded machine let it lapse.
    const lease = await acquire(a, name, { watchdogMs: 1_000 });
    await sleep(3_100);
    assert.equal(lease.signal.aborted, false, String(lease.signal.reason));
    const info = await inspect(b, name);
    assert.equal(info.held, true);
    assert.ok(info.remainingMs > 0 && info.remainingMs <= 1_000, String(info.remainingMs));
    assert.ok(lease.expiresAt > performance.now());
    assert.equal(await release(lease), true);
    const next = await acquire(b, name, { waitMs: 0 });
    await release(next);
  });

  test("one watchdog per (client, name, owner) however many reentrant holds; none for fixed leases", async () => {
    const name = fresh();
    const count = async () => Number(/cmdstat_evalsha:calls=(\d+)/.exec(await b.info("commandstats"))?.[1] ?? 0);
    const first = await acquire(a, name, { watchdogMs: 300 }); // renews every 100 ms
    const again = { owner: first, watchdogMs: 300 };
    const more = [await acquire(a, name, again), await acquire(a, name, again)];
    let before = await count();
    await sleep(1_000);
    const renewals = (await count()) - before;
    assert.ok(renewals >= 7 && renewals <= 12, `${renewals} renewals in 1 s for 3 holds`);
    for (const l of more) await release(l);
    await release(first);
    before = await count();
    await sleep(400);
    assert.equal((await count()) - before, 0, "renewals stop on the final release");
    const fixed = await acquire(a, fresh(), { leaseMs: 600 });
    before = await count();
    await sleep(400);
    assert.equal((await count()) - before, 0, "a fixed lease is never renewed");
    await release(fixed);
  });

  test("loss is detected when the key is deleted behind the holder, within one renewal interval", async () => {
    const name = fresh();
    const lease = await acquire(a, name, { watchdogMs: 900 }); // renews every 300 ms
    await b.del(`redlease:{${name}}`);
    const t0 = performance.now();
    const reason = await new Promise<unknown>((r) =>
      lease.signal.addEventListener("abort", () => r(lease.signal.reason))
    );
    const after = performance.now() - t0;
    assert.ok(reason instanceof LeaseLostError);
    assert.equal(reason.why, "not-held");
    assert.ok(after <= 300 + 150, `detected after ${after} ms`);
    assert.equal(await release(lease), false);
  });

  test("renewals that cannot reach Redis abort the lease at its local deadline with why 'unreachable'", async () => {
    const name = fresh();
    const lease = await acquire(a, name, { watchdogMs: 600 });
    const t0 = performance.now();
    await b.sendCommand(["CLIENT", "PAUSE", "2000", "WRITE"]);
    const reason = await new Promise<unknown>((r) =>
      lease.signal.addEventListener("abort", () => r(lease.signal.reason))
    );
    const after = performance.now() - t0;
    assert.ok(reason instanceof LeaseLostError);
    assert.equal(reason.why, "unreachable");
    assert.ok(after >= 300 && after <= 800, `aborted after ${after} ms`);
    await b.sendCommand(["CLIENT", "UNPAUSE"]);
    await release(lease);
  });

  test("release() twice returns false the second time and never touches another owner's hold", async () => {
    const name = fresh();
    const mine = await acquire(a, name);
    assert.equal(await release(mine), true);
    assert.equal(await release(mine), false);
    const theirs = await acquire(b, name, { leaseMs: 10_000 });
    assert.equal(await release(mine), false);
    assert.equal(await extend(mine, 50), false);
    const info = await inspect(a, name);
    assert.deepEqual(holdsOf(info), [{ owner: theirs.owner, holds: 1 }]);
    assert.ok(info.remainingMs > 9_000);
    await release(theirs);
  });

  test("extend() and release() of a lease taken over after forceUnlock() do not affect the new owner", async () => {
    const name = fresh();
    const old = await acquire(a, name, { leaseMs: 10_000 });
    assert.equal(await forceUnlock(b, name), true);
    assert.equal(await forceUnlock(b, name), false);
    const next = await acquire(b, name, { leaseMs: 10_000 });
    assert.ok(next.fence > old.fence);
    assert.equal(await extend(old, 50), false);
    assert.ok(old.signal.reason instanceof LeaseLostError);
    assert.equal(await release(old), false);
    const info = await inspect(a, name);
    assert.deepEqual(holdsOf(info), [{ owner: next.owner, holds: 1 }]);
    assert.ok(info.remainingMs > 9_000);
    await release(next);
  });

  test("extend() resets the TTL and moves the local deadline", async () => {
    const name = fresh();
    const lease = await acquire(a, name, { leaseMs: 200 });
    assert.equal(await extend(lease, 5_000), true);
    assert.ok(lease.remainingMs > 4_000);
    await sleep(300);
    assert.equal(lease.signal.aborted, false);
    assert.ok((await inspect(b, name)).remainingMs > 4_000);
    assert.equal(await extend(lease), true); // default: the lease's current leaseMs
    await release(lease);
  });

  test("`await using` releases the lease at the end of the scope", async () => {
    const name = fresh();
    {
      await using lease = await acquire(a, name);
      assert.equal((await inspect(b, name)).held, true);
      assert.ok(lease.fence > 0);
    }
    assert.equal((await inspect(b, name)).held, false);
  });

  test("withLock() returns fn's value, passes signal and lease, and releases", async () => {
    const name = fresh();
    const value = await withLock(a, name, async (signal, lease) => {
      assert.equal(signal, lease.signal);
      assert.equal((await inspect(b, name)).held, true);
      return lease.fence;
    });
    assert.ok(value > 0);
    assert.equal((await inspect(b, name)).held, false);
  });

  test("withLock() releases when fn throws and rethrows fn's error", async () => {
    const name = fresh();
    const boom = new Error("boom");
    await assert.rejects(
      withLock(a, name, () => {
        throw boom;
      }),
      (e) => e === boom,
    );
    assert.equal((await inspect(b, name)).held, false);
  });

  test("withLock() rejects with LeaseLostError when the lease was lost before fn settled", async () => {
    const name = fresh();
    const err = await withLock(a, name, async () => {
      await sleep(400);
      return "done";
    }, { leaseMs: 150 }).then(() => null, (e) => e);
    assert.ok(err instanceof LeaseLostError, String(err));
    assert.equal(err.why, "expired");
  });

  test("a Redis error is an error, never an acquired lease", async () => {
    const name = fresh();
    await a.hSet(`redlease:{${name}}`, "f", "not a lease");
    await assert.rejects(acquire(a, name), /WRONGTYPE/);
    await a.set(`redlease:{${name}}`, "not a lease record");
    await assert.rejects(acquire(a, name), /not a lease record/);
    // Not even a number-like value that is not a kept fence (digits only): never read as a free lease.
    for (const v of ["nan", "-5", "1.5", "0x10", " 7", "1e3", "99999999999999999999"]) {
      await a.set(`redlease:{${name}}`, v);
      await assert.rejects(acquire(a, name), /not a lease record/, v);
      assert.equal(await a.get(`redlease:{${name}}`), v, `${v} left as it was`);
    }
    await a.del(`redlease:{${name}}`);
  });

  test("a queue member this library never writes is dropped on release and unlock, never taken for a waiter", async () => {
    const name = fresh(), queue = `redlease:{${name}}:q`;
    for (const end of ["release", "forceUnlock"] as const) {
      const held = await acquire(a, name);
      // Not "<client>|<attempt>|<ms>|<claim ms>|<kind>|<owner>": no waiter to hand the lease to.
      await a.zAdd(queue, [{ score: 1, value: "not-an-entry" }, { score: 2, value: "c|a|x|y|o" }]);
      if (end === "release") assert.equal(await release(held), true);
      else assert.equal(await forceUnlock(b, name), true);
      const info = await inspect(b, name);
      assert.deepEqual(holdsOf(info), [], `${end}: the lease is free, not kept by its last holder`);
      assert.equal(info.waiters, 0, `${end}: the foreign members are gone`);
      const next = await acquire(b, name, { waitMs: 0 });
      assert.ok(next.fence > held.fence);
      await release(next);
    }
  });

  test("an owner with a NUL byte is kept whole in the record, through re-entry and handoff", async () => {
    const name = fresh();
    const first = await acquire(a, name, { owner: "svc\u0000A" });
    const again = await acquire(a, name, { owner: "svc\u0000A" }); // re-entry rewrites the record
    await assert.rejects(acquire(a, name, { owner: "svc", waitMs: 0 }), LockTimeoutError, "'svc' is another owner");
    const owner = first.owner;
    assert.ok(owner.endsWith(":svc\u0000A"), JSON.stringify(owner));
    assert.deepEqual(holdsOf(await inspect(a, name)), [{ owner, holds: 2 }]);
    const waiterP = acquire(b, name, { owner: "q\u0000", waitMs: 5_000 });
    await sleep(50);
    assert.equal(await release(again), true);
    assert.equal(await release(first), true); // handed to the waiter
    const next = await waiterP;
    assert.ok(next.owner.endsWith(":q\u0000"));
    assert.deepEqual(holdsOf(await inspect(a, name)), [{ owner: next.owner, holds: 1 }]);
    assert.equal(await extend(next), true, "the grant's owner is whole, so its claim succeeds");
    assert.equal(await release(next), true);
  });

  test("a custom prefix keeps keys apart", async () => {
    const name = fresh();
    const one = await acquire(a, name, { prefix: "app1" });
    const two = await acquire(b, name, { prefix: "app2", waitMs: 0 });
    assert.equal(await a.exists(`app1:{${name}}`), 1);
    assert.equal((await inspect(a, name, { prefix: "app2" })).held, true);
    assert.equal((await inspect(a, name)).held, false);
    await release(one);
    await release(two);
  });
});

describe("key names", () => {
  let srv2: RedisServer;
  let c: Client;
  before(async () => {
    srv2 = await startRedis();
    c = await srv2.client();
  });
  after(async () => {
    await srv2.stop();
  });
  test("names with '}' and '%' keep the whole name as hash tag (percent-encoded) and stay distinct", async () => {
    const names = ["a}b", "}x", "a%7Db", "{x}", "50%"];
    const leases = [];
    for (const name of names) leases.push(await acquire(c, name, { waitMs: 0 }));
    const keys = (await c.keys("redlease:*")).sort();
    assert.deepEqual(keys, [
      "redlease:{%7Dx}",
      "redlease:{50%25}",
      "redlease:{a%257Db}",
      "redlease:{a%7Db}",
      "redlease:{{x%7D}",
    ]);
    for (const name of names) assert.equal((await inspect(c, name)).held, true);
    for (const l of leases) assert.equal(await release(l), true);
  });
});

describe("stale handles and lost replies", () => {
  let srv3: RedisServer;
  let c: Client;
  let d: Client;
  before(async () => {
    srv3 = await startRedis();
    c = await srv3.client();
    d = await srv3.client();
  });
  after(async () => {
    await srv3.stop();
  });

  test("a hold of an earlier grant never releases or extends the same owner's newer grant", async () => {
    // The old grant's hold lives on in another process (resumed from its token) that has not heard of the loss.
    const first = await acquire(c, "stale", { owner: "worker-1", leaseMs: 10_000 });
    const old = await resume(d, first.token, { leaseMs: 10_000 });
    await forceUnlock(d, "stale");
    const newer = await acquire(c, "stale", { owner: "worker-1", waitMs: 0, leaseMs: 10_000 });
    assert.equal(newer.owner, old.owner, "the same owner");
    assert.ok(newer.fence > old.fence);
    assert.equal(await extend(old, 50), false, "extend() of the old hold");
    assert.equal(await release(old), false, "release() of the old hold");
    const info = await inspect(d, "stale");
    assert.deepEqual(holdsOf(info), [{ owner: newer.owner, holds: 1 }]);
    assert.ok(info.remainingMs > 9_000);
    assert.equal(newer.signal.aborted, false);
    assert.equal(await release(newer), true);
  });

  test("a Driver whose evalScript throws instead of rejecting: release() rejects and the handle ends", async () => {
    let broken = false;
    const real = nodeRedis(c);
    const d: Driver = {
      ...real,
      evalScript: (sha, keys, args, signal) => {
        if (broken) throw new Error("connection is closed");
        return real.evalScript(sha, keys, args, signal);
      },
    };
    const lease = await acquire(d, "sync-throw", { leaseMs: 5_000 });
    broken = true;
    let sent: Promise<boolean> | undefined;
    assert.doesNotThrow(() => (sent = release(lease)));
    await assert.rejects(sent!, /connection is closed/);
    assert.equal(lease.signal.aborted, true, "released locally, as after a rejected command");
    assert.equal(await release(lease), false, "a second release is false, not another attempt");
    await forceUnlock(c, "sync-throw");
  });

  test("withLock() rejects with LeaseLostError when its final release finds the lease gone", async () => {
    const err = await withLock(c, "gone", async () => {
      await forceUnlock(d, "gone");
      await release(await acquire(d, "gone", { waitMs: 0 }));
      return "done";
    }, { leaseMs: 5_000 }).then(() => null, (e) => e);
    assert.ok(err instanceof LeaseLostError, String(err));
    assert.equal(err.why, "not-held");
  });

  test("an acquire whose reply is lost after Redis granted it leaves no phantom holder", async () => {
    // A proxy that drops the connection instead of forwarding the reply to the first acquire EVALSHA.
    const { createServer, connect } = await import("node:net");
    let armed = false;
    let dropped = false;
    const proxy = createServer((down) => {
      const up = connect(srv3.port, "127.0.0.1");
      down.on("data", (b) => {
        if (!dropped && b.includes("EVALSHA")) armed = true;
        up.write(b);
      });
      up.on("data", (b) => {
        if (armed && !dropped) {
          dropped = true;
          down.destroy();
          up.destroy();
          return;
        }
        down.write(b);
      });
      down.on("error", () => up.destroy());
      up.on("error", () => down.destroy());
      down.on("close", () => up.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    const port = (proxy.address() as { port: number }).port;
    const { createClient } = await import("redis");
    const flaky = createClient({ url: `redis://127.0.0.1:${port}` });
    flaky.on("error", () => {});
    await flaky.connect();
    await flaky.sendCommand(["PING"]);
    const err = await acquire(flaky, "phantom").then(() => null, (e) => e);
    assert.ok(err instanceof Error && dropped, `the reply was dropped (${err})`);
    const t0 = performance.now();
    let held = true;
    while (held && performance.now() - t0 < 5_000) {
      held = (await inspect(d, "phantom")).held;
      if (held) await sleep(50);
    }
    assert.equal(held, false, "the lease granted behind the lost reply was released");
    await flaky.disconnect().catch(() => {});
    proxy.close();
  });
});
