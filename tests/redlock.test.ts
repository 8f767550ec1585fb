import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  acquire,
  extend,
  inspect,
  LeaseKindError,
  LeaseLostError,
  LockTimeoutError,
  QuorumError,
  release,
  withLock,
} from "../mod.ts";
import { redlock } from "../src/redlock.ts";
import { waitUntil } from "../harness/wait.ts";
import { type Client, type RedisServer, runProcess, runtimeArgs, sleep, startRedis } from "./_redis.ts";

const here = dirname(fileURLToPath(import.meta.url));
let n = 0;
const fresh = () => `redlock-${++n}-${Math.random().toString(36).slice(2)}`;

async function nodes(count: number) {
  const servers = await Promise.all(Array.from({ length: count }, () => startRedis(["--enable-debug-command", "yes"])));
  const clients = await Promise.all(servers.map((s) => s.client()));
  return { servers, clients };
}

async function keysOn(clients: Client[], name: string): Promise<number> {
  let held = 0;
  for (const c of clients) {
    if ((await c.exists(`redlease:{${name}}`).catch(() => 0)) === 1 && (await inspect(c, name)).held) held++;
  }
  return held;
}

describe("Redlock over 5 independent masters", () => {
  let servers: RedisServer[];
  let a: Client[];
  let b: Client[];
  before(async () => {
    const set = await nodes(5);
    servers = set.servers;
    a = set.clients;
    b = await Promise.all(servers.map((s) => s.client()));
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  test("a master whose lease key holds a value of someone else's with a '/' in it does not hold the lease: extend() answers false", async () => {
    const name = fresh();
    // (Each master's reply bounded by 1 s, not the 25 ms a 5 s lease gets by default: a loaded CI run missed that.)
    const lease = await acquire(redlock(a), name, { leaseMs: 5_000, nodeTimeoutMs: 1_000 });
    // Another application's value, on a majority of the masters: the lease is not ours there, and not free either.
    for (const c of a.slice(0, 3)) await c.set(`redlease:{${name}}`, "a/b", { PX: 10_000 });
    assert.equal(await extend(lease, 3_000), false);
    const reason = lease.signal.reason as LeaseLostError;
    assert.ok(reason instanceof LeaseLostError && reason.why === "not-held", String(reason));
    for (const c of a.slice(0, 3)) assert.equal(await c.get(`redlease:{${name}}`), "a/b", "left as it was");
    for (const c of a) await c.del(`redlease:{${name}}`);
  });

  test("shared leases by Redlock: readers coexist on every master, a writer waits for them; permits are refused", async () => {
    const name = fresh();
    const r1 = await acquire(redlock(a), name, { shared: true, waitMs: 0 });
    const r2 = await acquire(redlock(b), name, { shared: true, waitMs: 0 });
    assert.equal(r1.kind, "shared");
    for (const c of a) assert.equal((await inspect(c, name)).owners.length, 2, "both readers on every master");
    await assert.rejects(acquire(redlock(b), name, { waitMs: 0 }), LockTimeoutError);
    const w = acquire(redlock(b), name, { waitMs: 5_000, retryDelayMs: 20 });
    await sleep(100);
    assert.equal(await release(r1), true);
    assert.equal(await release(r2), true);
    const writer = await w;
    assert.equal(writer.kind, "exclusive");
    await assert.rejects(acquire(redlock(a), name, { shared: true, waitMs: 0 }), LockTimeoutError);
    await release(writer);
    // Permits: a majority per permit does not bound the holders.
    await assert.rejects(acquire(redlock(a), name, { permits: 2 }), TypeError);
    // A lease held as permits on the masters: a shared request is refused at once, not waited for.
    const p = await Promise.all(a.map((c) => acquire(c, `${name}-p`, { permits: 2 })));
    await assert.rejects(acquire(redlock(b), `${name}-p`, { shared: true, waitMs: 5_000 }), LeaseKindError);
    for (const l of p) await release(l);
  });

  test("acquire() with 5 clients holds the lease on every node; release() frees all of them", async () => {
    const name = fresh();
    const t0 = performance.now();
    const lease = await acquire(redlock(a), name);
    const took = performance.now() - t0;
    assert.equal(await keysOn(a, name), 5);
    assert.ok(lease.expiresAt > performance.now() + 29_000);
    assert.ok(took < 2_000, `acquire took ${took} ms`); // (5 masters, one round: no retry, no wait)
    assert.equal(await release(lease), true);
    assert.equal(await keysOn(a, name), 0);
  });

  test("contention is a LockTimeoutError, not a quorum error; the fence is the quorum's highest", async () => {
    const name = fresh();
    const first = await acquire(redlock(a), name);
    const err = await acquire(redlock(b), name, { waitMs: 0 }).then(() => null, (e) => e);
    assert.ok(err instanceof LockTimeoutError, String(err));
    assert.ok(err.remainingMs > 25_000);
    const fences = await Promise.all(a.map((c) => inspect(c, name).then((i) => i.fence)));
    assert.equal(first.fence, Math.max(...fences));
    const waiting = acquire(redlock(b), name, { waitMs: 5_000, retryDelayMs: 20 });
    await sleep(100);
    await release(first);
    const second = await waiting;
    assert.ok(second.fence > first.fence);
    await release(second);
  });

  test("a reentrant acquire keeps the first hold's fence even where a master now grants it fresh", async () => {
    const name = fresh();
    // Another owner holds the name on master 4 only, so the first acquire is granted by masters 0-3.
    const lone = await acquire(b[4], name, { leaseMs: 10_000 });
    const outer = await acquire(redlock(a), name);
    await release(lone);
    const inner = await acquire(redlock(a), name, { owner: outer });
    assert.equal(inner.fence, outer.fence);
    assert.equal(outer.signal.aborted, false, "the outer hold is not mistaken for lost");
    assert.equal(await release(inner), true);
    assert.equal(await release(outer), true);
    assert.equal(await keysOn(a, name), 0);
  });

  test("a watchdog lease is renewed by quorum across three lease periods", async () => {
    const name = fresh();
    // A 1 s TTL over 3.1 s: with 400 ms, one stall of a loaded machine (five masters to renew) let it lapse.
    const lease = await acquire(redlock(a), name, { watchdogMs: 1_000 });
    await sleep(3_100);
    assert.equal(lease.signal.aborted, false, String(lease.signal.reason));
    assert.equal(await keysOn(a, name), 5);
    await release(lease);
  });

  test("bad client lists are rejected before any command", async () => {
    assert.throws(() => redlock([a[0], a[1]]), RangeError);
    assert.throws(() => redlock([a[0], a[0], a[1]]), RangeError);
    assert.throws(() => redlock([a[0], a[1], {}] as never), TypeError);
    await assert.rejects(
      acquire(a as never, "x"),
      /for Redlock, pass redlock\(\[\.\.\.clients\]\) from redlease\/redlock/,
    );
    await assert.rejects(acquire(redlock(a), "x", { replicas: 1 }), TypeError);
    await assert.rejects(acquire(redlock(a), "x", { nodeTimeoutMs: 0 }), RangeError);
  });

  test("one stalled node delays an acquire by no more than the per-node timeout", async () => {
    const name = fresh();
    const stall = a[4].duplicate();
    stall.on("error", () => {});
    await stall.connect();
    const sleeping = stall.sendCommand(["DEBUG", "SLEEP", "1"]);
    await sleep(20);
    const t0 = performance.now();
    const lease = await acquire(redlock(a), name, { nodeTimeoutMs: 100 });
    const took = performance.now() - t0;
    assert.ok(took < 100 + 250, `acquire took ${took} ms with one node stalled`);
    await sleeping;
    await stall.quit();
    await release(lease);
    await waitUntil("the late grant on the stalled node is released too", 5_000, async () => {
      const left = await keysOn(a, name);
      return left === 0 || `${left} keys left`;
    });
  });

  test("a release waits for nodes slower than the per-node timeout, instead of reporting the lease as not held", async () => {
    const name = fresh();
    const lease = await acquire(redlock(a), name, { nodeTimeoutMs: 50 });
    // A majority of the nodes answer after 300 ms (busy, or a slow network): well within the release's own bound.
    const stalls = await Promise.all(
      a.slice(0, 3).map(async (c) => {
        const stall = c.duplicate();
        stall.on("error", () => {});
        await stall.connect();
        return stall;
      }),
    );
    const sleeping = stalls.map((c) => c.sendCommand(["DEBUG", "SLEEP", "0.3"]));
    try {
      await sleep(20);
      assert.equal(await release(lease), true);
    } finally {
      await Promise.all(sleeping);
      await Promise.all(stalls.map((c) => c.quit()));
    }
    assert.equal(await keysOn(a, name), 0, "released on every node");
  });

  test("a release settles once a majority answered: one node busy for 3 s delays neither release nor withLock", async () => {
    const stall = async (c: Client) => {
      const s = c.duplicate();
      s.on("error", () => {});
      await s.connect();
      const sleeping = s.sendCommand(["DEBUG", "SLEEP", "3"]);
      await sleep(20);
      return () => sleeping.then(() => s.quit());
    };
    const lease = await acquire(redlock(a), fresh());
    const done = await stall(a[4]);
    let done2: (() => Promise<unknown>) | undefined;
    try {
      const t0 = performance.now();
      assert.equal(await release(lease), true);
      assert.ok(performance.now() - t0 < 1_500, `release took ${Math.round(performance.now() - t0)} ms`);
      const t1 = performance.now();
      await withLock(redlock(a), fresh(), async () => void (done2 = await stall(a[3])));
      assert.ok(performance.now() - t1 < 1_500, `withLock took ${Math.round(performance.now() - t1)} ms`);
    } finally {
      await done();
      await done2?.();
    }
  });

  test("a group with a closed client is made, and grants by the majority of the others", async () => {
    const closed = a[0].duplicate();
    closed.on("error", () => {});
    await closed.connect();
    await closed.quit();
    const lease = await acquire(redlock([closed, ...a.slice(1)]), fresh(), { waitMs: 0 });
    assert.equal(await release(lease), true);
  });

  test("mutual exclusion holds across 3 processes contending through Redlock", async () => {
    const name = fresh();
    const [cmd, pre] = runtimeArgs(join(here, "fixtures", "redlock_worker.ts"));
    const urls = servers.map((s) => s.url);
    const runs = await Promise.all(
      Array.from(
        { length: 3 },
        () => runProcess(cmd, [...pre, name, "15", ...urls], { cwd: join(here, ".."), timeoutMs: 60_000 }),
      ),
    );
    const codes = runs.map((r) => r.code);
    assert.deepEqual(codes, [0, 0, 0]);
    assert.equal(await a[0].get(`${name}:counter`), "45");
    assert.equal(await a[0].get(`${name}:overlaps`), null);
  });

  test("2 of 5 nodes down: still acquires; 3 down: QuorumError, never a grant, nothing left behind", async () => {
    const name = fresh();
    process.kill(servers[3].pid, "SIGKILL");
    process.kill(servers[4].pid, "SIGKILL");
    await sleep(100);
    const lease = await acquire(redlock(a), name, { nodeTimeoutMs: 50 });
    assert.equal(await keysOn(a.slice(0, 3), name), 3);
    await release(lease);
    const held = await acquire(redlock(b.slice(0, 3).concat(b.slice(3))), fresh(), {
      watchdogMs: 600,
      nodeTimeoutMs: 50,
    });
    process.kill(servers[2].pid, "SIGKILL");
    await sleep(100);
    const t0 = performance.now();
    const err = await acquire(redlock(a), name, { waitMs: 0, nodeTimeoutMs: 50 }).then(() => null, (e) => e);
    assert.ok(err instanceof QuorumError, String(err));
    assert.equal(err.required, 3);
    assert.equal(err.errors.length, 3);
    assert.ok(performance.now() - t0 < 1_500); // (waitMs 0: one round, no retry)
    assert.equal(await keysOn(a.slice(0, 2), name), 0, "no keys left on the live nodes");
    const reason = await new Promise<unknown>((r) =>
      held.signal.aborted ? r(held.signal.reason) : held.signal.addEventListener("abort", () => r(held.signal.reason))
    );
    assert.ok(reason instanceof LeaseLostError, "a lease that loses its quorum aborts its signal");
    assert.equal(reason.why, "unreachable");
  });
});
