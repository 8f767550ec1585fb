// Shared leases (read-write) and permits (a counting semaphore) on the lease engine: coexistence and exclusion,
// FIFO across kinds (a queued exclusive waiter is not starved; its release admits the whole run of shared waiters),
// downgrade and the refused upgrade, permits that free with their TTL and wake one waiter, kind mismatches, fences,
// signals on loss, inspect/forceUnlock and tokens. Two clients stand for two processes.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  acquire,
  extend,
  forceUnlock,
  inspect,
  LeaseKindError,
  LeaseLostError,
  LockTimeoutError,
  release,
  ReplicationError,
  resume,
  withLock,
} from "../mod.ts";
import { redlock } from "../src/redlock.ts";
import { type ClientState, stateOf } from "../src/_client.ts";
import { acquireCall, attemptId, keysOf, type QueueEntry, releaseCall } from "../src/_protocol.ts";
import type { Kind } from "../src/_types.ts";
import { abortedWithin, type Client, noCommands, queued, type RedisServer, sleep, startRedis } from "./_redis.ts";

let srv: RedisServer;
let a: Client;
let b: Client;
let n = 0;
const fresh = () => `shared-test-${++n}-${Math.random().toString(36).slice(2)}`;

/** Whether `p` settles within `ms` (it keeps running either way). */

async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let t: ReturnType<typeof setTimeout> | undefined;
  const r = await Promise.race([
    p.then(() => true, () => true),
    new Promise<false>((res) => (t = setTimeout(() => res(false), ms))),
  ]);
  clearTimeout(t);
  return r;
}

const idle = noCommands();

