// The lock delay (acquire's `lockDelayMs`, as Chubby's and Consul's): a hold that expires without a release keeps
// its place (the lease, a share or a permit) from everyone until the delay has passed; a release ends it at once.
// Leases of 150 ms and delays of 400 ms: the bounds below leave 100 ms or more of slack either side.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  acquire,
  campaign,
  extend,
  forceUnlock,
  inspect,
  type Lease,
  LeaseKindError,
  LockTimeoutError,
  observe,
  release,
} from "../mod.ts";
import { redlock } from "../src/redlock.ts";
import { glide } from "../src/adapters/glide.ts";
import type { RedisLike } from "../src/_client.ts";
import { type Client, queued, type RedisServer, sleep, startRedis } from "./_redis.ts";
import { glideClient } from "./_glide.ts";

const LEASE = 150;
// Long enough that the checks made inside the delay (several round trips after the hold expired) fit in it on a
// machine busy running the suite's other files at the same time.
const DELAY = 1_200;
// Redlock's per-master bound for these short leases: its default (LEASE / 200, at least 5 ms) is missed on a loaded
// machine, which these tests are not about.
const NODE_MS = 50;
let n = 0;
const fresh = () => `delay-${++n}-${Math.random().toString(36).slice(2)}`;

/** Rejects with LockTimeoutError: one attempt, and its `remainingMs`. */
async function refused(p: Promise<Lease>): Promise<number> {
  const e = await p.then((l) => l, (e) => e);
  assert.ok(e instanceof LockTimeoutError, `expected LockTimeoutError, got ${e}`);
  return e.remainingMs;
}

/** Wait until `lease` has expired: its signal aborted (the local deadline), and Redis (read on `on`) agrees. */
async function expired(lease: Lease, on: RedisLike): Promise<void> {
  while (!lease.signal.aborted) await sleep(10);
  for (let i = 0; i < 500; i++) {
    if (!(await inspect(on, lease.name)).owners.some((o) => o.owner === lease.owner)) return;
    await sleep(5);
  }
  assert.fail(`${lease.name} is still held in Redis after its local deadline`);
}

/** A vanished holder's lease is granted to nobody until the delay has passed (`c` reads what Redis holds). */
async function vanishedHolder(a: RedisLike, b: RedisLike, c: RedisLike): Promise<void> {
  const name = fresh();
  const t0 = performance.now();
  const gone = await acquire(a, name, { leaseMs: LEASE, lockDelayMs: DELAY, owner: "svc" });
  await expired(gone, c);
  // Another client, and the holder's own owner (it may not re-enter a hold it lost): busy for what is left.
  const left = await refused(acquire(b, name, { waitMs: 0 }));
  assert.ok(left > 0 && left <= DELAY, `${left} ms of the delay left`);
  await refused(acquire(a, name, { waitMs: 0, owner: "svc" }));
  await refused(acquire(b, name, { shared: true, waitMs: 0 }));
  // For the kind checks it counts as held.
  await assert.rejects(acquire(b, name, { permits: 2, waitMs: 0 }), LeaseKindError);
  const info = await inspect(c, name);
  assert.equal(info.held, false);
  assert.deepEqual(info.owners, []);
  assert.equal(info.delayed.length, 1);
  assert.equal(info.delayed[0].owner, gone.owner);
  assert.equal(info.delayed[0].lockDelayMs, DELAY);
  assert.ok(info.delayMs > 0 && info.delayMs <= DELAY, String(info.delayMs));
  // Its holder can neither release (nothing changes) nor renew it.
  assert.equal(await release(gone), false);
  assert.equal((await inspect(c, name)).delayed.length, 1);
  // A waiter is granted once the delay ends (learning it from the busy time), not before.
  const next = await acquire(b, name, { waitMs: 5_000 });
  const took = performance.now() - t0;
  assert.ok(took >= LEASE + DELAY - 20, `granted ${took} ms after the first grant`);
  assert.ok(took < LEASE + DELAY + 3_000, `granted ${took} ms after the first grant`);
  assert.ok(next.fence > gone.fence);
  const now = await inspect(c, name);
  assert.deepEqual([now.held, now.delayed, now.delayMs], [true, [], 0]);
  await release(next);
}

