// The event hook (configure(client, { onEvent })): every kind of lease tells what happens to it — queued, acquired
// (waited, handed off, re-entered), acquire-failed (timeout, aborted), renewed, renewal-failed, lost, released,
// handed-over, resumed, passed-on — each once, with the facts of the moment; a handler that throws changes nothing;
// a bad handler is refused before any Redis command; `null` removes it.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  acquire,
  campaign,
  configure,
  type LeaseEvent,
  LeaseLostError,
  LockTimeoutError,
  release,
  resume,
} from "../mod.ts";
import { createClient } from "redis";
import { redlock } from "../src/redlock.ts";
import { startProxy } from "../chaos/_proxy.ts";
import { type Client, noCommands, queued, type RedisServer, sleep, startRedis, until } from "./_redis.ts";

let srv: RedisServer;
let a: Client;
let b: Client;
let n = 0;
const fresh = () => `events-test-${++n}-${Math.random().toString(36).slice(2)}`;
const T = { timeout: 60_000 };
/** Every event of clients a and b, in order. */
type Seen = LeaseEvent & { client: string };
const seen: Seen[] = [];
/** The events of `type`, narrowed. */
const only = <K extends LeaseEvent["type"]>(list: readonly LeaseEvent[], type: K) =>
  list.filter((e) => e.type === type) as Array<Extract<LeaseEvent, { type: K }> & { client?: string }>;
const of = (name: string) => seen.filter((e) => e.name === name);
const types = (name: string) => of(name).map((e) => `${e.client}:${e.type}`);
/**
 * Until `who` has told it waits and `count` entries are in the name's queue in Redis: the `queued` event comes before
 * the entry is written (the waiter subscribes first), and a release before the entry frees the lease instead.
 */
async function inQueue(who: string, name: string, count = 1): Promise<void> {
  await until(`${who} queued`, () => types(name).includes(`${who}:queued`));
  await queued(a, name, count);
}