describe("shared leases", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("shared holds coexist, each with its own increasing fence; an exclusive request waits for all of them", async () => {
    const name = fresh();
    const r1 = await acquire(a, name, { shared: true, waitMs: 0 });
    const r2 = await acquire(b, name, { shared: true, waitMs: 0 });
    assert.equal(r1.kind, "shared");
    assert.ok(r2.fence > r1.fence, "each shared hold has its own, larger fence");
    await assert.rejects(acquire(b, name, { waitMs: 0 }), LockTimeoutError);
    const w = acquire(b, name, { waitMs: 5_000 });
    assert.equal(await settlesWithin(w, 150), false, "the writer waits while a reader holds");
    assert.equal(await release(r1), true);
    assert.equal(await settlesWithin(w, 150), false, "and while the second reader holds");
    const t0 = performance.now();
    assert.equal(await release(r2), true);
    const writer = await w;
    assert.ok(performance.now() - t0 < 1_000, "woken by the release, not by polling");
    assert.equal(writer.kind, "exclusive");
    assert.ok(writer.fence > r2.fence);
    await assert.rejects(
      acquire(a, name, { shared: true, waitMs: 0 }),
      LockTimeoutError,
      "readers wait for the writer",
    );
    await release(writer);
    assert.deepEqual((await inspect(a, name)).owners, []);
  });

  test("a queued exclusive waiter is not passed by newer shared requests; its release admits the whole run of readers at once", async () => {
    const name = fresh();
    const r1 = await acquire(a, name, { shared: true });
    const w = acquire(b, name, { waitMs: 10_000 });
    await queued(a, name, 1);
    // A reader arriving after the writer queues behind it, though only readers hold now.
    await assert.rejects(acquire(a, name, { shared: true, waitMs: 0 }), LockTimeoutError);
    const later = [
      acquire(a, name, { shared: true, waitMs: 10_000 }),
      acquire(b, name, { shared: true, waitMs: 10_000 }),
    ];
    await queued(a, name, 3);
    assert.equal((await inspect(a, name)).waiters, 3);
    await release(r1);
    const writer = await w;
    for (const p of later) {
      assert.equal(await settlesWithin(p, 100), false, "readers queued behind the writer wait for it");
    }
    await release(writer);
    const readers = await Promise.all(later);
    const info = await inspect(a, name);
    assert.equal(info.kind, "shared");
    assert.equal(info.owners.length, 2, "both readers admitted by the one release");
    assert.equal(info.waiters, 0);
    for (const r of readers) assert.ok(r.fence > writer.fence);
    await Promise.all(readers.map((r) => release(r)));
  });

  test("downgrade: the exclusive holder adds a shared hold that outlives its exclusive one; others read once it is released", async () => {
    const name = fresh();
    const wr = await acquire(a, name);
    const rd = await acquire(a, name, { shared: true, owner: wr, waitMs: 0 });
    assert.equal(rd.fence, wr.fence, "the downgraded hold shares the exclusive hold's fence");
    assert.equal(rd.kind, "shared");
    const other = acquire(b, name, { shared: true, waitMs: 5_000 });
    await queued(a, name, 1); // it asked, and was told to wait
    assert.equal(await settlesWithin(other, 150), false, "other readers wait while the exclusive hold remains");
    assert.equal(await release(wr), true);
    const r2 = await other;
    assert.ok(!rd.signal.aborted, "the downgraded hold is still held");
    const info = await inspect(b, name);
    assert.equal(info.kind, "shared");
    assert.deepEqual(info.owners.map((o) => o.kind), ["shared", "shared"]);
    await assert.rejects(acquire(b, name, { waitMs: 0 }), LockTimeoutError);
    await release(rd);
    await release(r2);
    const writer = await acquire(b, name, { waitMs: 0 });
    await release(writer);
  });

  test("upgrade: a shared holder asking for an exclusive hold gets LeaseKindError at once, not a deadlock", async () => {
    const name = fresh();
    const rd = await acquire(a, name, { shared: true });
    const t0 = performance.now();
    const e = await acquire(a, name, { owner: rd, waitMs: 10_000 }).then(() => undefined, (x: unknown) => x);
    assert.ok(e instanceof LeaseKindError, String(e));
    assert.equal(e.why, "upgrade");
    assert.equal(e.lockName, name);
    assert.ok(performance.now() - t0 < 2_000, "at once");
    assert.equal((await inspect(a, name)).waiters, 0, "nothing left queued");
    await release(rd);
  });

  test("a dead reader's hold frees with its TTL; a lost shared hold aborts its signal with LeaseLostError", async () => {
    const name = fresh();
    const dead = await acquire(a, name, { shared: true, leaseMs: 300 }); // never released: its holder "died"
    const t0 = performance.now();
    const writer = await acquire(b, name, { waitMs: 5_000 });
    assert.ok(performance.now() - t0 >= 250, "the writer waited out the dead reader's TTL");
    assert.ok(writer.fence > dead.fence);
    await release(writer);
    // forceUnlock removes every shared hold: a watchdog holder learns at its next renewal.
    const rd = await acquire(a, name, { shared: true, watchdogMs: 300 });
    assert.equal(await forceUnlock(b, name), true);
    const reason = await abortedWithin(rd.signal, 2_000);
    assert.ok(reason instanceof LeaseLostError, String(reason));
    assert.equal(reason.why, "not-held");
    assert.equal(await release(rd), false);
  });

  test("withLock, extend and a token work on shared holds; resume takes a shared hold over", async () => {
    const name = fresh();
    const seen = await withLock(a, name, async (_signal, lease) => {
      assert.equal(lease.kind, "shared");
      assert.equal(await extend(lease, 5_000), true);
      return lease.fence;
    }, { shared: true });
    assert.ok(seen > 0);
    const held = await acquire(a, name, { shared: true, leaseMs: 2_000 });
    const other = await resume(b, held.token);
    assert.equal(other.fence, held.fence);
    assert.equal(other.kind, "shared");
    assert.equal(await release(other), true);
    assert.equal(await release(held), false, "the hold was released by the process that took it over");
  });

  test("with replicas, a shared hold or permit that no replica acknowledges is given back (ReplicationError)", async () => {
    const name = fresh();
    for (const o of [{ shared: true }, { permits: 2 }]) {
      await assert.rejects(
        acquire(a, name, { ...o, replicas: 1, replicaTimeoutMs: 50 }),
        (e) => e instanceof ReplicationError && e.acknowledged === 0,
      );
      assert.equal((await inspect(b, name)).held, false, `${JSON.stringify(o)}: nothing kept`);
    }
  });

  test("bad input is rejected before any Redis command; Redlock refuses permits", async () => {
    await assert.rejects(acquire(idle, "x", { shared: "yes" as unknown as boolean }), TypeError);
    await assert.rejects(acquire(idle, "x", { shared: true, permits: 2 }), TypeError);
    await assert.rejects(acquire(idle, "x", { permits: 0 }), RangeError);
    await assert.rejects(acquire(idle, "x", { permits: 1.5 }), RangeError);
    const group = redlock([0, 1, 2].map(() => noCommands()));
    await assert.rejects(acquire(group, "x", { permits: 3 }), TypeError);
    assert.equal(idle.sent, 0);
  });
});