describe("lock delay", () => {
  let srv: RedisServer;
  let a: Client;
  let b: Client;
  let c: Client;
  const clients = {} as { a: Client; b: Client; c: Client };
  before(async () => {
    srv = await startRedis();
    [a, b, c] = [await srv.client(), await srv.client(), await srv.client()];
    Object.assign(clients, { a, b, c });
  });
  after(async () => {
    await srv.stop();
  });

  test("off by default: an expired lease is granted again at once", async () => {
    const name = fresh();
    await expired(await acquire(a, name, { leaseMs: LEASE }), c);
    await release(await acquire(b, name, { waitMs: 0 }));
  });

  test("off (or 0), the uncontended acquire sends and stores what it did before the option; on, it sends the delay", async () => {
    // The slow log with a 0 µs threshold lists every command with its arguments.
    await a.sendCommand(["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    try {
      const sent = async (options: { lockDelayMs?: number }) => {
        const name = fresh();
        await a.sendCommand(["SLOWLOG", "RESET"]);
        const lease = await acquire(b, name, { leaseMs: 5_000, ...options });
        const log = await a.sendCommand(["SLOWLOG", "GET", "100"]) as unknown[][];
        const call = log.map((e) => e[3] as string[]).find((args) =>
          /^EVAL/i.test(args[0]) && args.includes(lease.owner)
        );
        const record = await a.get(`redlease:{${name}}`);
        await release(lease);
        assert.ok(call, "the acquire script call is in the slow log");
        // EVALSHA sha numkeys, the 4 keys, then the arguments.
        return { args: call.slice(7), record };
      };
      const off = await sent({});
      assert.equal(off.args.length, 3, `owner, ms, attempt: ${off.args}`);
      assert.match(off.record ?? "", /^\d+:[^:]+:1::/);
      const zero = await sent({ lockDelayMs: 0 });
      assert.equal(zero.args.length, 3);
      const on = await sent({ lockDelayMs: DELAY });
      assert.deepEqual(on.args.slice(3), ["", "30000", "PUBLISH", String(DELAY)]);
      assert.match(on.record ?? "", new RegExp(`^\\d+:[^:]+:1:d${DELAY}:`));
    } finally {
      await a.sendCommand(["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
    }
  });

  test("off, admitting a set waiter reads no hold expiry for an owner without a hold (as before the option)", async () => {
    const name = fresh();
    const holder = await acquire(a, name, { leaseMs: 5_000 });
    // A waiter's queue entry (a shared hold for owner "w"), its client listening on its channel.
    const listener = await srv.client();
    await listener.subscribe(`redlease:{${name}}:w:cid`, () => {});
    await a.sendCommand(["ZADD", `redlease:{${name}}:q`, "1", "cid|att|5000|1000|s|w"]);
    await a.sendCommand(["CONFIG", "RESETSTAT"]);
    await release(holder);
    const stats = await a.sendCommand(["INFO", "commandstats"]) as string;
    assert.doesNotMatch(stats, /cmdstat_zscore:/, stats);
    assert.deepEqual((await inspect(a, name)).owners.map((o) => o.owner), ["w"]);
    await listener.unsubscribe();
  });

  // With node-redis clients, and again with Valkey GLIDE's (redlease/glide) as the holder and the waiter.
  for (const via of ["node-redis", "GLIDE"] as const) {
    test(`${via === "GLIDE" ? "GLIDE: " : ""}exclusive: a vanished holder's lease is granted to nobody until the delay has passed`, async () => {
      const glides = via === "GLIDE" ? [await glideClient(srv.url), await glideClient(srv.url)] : [];
      try {
        const [a, b] = via === "GLIDE" ? glides.map((g) => glide(g)) : [clients.a, clients.b];
        await vanishedHolder(a, b, clients.c);
      } finally {
        for (const g of glides) g.close();
      }
    });
  }

  test("a release ends the hold at once: no delay", async () => {
    const name = fresh();
    const lease = await acquire(a, name, { leaseMs: 5_000, lockDelayMs: 10_000 });
    assert.equal((await inspect(c, name)).owners[0].lockDelayMs, 10_000);
    await release(lease);
    await release(await acquire(b, name, { waitMs: 0 }));
    // A watchdog lease too (the renewal keeps the delay with it), and a re-entry keeps its hold's delay.
    const w = await acquire(a, name, { watchdogMs: 300, lockDelayMs: 10_000 });
    const again = await acquire(a, name, { owner: w, watchdogMs: 300, lockDelayMs: 50 });
    await sleep(400);
    const info = await inspect(c, name);
    assert.deepEqual(info.owners.map((o) => [o.holds, o.lockDelayMs]), [[2, 10_000]]);
    assert.ok(info.remainingMs <= 300, `its remaining time excludes the delay: ${info.remainingMs}`);
    await release(again);
    await release(w);
    await release(await acquire(b, name, { waitMs: 0 }));
  });

  test("waiters queued during the delay keep their places and are granted in order once it ends", async () => {
    const name = fresh();
    const t0 = performance.now();
    const gone = await acquire(a, name, { leaseMs: LEASE, lockDelayMs: DELAY });
    await expired(gone, c);
    const order: string[] = [];
    const waiting: Promise<void>[] = [];
    for (const [label, client] of [["b1", b], ["c1", c], ["b2", b]] as const) {
      waiting.push(
        acquire(client, name, { waitMs: 5_000 }).then(async (l) => {
          order.push(label);
          const took = performance.now() - t0;
          if (order.length === 1) assert.ok(took >= LEASE + DELAY - 20, `granted ${took} ms after the first grant`);
          await sleep(20);
          await release(l);
        }),
      );
      await queued(a, name, waiting.length, () => order.length); // fix the queue order
    }
    assert.equal((await inspect(a, name)).waiters, 3);
    await Promise.all(waiting);
    assert.deepEqual(order, ["b1", "c1", "b2"]);
  });

  test("a lease handed to a waiter carries the waiter's delay", async () => {
    const name = fresh();
    const first = await acquire(a, name, { leaseMs: 5_000 });
    const waiting = acquire(b, name, { leaseMs: LEASE, lockDelayMs: DELAY, waitMs: 5_000 });
    await queued(c, name, 1);
    await release(first);
    const handed = await waiting;
    await expired(handed, c);
    const left = await refused(acquire(c, name, { waitMs: 0 }));
    assert.ok(left > 0 && left <= DELAY, String(left));
    await release(await acquire(c, name, { waitMs: 5_000 }));
  });

  test("a lease handed to a waiter with a delay can be re-entered by its owner before it is claimed", async () => {
    const name = fresh();
    const first = await acquire(a, name, { leaseMs: 5_000 });
    const waiting = acquire(b, name, { leaseMs: 5_000, lockDelayMs: DELAY, waitMs: 5_000, owner: "w" });
    await queued(c, name, 1);
    await release(first);
    const handed = await waiting;
    // (Its claim may still be on its way: the re-entry claims it, as without a delay.)
    const again = await acquire(b, name, { waitMs: 0, owner: "w" });
    assert.equal(again.fence, handed.fence);
    await release(again);
    await release(handed);
    await release(await acquire(c, name, { waitMs: 0 }));
  });

  test("forceUnlock ends a delay", async () => {
    const name = fresh();
    await expired(await acquire(a, name, { leaseMs: LEASE, lockDelayMs: 60_000 }), c);
    await refused(acquire(b, name, { waitMs: 0 }));
    assert.equal(await forceUnlock(c, name), true);
    await release(await acquire(b, name, { waitMs: 0 }));
  });

  test("shared: a vanished reader keeps writers out for the delay; readers may still join", async () => {
    const name = fresh();
    const t0 = performance.now();
    const gone = await acquire(a, name, { shared: true, leaseMs: LEASE, lockDelayMs: DELAY, owner: "r" });
    await expired(gone, c);
    const left = await refused(acquire(b, name, { waitMs: 0 }));
    // (A set hold's time is rounded up to the next ms: at most one more than the delay.)
    assert.ok(left > 0 && left <= DELAY + 1, String(left));
    // Its owner's hold is dead for it (no re-entry); another reader is compatible with the one that vanished.
    await refused(acquire(a, name, { shared: true, waitMs: 0, owner: "r" }));
    const reader = await acquire(c, name, { shared: true, waitMs: 0 });
    const info = await inspect(c, name);
    assert.deepEqual([info.kind, info.owners.map((o) => o.owner)], ["shared", [reader.owner]]);
    assert.deepEqual(info.delayed.map((o) => [o.owner, o.kind]), [[gone.owner, "shared"]]);
    await release(reader);
    const writer = await acquire(b, name, { waitMs: 5_000 });
    assert.ok(performance.now() - t0 >= LEASE + DELAY - 20);
    await release(writer);
    // Released, a reader's hold leaves no delay.
    await release(await acquire(a, name, { shared: true, lockDelayMs: 60_000 }));
    await release(await acquire(b, name, { waitMs: 0 }));
  });

  test("permits: a vanished holder's permit is taken until the delay has passed", async () => {
    const name = fresh();
    const t0 = performance.now();
    const gone = await acquire(a, name, { permits: 2, leaseMs: LEASE, lockDelayMs: DELAY });
    const live = await acquire(b, name, { permits: 2, leaseMs: 10_000 });
    await expired(gone, c);
    const left = await refused(acquire(c, name, { permits: 2, waitMs: 0 }));
    assert.ok(left > 0 && left <= DELAY + 1, String(left));
    const info = await inspect(c, name);
    assert.deepEqual(info.owners.map((o) => o.owner), [live.owner]);
    assert.deepEqual(info.delayed.map((o) => [o.owner, o.kind]), [[gone.owner, "permit"]]);
    const third = await acquire(c, name, { permits: 2, waitMs: 5_000 });
    assert.ok(performance.now() - t0 >= LEASE + DELAY - 20);
    await release(third);
    // A queued permit waiter's own hold carries its delay too.
    const held = await acquire(a, name, { permits: 2, leaseMs: 10_000 });
    const waiting = acquire(c, name, { permits: 2, leaseMs: LEASE, lockDelayMs: DELAY, waitMs: 5_000 });
    await queued(a, name, 1);
    await release(held);
    const handed = await waiting;
    await expired(handed, c);
    await refused(acquire(a, name, { permits: 2, waitMs: 0 }));
    assert.deepEqual((await inspect(c, name)).delayed.map((o) => o.owner), [handed.owner]);
    await release(live);
  });

  test("several names: each name is delayed", async () => {
    const [x, y] = [fresh(), fresh()];
    const gone = await acquire(a, [x, y], { leaseMs: LEASE, lockDelayMs: DELAY });
    await expired(gone, c);
    await refused(acquire(b, y, { waitMs: 0 }));
    await refused(acquire(b, x, { waitMs: 0 }));
    await release(await acquire(b, [x, y], { waitMs: 5_000 }));
  });

  test("election: a leader that vanished leads no more, and nobody wins until the delay ends", async () => {
    const name = fresh();
    const t0 = performance.now();
    const gone = await campaign(a, name, { leaseMs: LEASE, lockDelayMs: DELAY });
    await expired(gone, c);
    const it = observe(c, name);
    const state = (await it.next()).value;
    await it.return?.();
    assert.equal(state?.leader, undefined);
    await refused(campaign(b, name, { waitMs: 0 }));
    const next = await campaign(b, name, { waitMs: 5_000 });
    assert.ok(performance.now() - t0 >= LEASE + DELAY - 20);
    await release(next);
  });

  test("lockDelayMs that is not an integer from 0 is refused before any command", async () => {
    const name = fresh();
    for (const [v, Err] of [[-1, RangeError], [1.5, RangeError], [NaN, RangeError], ["100", TypeError]] as const) {
      await assert.rejects(
        acquire(a, name, { lockDelayMs: v as number }),
        (e: Error) => e instanceof Err && /'lockDelayMs' must be an integer from 0/.test(e.message),
      );
    }
    assert.equal((await inspect(c, name)).fence, 0, "nothing was written");
  });
});

describe("lock delay with Redlock", () => {
  let servers: RedisServer[];
  let clients: Client[];
  before(async () => {
    servers = await Promise.all([0, 1, 2].map(() => startRedis()));
    clients = await Promise.all(servers.map((s) => s.client()));
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  test("a vanished holder's lease is granted by no majority until the delay has passed", async () => {
    const name = fresh();
    const group = redlock(clients);
    const t0 = performance.now();
    const gone = await acquire(group, name, { leaseMs: LEASE, lockDelayMs: DELAY, nodeTimeoutMs: NODE_MS });
    // (Each master expires the hold on its own clock, a few ms apart: wait for each.)
    for (const c of clients) await expired(gone, c);
    await refused(acquire(group, name, { waitMs: 0 }));
    for (const c of clients) assert.equal((await inspect(c, name)).delayed.length, 1);
    const next = await acquire(group, name, { waitMs: 5_000 });
    assert.ok(performance.now() - t0 >= LEASE + DELAY - 20);
    await release(next);
  });

  test("a hold re-established on masters that lost it keeps its delay: no majority of them grants it meanwhile", async () => {
    const name = fresh();
    const group = redlock(clients);
    const t0 = performance.now();
    const lease = await acquire(group, name, { leaseMs: LEASE, lockDelayMs: DELAY, nodeTimeoutMs: NODE_MS });
    // Two masters restart empty, one after the other; the renewal (here extend()) re-establishes the hold on them.
    await clients[1].sendCommand(["FLUSHALL"]);
    await clients[2].sendCommand(["FLUSHALL"]);
    assert.equal(await extend(lease, LEASE), true);
    // (Each master expires the hold on its own clock, a few ms apart: wait for each.)
    for (const c of clients) await expired(lease, c);
    for (const c of clients) assert.equal((await inspect(c, name)).delayed.length, 1);
    await refused(acquire(group, name, { waitMs: 0 }));
    const next = await acquire(group, name, { waitMs: 5_000 });
    assert.ok(performance.now() - t0 >= LEASE + DELAY - 20);
    await release(next);
  });
});