describe("events", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
    configure(a, { onEvent: (e) => void seen.push({ ...e, client: "a" }) });
    configure(b, { onEvent: (e) => void seen.push({ ...e, client: "b" }) });
  });
  after(async () => {
    await srv.stop();
  });

  test("a bad handler is refused before any Redis command; null removes it", T, async () => {
    const idle = noCommands();
    for (const bad of [42, "f", {}, true]) {
      assert.throws(
        () => configure(idle, { onEvent: bad } as never),
        (e: unknown) => e instanceof TypeError && /'onEvent' must be a function/.test((e as Error).message),
      );
    }
    assert.equal(idle.sent, 0);
    const c = await srv.client();
    const got: LeaseEvent[] = [];
    configure(c, { onEvent: (e) => void got.push(e) });
    await release(await acquire(c, fresh()));
    assert.deepEqual(got.map((e) => e.type), ["acquired", "released"]);
    configure(c, { onEvent: null });
    await release(await acquire(c, fresh()));
    assert.equal(got.length, 2, "no events once removed");
    configure(c, { logger: null }); // another option leaves the handler as it is
  });

  test("exclusive: acquired, re-entered, queued, handed over and off, released, each with its facts", T, async () => {
    const name = fresh();
    const first = await acquire(a, name);
    const again = await acquire(a, name, { owner: first });
    // A claim window the busiest machine meets: the grant is taken from the release's message, not by a re-check.
    const waiting = acquire(b, name, { waitMs: 10_000, claimMs: 5_000 });
    await inQueue("b", name);
    await release(again);
    await release(first);
    const second = await waiting;
    await release(second);
    // handed-over comes when the final release's reply arrives: after a:released, before or after b:acquired.
    await until("handed-over", () => types(name).includes("a:handed-over"));
    assert.deepEqual(types(name).filter((t) => t !== "a:handed-over"), [
      "a:acquired",
      "a:acquired",
      "b:queued",
      "a:released",
      "a:released",
      "b:acquired",
      "b:released",
    ]);
    const evs = of(name);
    const [acq1, acq2] = evs.filter((e) => e.type === "acquired" && e.client === "a") as Array<
      Extract<LeaseEvent, { type: "acquired" }>
    >;
    assert.equal(acq1.kind, "exclusive");
    assert.equal(acq1.fence, first.fence);
    assert.equal(acq1.owner, first.owner);
    assert.equal(acq1.reentered, false);
    assert.equal(acq1.queued, false);
    assert.equal(acq1.handedOff, false);
    assert.ok(acq1.waitMs >= 0 && acq1.waitMs < 5_000);
    assert.equal(acq2.reentered, true);
    const rel = only(evs, "released");
    assert.deepEqual(rel.map((e) => [e.client, e.final]), [["a", false], ["a", true], ["b", true]]);
    assert.ok(rel[1].heldMs >= 0);
    const queued = evs.find((e) => e.type === "queued") as Extract<LeaseEvent, { type: "queued" }>;
    assert.equal(queued.owner, second.owner);
    assert.ok(queued.retryMs > 0, `retryMs ${queued.retryMs}`);
    const acqB = evs.find((e) => e.type === "acquired" && e.client === "b") as Extract<
      LeaseEvent,
      { type: "acquired" }
    >;
    assert.equal(acqB.queued, true);
    assert.equal(acqB.handedOff, true, "granted by the release's message");
    assert.equal(acqB.fence, second.fence);
    const over = evs.find((e) => e.type === "handed-over")!;
    assert.equal((over as { fence: number }).fence, first.fence, "the releasing hold's fence");
  });

  test("acquire-failed: timeout and aborted, with the error acquire rejects with", T, async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const timedOut = await acquire(b, name, { waitMs: 0 }).catch((e) => e);
    assert.ok(timedOut instanceof LockTimeoutError);
    const ac = new AbortController();
    const aborted = acquire(b, name, { waitMs: 10_000, signal: ac.signal }).catch((e) => e);
    await until("b queued", () => types(name).includes("b:queued"));
    ac.abort(new Error("no longer needed"));
    const reason = await aborted;
    const failed = of(name).filter((e) => e.type === "acquire-failed") as Array<
      Extract<LeaseEvent, { type: "acquire-failed" }>
    >;
    assert.deepEqual(failed.map((e) => e.outcome), ["timeout", "aborted"]);
    assert.equal(failed[0].error, timedOut);
    assert.equal(failed[1].error, reason);
    assert.equal(failed[1].kind, "exclusive");
    await release(holder);
  });

  test("shared, permits, several names and a leadership say their kind; several names tell each name", T, async () => {
    const s = fresh(), p = fresh(), x = fresh(), y = fresh(), l = fresh();
    await release(await acquire(a, s, { shared: true }));
    await release(await acquire(a, p, { permits: 3 }));
    const both = await acquire(a, [x, y]);
    await release(both);
    await release(await campaign(a, l));
    const kinds = (name: string) => of(name).map((e) => `${e.type}/${e.kind}`);
    assert.deepEqual(kinds(s), ["acquired/shared", "released/shared"]);
    assert.deepEqual(kinds(p), ["acquired/permit", "released/permit"]);
    assert.deepEqual(kinds(x), ["acquired/exclusive", "released/exclusive"]);
    assert.deepEqual(kinds(y), ["acquired/exclusive", "released/exclusive"]);
    assert.deepEqual(kinds(l), ["acquired/leader", "released/leader"]);
    assert.deepEqual(of(y).map((e) => (e as { fence: number }).fence), [both.fences[1], both.fences[1]]);
  });

  test("a permit freed hands over to the waiter; resume tells the new process", T, async () => {
    const name = fresh();
    const p1 = await acquire(a, name, { permits: 1 });
    // A claim window the busiest machine meets: the grant is taken from the release's message, not by a re-check.
    const waiting = acquire(b, name, { permits: 1, waitMs: 10_000, claimMs: 5_000 });
    await inQueue("b", name);
    await release(p1);
    const p2 = await waiting;
    await until("handed-over", () => types(name).includes("a:handed-over"));
    const acq = of(name).find((e) => e.type === "acquired" && e.client === "b") as Extract<
      LeaseEvent,
      { type: "acquired" }
    >;
    assert.equal(acq.kind, "permit");
    assert.equal(acq.handedOff, true);
    const token = p2.token;
    const moved = await resume(a, token);
    assert.deepEqual(
      of(name).filter((e) => e.type === "resumed").map((e) => [e.client, (e as { fence: number }).fence]),
      [
        ["a", p2.fence],
      ],
    );
    await release(moved);
  });

  /**
   * A waiter that is subscribed (so a handoff to it counts as delivered) but never claims: a raw queue entry of
   * `kind` ahead of everyone (score 1), with a 200 ms claim window. Returns its client.
   */
  async function ghostWaiter(name: string, kind: string, id: string): Promise<Client> {
    const ghost = await srv.client();
    const cid = `ghost${id}client`;
    await ghost.subscribe(`redlease:{${name}}:w:${cid}`, () => {});
    await a.zAdd(`redlease:{${name}}:q`, { score: 1, value: `${cid}|ghost${id}attempt|30000|200|${kind}|ghost-owner` });
    return ghost;
  }
  const passedOn = (name: string) => of(name).filter((e) => e.type === "passed-on").map((e) => [e.client, e.kind]);
  const acquiredBy = (name: string, client: string) =>
    of(name).find((e) => e.type === "acquired" && e.client === client) as Extract<LeaseEvent, { type: "acquired" }>;

  test("a grant its waiter never claims is passed on: the waiter that passes it on tells it", T, async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const ghost = await ghostWaiter(name, "x", "0");
    const waiting = acquire(b, name, { waitMs: 10_000, claimMs: 300 });
    await inQueue("b", name, 2);
    await release(holder); // handed to the ghost, which never claims it
    const lease = await waiting;
    assert.deepEqual(passedOn(name), [["b", "exclusive"]]);
    assert.equal(acquiredBy(name, "b").handedOff, false, "taken by its own call, after passing the ghost's grant on");
    await release(lease);
    await ghost.unsubscribe();
  });

  test("permits: a permit its waiter never claims is passed on by the waiter behind, which tells it", T, async () => {
    const name = fresh();
    const holder = await acquire(a, name, { permits: 1 });
    const ghost = await ghostWaiter(name, "p1", "p");
    const waiting = acquire(b, name, { permits: 1, waitMs: 10_000, claimMs: 300 });
    await inQueue("b", name, 2);
    // The ghost is granted the permit (its only hold: the holder set would otherwise expire with its claim window,
    // and with it what tells that it lapsed unclaimed); b waits behind it until the grant lapses.
    await release(holder);
    const lease = await waiting;
    assert.deepEqual(passedOn(name), [["b", "permit"]]);
    assert.equal(acquiredBy(name, "b").handedOff, false, "taken by its own call, after passing the ghost's grant on");
    await release(lease);
    await ghost.unsubscribe();
  });

  test("shared: a shared grant its waiter never claims is passed on by the shared waiter behind", T, async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const ghost = await ghostWaiter(name, "s", "s");
    // An exclusive waiter behind the ghost waits for its shared grant to end, and b (shared) waits behind it. c
    // re-checks rarely (a 5 s heartbeat), so b's heartbeat (300 ms) is the one that finds the ghost's grant lapsed.
    const c = await srv.client();
    configure(c, { onEvent: (e) => void seen.push({ ...e, client: "c" }) });
    const writer = acquire(c, name, { waitMs: 20_000, claimMs: 5_000 });
    await inQueue("c", name, 2);
    const waiting = acquire(b, name, { shared: true, waitMs: 20_000, claimMs: 300 });
    await inQueue("b", name, 3);
    await release(holder); // the ghost is granted a shared hold, which blocks c (and so b)
    // b's call passes the ghost's grant on: to c, the head of the queue (b's reply says it waits still).
    await until("passed on", () => passedOn(name).length > 0);
    const w = await writer;
    await release(w);
    const lease = await waiting;
    assert.deepEqual(passedOn(name), [["b", "shared"]]);
    assert.equal(acquiredBy(name, "c").handedOff, true, "c was granted the lease by b's call");
    await release(lease);
    await ghost.unsubscribe();
  });

  test("shared: an exclusive grant its waiter never claims is passed on by a shared waiter", T, async () => {
    const name = fresh();
    const holder = await acquire(a, name);
    const ghost = await ghostWaiter(name, "x", "x");
    const waiting = acquire(b, name, { shared: true, waitMs: 10_000, claimMs: 300 });
    await inQueue("b", name, 2);
    await release(holder); // handed to the ghost, which never claims it
    const lease = await waiting;
    assert.deepEqual(passedOn(name), [["b", "shared"]]);
    assert.equal(acquiredBy(name, "b").handedOff, false);
    await release(lease);
    await ghost.unsubscribe();
  });

  test("permits: a claimed permit that runs out (a dead holder) is not passed on", T, async () => {
    const name = fresh();
    const keep = await acquire(a, name, { permits: 2 }); // keeps the holder set alive: purge drops the dead one
    const other = await acquire(a, name, { permits: 2 });
    const c = await srv.client();
    configure(c, { onEvent: (e) => void seen.push({ ...e, client: "c" }) });
    // c is handed a permit and claims it, then dies: its lease is fixed (no renewals) and never released.
    const dying = acquire(c, name, { permits: 2, waitMs: 10_000, leaseMs: 1_500, claimMs: 10_000 });
    await inQueue("c", name);
    await release(other);
    const dead = await dying;
    assert.equal(acquiredBy(name, "c").handedOff, true);
    const records = `redlease:{${name}}:d`;
    let claimed = false;
    for (; !claimed && performance.now() < dead.expiresAt; await sleep(20)) {
      claimed = /^\d+:[^:]*:\d+::p2$/.test(String(await a.hGet(records, dead.owner)));
    }
    assert.ok(claimed, "c claimed its permit before it ran out");
    const waiting = acquire(b, name, { permits: 2, waitMs: 10_000, claimMs: 300 });
    await until("c lost", () => types(name).includes("c:lost"));
    const lease = await waiting;
    assert.equal(acquiredBy(name, "b").handedOff, false, "taken by its own call once the dead permit ran out");
    assert.deepEqual(passedOn(name), [], "a claimed hold that expires is not a pass-on");
    await release(lease);
    await release(keep);
  });

  test(
    "under the chaos proxy: renewed, renewal-failed (a reset), renewed again, then lost (blackholed)",
    T,
    async () => {
      const proxy = await startProxy({ port: srv.port });
      const c = createClient({ url: `redis://127.0.0.1:${proxy.port}`, socket: { reconnectStrategy: 20 } });
      c.on("error", () => {});
      try {
        await c.connect();
        const got: LeaseEvent[] = [];
        configure(c, { onEvent: (e) => void got.push(e) });
        // A TTL whose renewal retries (after the reset) outlast a reconnect on a busy machine.
        const lease = await acquire(c, fresh(), { watchdogMs: 1_500 });
        await until("a renewal", () => got.some((e) => e.type === "renewed"));
        const renewed = got.find((e) => e.type === "renewed") as Extract<LeaseEvent, { type: "renewed" }>;
        assert.equal(renewed.ttlMs, 1_500);
        assert.equal(renewed.fence, lease.fence);
        await proxy.resetNext({ kind: "command" }); // the next renewal's connection is reset under it
        await until("a failed renewal", () => got.some((e) => e.type === "renewal-failed"));
        const failed = got.find((e) => e.type === "renewal-failed") as Extract<LeaseEvent, { type: "renewal-failed" }>;
        assert.ok(failed.leftMs > 0 && failed.leftMs <= 1_500, `leftMs ${failed.leftMs}`);
        assert.ok(failed.error instanceof Error);
        const at = got.indexOf(failed);
        await until("renewed after the failure", () => got.slice(at).some((e) => e.type === "renewed"));
        assert.equal(lease.signal.aborted, false, "a renewal retried in time keeps the lease");
        proxy.blackhole({ kind: "command" });
        await until("lost", () => got.some((e) => e.type === "lost"), 5_000);
        const lost = got.find((e) => e.type === "lost") as Extract<LeaseEvent, { type: "lost" }>;
        assert.equal(lost.reason, "unreachable");
        assert.ok(lost.error instanceof LeaseLostError);
        assert.equal(lease.signal.reason, lost.error, "the reason the signal aborted with");
        assert.ok(lost.heldMs >= 500, `held ${lost.heldMs} ms`);
        proxy.heal();
        await release(lease).catch(() => {});
        assert.equal(got.filter((e) => e.type === "released").length, 0, "a lost hold told its end already");
        assert.equal(got.filter((e) => e.type === "lost").length, 1, "lost once");
      } finally {
        await c.disconnect().catch(() => {});
        await proxy.close();
      }
    },
  );

  test(
    "a fixed lease that runs out is lost (expired); a handler that throws or rejects changes nothing",
    T,
    async () => {
      const c = await srv.client();
      const got: string[] = [];
      configure(c, {
        onEvent: (e) => {
          got.push(e.type);
          if (e.type === "acquired") throw new Error("handler bug");
          if (e.type === "lost") return Promise.reject(new Error("async handler bug")) as never;
        },
      });
      // (500 ms: a 100 ms lease whose grant came back late on a loaded CI machine was queued and claimed first.)
      const lease = await acquire(c, fresh(), { leaseMs: 500 });
      await until("lost", () => got.includes("lost"));
      assert.ok(lease.signal.reason instanceof LeaseLostError);
      assert.equal((lease.signal.reason as LeaseLostError).why, "expired");
      assert.deepEqual(got, ["acquired", "lost"]);
    },
  );

  test(
    "a lease undone inside acquire, or acquired before the handler, tells no end: only what was told begins",
    T,
    async () => {
      const c = await srv.client();
      const got: LeaseEvent[] = [];
      const earlier = await acquire(c, fresh());
      configure(c, { onEvent: (e) => void got.push(e) });
      // No replica: the grant is undone (released) inside acquire, which rejects with ReplicationError.
      const name = fresh();
      const e = await acquire(c, name, { replicas: 1, replicaTimeoutMs: 10 }).catch((x) => x);
      assert.equal((e as Error).name, "ReplicationError");
      await release(earlier);
      assert.deepEqual(got.map((x) => `${x.type}:${x.name}`), [`acquire-failed:${name}`]);
      // A hold got before the handler, re-entered after it: new to the handler, and its end told once, whichever
      // handle goes last.
      configure(c, { onEvent: null });
      const old = await acquire(c, fresh());
      configure(c, { onEvent: (e) => void got.push(e) });
      got.length = 0;
      const again = await acquire(c, old.name, { owner: old });
      await release(old);
      await release(again);
      const told = got.map((x) =>
        x.type === "acquired" ? `acquired:${x.reentered}` : x.type === "released" ? `released:${x.final}` : x.type
      );
      assert.deepEqual(told, ["acquired:false", "released:true"]);
    },
  );

  test("two resumes of one token at once join one hold: its start is told once, and its end once", T, async () => {
    const c = await srv.client();
    const got: LeaseEvent[] = [];
    configure(c, { onEvent: (e) => void got.push(e) });
    const held = await acquire(a, fresh(), { leaseMs: 10_000 });
    const [r1, r2] = await Promise.all([resume(c, held.token), resume(c, held.token)]);
    await release(r1);
    await release(r2);
    const told = got.map((x) => (x.type === "released" ? `released:${x.final}` : x.type));
    assert.deepEqual(told, ["resumed", "released:false", "released:true"]);
  });

  test("a hold lost while acquire or resume waits for its replicas tells its end once it is told of", T, async () => {
    const replica = await startRedis(["--replicaof", "127.0.0.1", String(srv.port)]);
    try {
      const rc = await replica.client();
      for (let up = false; !up; await sleep(20)) up = /master_link_status:up/.test(await rc.info("replication"));
      const c = await srv.client();
      const got: LeaseEvent[] = [];
      configure(c, { onEvent: (e) => void got.push(e) });
      await release(await acquire(c, fresh(), { replicas: 1 }));
      // The replica answers WAIT only after the fixed lease (150 ms) has run out here: acquire returns a lost lease.
      replica.pause();
      setTimeout(() => replica.resume(), 400);
      const lease = await acquire(c, fresh(), { leaseMs: 150, replicas: 1, replicaTimeoutMs: 5_000 });
      assert.ok(lease.signal.aborted);
      await release(lease);
      const d = await srv.client();
      const moved: LeaseEvent[] = [];
      configure(d, { onEvent: (e) => void moved.push(e) });
      const other = await acquire(a, fresh(), { leaseMs: 10_000 });
      replica.pause();
      setTimeout(() => replica.resume(), 400);
      const taken = await resume(d, other.token, { leaseMs: 150, replicas: 1, replicaTimeoutMs: 5_000 });
      assert.ok(taken.signal.aborted);
      await release(taken);
      await release(other);
      const told = (list: LeaseEvent[]) => list.map((x) => (x.type === "lost" ? `lost:${x.reason}` : x.type));
      assert.deepEqual(told(got), ["acquired", "released", "acquired", "lost:expired"]);
      assert.deepEqual(told(moved), ["resumed", "lost:expired"]);
    } finally {
      replica.resume();
      await replica.stop();
    }
  });

  test("a handler put in another's place hears nothing of the holds the other was told of", T, async () => {
    const c = await srv.client();
    const first: string[] = [], second: string[] = [];
    configure(c, { onEvent: (e) => void first.push(e.type) });
    const lease = await acquire(c, fresh());
    configure(c, { onEvent: (e) => void second.push(e.type) });
    const again = await acquire(c, lease.name, { owner: lease });
    await release(lease);
    await release(again);
    // The second handler was told of the re-entry as a start (new to it), and hears its end; the first hears no
    // end it cannot count, the second none it did not see begin.
    assert.deepEqual(first, ["acquired"]);
    assert.deepEqual(second, ["acquired", "released"]);
  });

  test("Redlock: a group's events go to its first client's handler", T, async () => {
    const servers = await Promise.all([startRedis(), startRedis()]);
    try {
      const got: LeaseEvent[] = [];
      const c0 = await srv.client();
      configure(c0, { onEvent: (e) => void got.push(e) });
      const group = redlock([c0, await servers[0].client(), await servers[1].client()]);
      const name = fresh();
      const lease = await acquire(group, name, { shared: true });
      const busy = await acquire(c0, name, { waitMs: 0 }).catch((e) => e);
      assert.ok(busy instanceof LockTimeoutError);
      await release(lease);
      assert.deepEqual(got.map((e) => `${e.type}/${e.kind}`), [
        "acquired/shared",
        "acquire-failed/exclusive",
        "released/shared",
      ]);
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
  });
});