describe("permits", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("n permits are taken by n holders, each with its own fence; the next waits and freeing one wakes exactly one", async () => {
    const name = fresh();
    const held = [await acquire(a, name, { permits: 2 }), await acquire(b, name, { permits: 2 })];
    assert.equal(held[0].kind, "permit");
    assert.ok(held[1].fence > held[0].fence);
    await assert.rejects(acquire(a, name, { permits: 2, waitMs: 0 }), LockTimeoutError);
    const w1 = acquire(a, name, { permits: 2, waitMs: 10_000 });
    await queued(a, name, 1);
    const w2 = acquire(b, name, { permits: 2, waitMs: 10_000 });
    await queued(a, name, 2);
    const info = await inspect(a, name);
    assert.equal(info.kind, "permits");
    assert.equal(info.permits, 2);
    assert.equal(info.waiters, 2);
    await release(held[0]);
    const first = await w1;
    assert.equal(await settlesWithin(w2, 200), false, "one freed permit wakes exactly one waiter, the first");
    assert.equal((await inspect(a, name)).owners.length, 2);
    await release(held[1]);
    const second = await w2;
    assert.ok(second.fence > first.fence);
    await release(first);
    await release(second);
    assert.equal((await inspect(a, name)).held, false);
  });

  test("a dead holder's permit frees with its TTL; a permit re-entered by its owner counts once", async () => {
    const name = fresh();
    await acquire(a, name, { permits: 1, leaseMs: 300 }); // its holder "dies"
    const t0 = performance.now();
    const next = await acquire(b, name, { permits: 1, waitMs: 5_000 });
    assert.ok(performance.now() - t0 >= 200, "waited out the dead holder's TTL");
    const again = await acquire(b, name, { permits: 1, owner: next, waitMs: 0 });
    assert.equal(again.fence, next.fence);
    const info = await inspect(a, name);
    assert.deepEqual(info.owners.map((o) => [o.owner, o.holds, o.kind]), [[next.owner, 2, "permit"]]);
    await release(again);
    await release(next);
  });

  test("callers that disagree on n, or ask exclusive/shared of a permits lease, get LeaseKindError at once", async () => {
    const name = fresh();
    const p = await acquire(a, name, { permits: 3 });
    for (const o of [{ permits: 2 }, {}, { shared: true }]) {
      const e = await acquire(b, name, { ...o, waitMs: 10_000 }).then(() => undefined, (x: unknown) => x);
      assert.ok(e instanceof LeaseKindError, String(e));
      assert.equal(e.why, "mismatch");
      assert.equal(e.found, 3);
    }
    await release(p);
    const x = await acquire(a, name, {});
    const e = await acquire(b, name, { permits: 3, waitMs: 10_000 }).then(() => undefined, (x: unknown) => x);
    assert.ok(e instanceof LeaseKindError && e.found === "exclusive", String(e));
    await release(x);
    // Once nobody holds it, another number is fine.
    const q = await acquire(b, name, { permits: 5, waitMs: 0 });
    await release(q);
  });

  test("a lost permit aborts its signal; forceUnlock frees every permit and admits the waiters", async () => {
    const name = fresh();
    // (A 1 s TTL: with 300 ms a loaded CI run saw the permit lapse before the forceUnlock, which then found nothing.)
    const p1 = await acquire(a, name, { permits: 1, watchdogMs: 1_000 });
    const w = acquire(b, name, { permits: 1, waitMs: 10_000 });
    await queued(a, name, 1);
    assert.equal(await forceUnlock(b, name), true);
    const got = await w;
    const reason = await abortedWithin(p1.signal, 3_000);
    assert.ok(reason instanceof LeaseLostError, String(reason));
    assert.ok(got.fence > p1.fence);
    await release(got);
  });
});

// Found by an adversarial review: each failed before its fix. Script-level, with a live receiver on the waiter
// channels of client "c1" (so that handoffs find the waiters alive) and no client-side claims.
describe("shared leases and permits: edge cases at the protocol level", () => {
  let st: ClientState;
  let admin: Client;
  let sub: Client;
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
    admin = await srv.client();
    st = stateOf(await srv.client());
    sub = (await srv.client()).duplicate();
    await sub.connect();
    await sub.pSubscribe("redlease:*:w:c1", () => {});
  });
  after(async () => {
    await sub.disconnect();
    await srv.stop();
  });
  const entryOf = (attempt: string, owner: string, kind: Kind, ms = 30_000, claimMs = 1_000): QueueEntry => ({
    clientId: "c1",
    attempt,
    ms,
    claimMs,
    kind,
    owner,
  });
  const take = (name: string, owner: string, kind: Kind, ms = 30_000, attempt = attemptId(), entry?: QueueEntry) =>
    acquireCall(st, keysOf("redlease", name), { kind, owner, ms, attempt, entry });

  test("a downgraded owner's claim of its exclusive grant does not let the lease key expire before its shared hold", async () => {
    const name = fresh();
    await take(name, "P", "x");
    const ox = attemptId();
    const e = entryOf(ox, "O", "x", 500);
    await take(name, "O", "x", 500, ox, e); // queued
    assert.equal(await releaseCall(st, keysOf("redlease", name), { kind: "x", owner: "P" }), "handed-over");
    assert.ok((await take(name, "O", "s", 20_000)).fence, "the downgrade");
    assert.ok((await take(name, "O", "x", 500, ox, e)).fence, "the exclusive waiter's re-check claims its grant");
    await sleep(700); // the exclusive hold (500 ms) is gone; the shared one (20 s) lives
    const q = await take(name, "Q", "x", 30_000);
    assert.equal(q.fence, undefined, "nobody takes the lease exclusively beside the live shared hold");
    const info = await inspect(admin, name);
    assert.deepEqual(info.owners.map((o) => [o.owner, o.kind]), [["O", "shared"]]);
  });

  test("a downgrade claims its exclusive grant; a lapsed exclusive grant taken back leaves the owner's shared holds", async () => {
    const name = fresh();
    await take(name, "P", "x");
    const ox = attemptId();
    await take(name, "O", "x", 30_000, ox, entryOf(ox, "O", "x", 30_000, 300));
    await releaseCall(st, keysOf("redlease", name), { kind: "x", owner: "P" }); // handed to O, claim within 300 ms
    assert.ok((await take(name, "O", "s", 20_000)).fence);
    await sleep(400);
    assert.equal((await take(name, "Q", "x")).fence, undefined, "O's exclusive grant was claimed by the downgrade");
    // A grant that does lapse (no downgrade claimed it) is taken back, but the shared holds of its owner stay.
    const name2 = fresh();
    await take(name2, "P", "x");
    const rx = attemptId();
    await take(name2, "R", "x", 30_000, rx, entryOf(rx, "R", "x", 30_000, 200));
    await releaseCall(st, keysOf("redlease", name2), { kind: "x", owner: "P" });
    await admin.sendCommand(["HSET", `redlease:{${name2}}:d`, "R", "1:a:1::s"]); // R holds a shared hold too
    await admin.sendCommand(["ZADD", `redlease:{${name2}}:s`, String((Date.now() + 20_000) * 1000), "R"]);
    await sleep(300);
    assert.equal((await take(name2, "Q", "x")).fence, undefined, "R's shared hold still excludes Q");
  });

  test("a downgraded exclusive hold ends with its own TTL; the lease is then shared", async () => {
    const name = fresh();
    const wr = await acquire(a, name, { leaseMs: 300 });
    const rd = await acquire(a, name, { shared: true, owner: wr.owner, leaseMs: 5_000, waitMs: 0 });
    assert.equal(rd.fence, wr.fence, "a downgrade by the owner string too");
    await sleep(500);
    const other = await acquire(b, name, { shared: true, waitMs: 0 });
    assert.equal((await inspect(admin, name)).kind, "shared");
    await release(other);
    await release(rd);
  });

  test("the queue a blocked head is put back into expires", async () => {
    const name = fresh();
    const r1 = await take(name, "R1", "s");
    await take(name, "R2", "s");
    const wx = attemptId();
    await take(name, "W", "x", 30_000, wx, entryOf(wx, "W", "x"));
    assert.ok(r1.fence);
    await releaseCall(st, keysOf("redlease", name), { kind: "s", owner: "R1" }); // W put back: R2 holds
    const ttl = Number(await admin.sendCommand(["PTTL", `redlease:{${name}}:q`]));
    assert.ok(ttl > 0 && ttl <= 30_000, `queue PTTL ${ttl}`);
  });

  test("two queued requests of one owner admitted in one run re-enter one hold, counted once", async () => {
    for (const kind of ["s", "p2"] as const) {
      const name = fresh();
      // Held exclusively (shared waiters queue), or both permits taken (permit waiters queue).
      const holders = kind === "s" ? [["X", "x"]] as const : [["X", "p2"], ["Y", "p2"]] as const;
      for (const [o, k] of holders) await take(name, o, k);
      const [e1, e2] = [attemptId(), attemptId()];
      await take(name, "me", kind, 30_000, e1, entryOf(e1, "me", kind));
      await take(name, "me", kind, 30_000, e2, entryOf(e2, "me", kind));
      const e3 = attemptId();
      await take(name, "other", kind, 30_000, e3, entryOf(e3, "other", kind));
      assert.equal(await releaseCall(st, keysOf("redlease", name), { kind: holders[0][1], owner: "X" }), "handed-over");
      const info = await inspect(admin, name);
      const want = kind === "s" ? [["me", 2], ["other", 1]] : [["Y", 1], ["me", 2]];
      assert.deepEqual(info.owners.map((o) => [o.owner, o.holds]).sort(), want, kind);
      assert.equal(info.waiters, kind === "s" ? 0 : 1, `${kind}: what is left queued`);
    }
  });

  test("the acquire_set reply tells a pass-on: a lapsed grant of another attempt, not a claimed hold, not its own", async () => {
    const keys = (name: string) => keysOf("redlease", name);
    // A permit handed over and never claimed: its grant was its only hold, yet the holder set outlives its claim
    // window (until its lease would end), so the waiter behind finds it lapsed and says so (a fence reply).
    const p = fresh();
    await take(p, "X", "p1");
    const w = attemptId(), nb = attemptId();
    await take(p, "W", "p1", 30_000, w, entryOf(w, "W", "p1", 30_000, 200));
    const ne = entryOf(nb, "N", "p1");
    assert.equal((await take(p, "N", "p1", 30_000, nb, ne)).fence, undefined);
    assert.equal(await releaseCall(st, keys(p), { kind: "p1", owner: "X" }), "handed-over");
    const kept = Number(await admin.sendCommand(["PTTL", `redlease:{${p}}:s`]));
    assert.ok(kept > 20_000, `the holder set lives until the grant's lease would end: PTTL ${kept}`);
    const early = await take(p, "N", "p1", 30_000, nb, ne);
    assert.deepEqual([early.fence, early.passedOn], [undefined, undefined], "not lapsed yet");
    await sleep(300);
    const got = await take(p, "N", "p1", 30_000, nb, ne);
    assert.ok(got.fence && got.passedOn === true, JSON.stringify(got));
    assert.equal((await take(p, "N", "p1", 30_000, nb, ne)).passedOn, undefined, "told once: the hold is gone");
    // The waiter's own re-check after its own grant lapsed takes it again: not a pass-on.
    const o = fresh();
    await take(o, "X", "p1");
    const ow = attemptId();
    const oe = entryOf(ow, "W", "p1", 30_000, 200);
    await take(o, "W", "p1", 30_000, ow, oe);
    await releaseCall(st, keys(o), { kind: "p1", owner: "X" });
    await sleep(300);
    const own = await take(o, "W", "p1", 30_000, ow, oe);
    assert.ok(own.fence && own.passedOn === undefined, JSON.stringify(own));
    // A shared grant lapsed ahead of an exclusive waiter: a shared caller passes it on to that waiter and waits
    // (a busy reply, with its 4th element), and so does a caller that does not wait (a number reply, as a table).
    for (const waits of [true, false]) {
      const s = fresh();
      await take(s, "X", "x");
      const g = attemptId(), e = attemptId(), m = attemptId();
      await take(s, "G", "s", 30_000, g, entryOf(g, "G", "s", 30_000, 200));
      await take(s, "E", "x", 30_000, e, entryOf(e, "E", "x"));
      const me = waits ? entryOf(m, "M", "s") : undefined;
      assert.equal(await releaseCall(st, keys(s), { kind: "x", owner: "X" }), "handed-over"); // G granted, E waits
      await sleep(300);
      const r = await take(s, "M", "s", 30_000, m, me);
      assert.equal(r.fence, undefined);
      assert.ok(r.retryMs > 0 && r.passedOn === true, JSON.stringify(r));
      assert.equal(r.queuedNow, waits);
      assert.deepEqual((await inspect(admin, s)).owners.map((x) => [x.owner, x.kind]), [["E", "exclusive"]]);
    }
    // A claimed permit that runs out (its holder died) is dropped by the same purge, and is no pass-on.
    const c = fresh();
    await take(c, "Y", "p2");
    await take(c, "Z", "p2", 200);
    await sleep(300);
    const after = await take(c, "N", "p2");
    assert.ok(after.fence && after.passedOn === undefined, JSON.stringify(after));
    assert.deepEqual((await inspect(admin, c)).owners.map((x) => x.owner).sort(), ["N", "Y"]);
  });

  test("a lease over several names takes a name whose only hold is a lapsed, unclaimed set grant", async () => {
    // The grant's holder set outlives its claim window (until its lease would end), holding nothing live: the
    // all-at-once path must count live holds, not the set's existence, or it finds the free name busy for 30 s.
    const p = fresh();
    await take(p, "X", "p1");
    const w = attemptId();
    await take(p, "W", "p1", 30_000, w, entryOf(w, "W", "p1", 30_000, 200));
    assert.equal(await releaseCall(st, keysOf("redlease", p), { kind: "p1", owner: "X" }), "handed-over");
    await sleep(300);
    assert.equal((await inspect(admin, p)).held, false);
    const both = await acquire(a, [p, fresh()], { waitMs: 0 });
    assert.deepEqual((await inspect(admin, p)).owners.map((x) => [x.owner, x.kind]), [[both.owner, "exclusive"]]);
    await release(both);
  });

  test("a newcomer that admits the waiters ahead of it joins them when it can", async () => {
    const name = fresh();
    await take(name, "X", "x", 300);
    const w = attemptId();
    await take(name, "W", "s", 30_000, w, entryOf(w, "W", "s"));
    await sleep(400); // X expired; W is still queued
    const mine = await take(name, "N", "s");
    assert.ok(mine.fence, "the newcomer holds it, beside the waiter it admitted");
    assert.deepEqual((await inspect(admin, name)).owners.map((o) => o.owner).sort(), ["N", "W"]);
  });
});
