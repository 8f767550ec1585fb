// The `onResubscribed` hook of the ioredis, Bun and GLIDE adapters: when the waiters' subscriber connection drops and
// comes back, the channels are subscribed again (by ioredis and GLIDE themselves, by the adapter for Bun) and the
// hook fires, so that a waiter whose handoff message was lost re-checks at once instead of at its next heartbeat. The
// server kills the subscriber with CLIENT KILL TYPE pubsub. ioredis and GLIDE run on every runtime; Bun's client on
// Bun only; the ioredis Cluster case on Node only (a cluster takes seconds to start).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Cluster as IORedisCluster, Redis as IORedis, type RedisOptions } from "ioredis";
import { acquire, inspect, release } from "../mod.ts";
import type { Driver } from "../src/driver.ts";
import { ioredis } from "../src/adapters/ioredis.ts";
import { bunRedis, type BunRedisClient } from "../src/adapters/bun.ts";
import { glide } from "../src/adapters/glide.ts";
import { glideClient } from "./_glide.ts";
import { type Client, type RedisServer, runtimeName, sleep, startRedis } from "./_redis.ts";

async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> {
  const end = performance.now() + ms;
  while (!(await cond())) {
    if (performance.now() > end) assert.fail(`timed out waiting until ${what}`);
    await sleep(20);
  }
}

const fresh = (what: string) => `resub-${what}-${Math.random().toString(36).slice(2, 10)}`;

/** Counts the driver's hook calls. */
function hook(d: Driver): { readonly count: number } {
  const seen = { count: 0 };
  assert.equal(typeof d.onResubscribed, "function");
  d.onResubscribed!(() => seen.count++);
  return seen;
}

describe("adapters: onResubscribed", () => {
  let srv: RedisServer;
  let admin: Client;
  before(async () => {
    srv = await startRedis();
    admin = await srv.client();
  });
  after(() => srv.stop());

  const killSubscribers = async () => Number(await admin.sendCommand(["CLIENT", "KILL", "TYPE", "pubsub"]));
  const subscribers = async (channel: string) =>
    Number((await admin.sendCommand(["PUBSUB", "NUMSUB", channel]) as unknown[])[1]);

  /**
   * Two channels (one with two listeners) survive two drops of the subscriber connection: the hook fires once per
   * drop (not on the first connect), and each listener then gets every message exactly once.
   */
  async function survivesDrops(d: Driver): Promise<void> {
    const seen = hook(d);
    const got: string[] = [];
    const [a, b] = [fresh("a"), fresh("b")];
    const listeners = [[a, "a1"], [a, "a2"], [b, "b1"]].map(([ch, id]) => ({
      ch,
      fn: (m: string) => void got.push(`${id}:${m}`),
    }));
    for (const l of listeners) await d.subscribe!(l.ch, l.fn);
    await admin.publish(a, "0");
    await until("the first message is delivered", () => got.length === 2);
    await sleep(100);
    assert.equal(seen.count, 0, "the first connect is not a resubscription");
    for (let round = 1; round <= 2; round++) {
      assert.ok(await killSubscribers() >= 1, "the subscriber connection was killed");
      await until(`the hook fired (drop ${round})`, () => seen.count === round);
      assert.equal(await subscribers(a), 1, "resubscribed to a");
      assert.equal(await subscribers(b), 1, "resubscribed to b");
      got.length = 0;
      await admin.publish(a, `${round}`);
      await admin.publish(b, `${round}`);
      await until("the messages are delivered", () => got.length >= 3);
      await sleep(50);
      assert.deepEqual(got.sort(), [`a1:${round}`, `a2:${round}`, `b1:${round}`]);
    }
    for (const l of listeners) await d.unsubscribe!(l.ch, l.fn);
    await until("unsubscribed", async () => (await subscribers(a)) + (await subscribers(b)) === 0);
    assert.equal(seen.count, 2);
  }

  const ioredisClient = async (options: RedisOptions = {}) => {
    const c = new IORedis(srv.url, { lazyConnect: true, ...options });
    c.on("error", () => {});
    if (c.status === "wait") await c.connect();
    else if (c.status !== "ready") await new Promise((r) => c.once("ready", r));
    return c;
  };

  for (const lazyConnect of [false, true]) {
    test(`ioredis (lazyConnect: ${lazyConnect}): the hook fires after each reconnection`, async () => {
      const c = await ioredisClient({ lazyConnect });
      try {
        await survivesDrops(ioredis(c));
      } finally {
        await c.quit();
      }
    });
  }

  test("ioredis with autoResubscribe: false: the hook never fires", async () => {
    const c = await ioredisClient({ autoResubscribe: false, retryStrategy: () => 10 });
    try {
      const d = ioredis(c);
      const seen = hook(d);
      const ch = fresh("off");
      const l = () => {};
      await d.subscribe!(ch, l);
      await killSubscribers();
      await sleep(300);
      assert.equal(seen.count, 0);
      await d.unsubscribe!(ch, l);
    } finally {
      await c.quit();
    }
  });

  test("ioredis: a waiter whose handoff message was lost while reconnecting gets the lease on resubscription", async () => {
    const [h, w] = [await ioredisClient(), await ioredisClient({ retryStrategy: () => 300 })];
    try {
      const name = fresh("lease");
      const holder = await acquire(ioredis(h), name);
      // A 10 s heartbeat: only the hook can make the waiter re-check sooner.
      const waiting = acquire(ioredis(w), name, { waitMs: 15_000, claimMs: 10_000 });
      await until("the waiter is queued", async () => (await inspect(admin, name)).waiters === 1);
      assert.ok(await killSubscribers() >= 1);
      const t0 = performance.now();
      await release(holder); // published while nobody listens: the waiter's subscriber reconnects in 300 ms
      const next = await waiting;
      const took = performance.now() - t0;
      assert.ok(took < 3_000, `the waiter got the lease ${took} ms after the release`);
      await release(next);
    } finally {
      await Promise.all([h.quit(), w.quit()]);
    }
  });

  /** A waiter queued before its subscriber connection dropped is handed the lease by message once it is back. */
  async function handoffAfterDrop(x: Driver, y: Driver): Promise<void> {
    const name = fresh("handoff");
    const channels = async () => (await admin.sendCommand(["PUBSUB", "CHANNELS", "redlease:*"]) as string[]).length;
    const holder = await acquire(x, name);
    const waiting = acquire(y, name, { waitMs: 15_000, claimMs: 10_000 });
    await until("the waiter is queued", async () => (await inspect(admin, name)).waiters === 1);
    assert.ok(await killSubscribers() >= 1);
    await until("the waiter's channel is subscribed again", async () => (await channels()) === 1);
    const t0 = performance.now();
    await release(holder);
    const next = await waiting;
    const took = performance.now() - t0;
    assert.ok(took < 2_000, `handoff took ${took} ms (a lost subscription waits for the 10 s heartbeat)`);
    await release(next);
  }

  test("ioredis: a waiter is handed the lease by message after its subscriber reconnected", async () => {
    const [h, w] = [await ioredisClient(), await ioredisClient()];
    try {
      await handoffAfterDrop(ioredis(h), ioredis(w));
    } finally {
      await Promise.all([h.quit(), w.quit()]);
    }
  });

  // GLIDE reconnects and subscribes again by itself, telling no one: the adapter learns of it from CLIENT ID, asked
  // once a second while the client has waiters.
  test("glide: the hook fires after each reconnection, and the channels are subscribed again", async () => {
    const c = await glideClient(srv.url);
    try {
      await survivesDrops(glide(c));
    } finally {
      c.close();
    }
  });

  test("glide: a waiter is handed the lease by message after its connection was replaced", async () => {
    const [h, w] = [await glideClient(srv.url), await glideClient(srv.url)];
    try {
      await handoffAfterDrop(glide(h), glide(w));
    } finally {
      h.close();
      w.close();
    }
  });

  if (runtimeName() === "bun") {
    const bunClient = async () => {
      const { RedisClient } = (globalThis as unknown as {
        Bun: { RedisClient: new (url: string) => BunRedisClient & { connect(): Promise<void> } };
      }).Bun;
      const c = new RedisClient(srv.url);
      await c.connect();
      return c;
    };

    test("bun: a waiter is handed the lease by message after its subscriber reconnected", async () => {
      const [h, w] = [await bunClient(), await bunClient()];
      try {
        await handoffAfterDrop(bunRedis(h), bunRedis(w));
      } finally {
        h.close();
        w.close();
      }
    });

    test("bun: the adapter resubscribes after each reconnection, and the hook fires", async () => {
      const c = await bunClient();
      try {
        await survivesDrops(bunRedis(c));
        await until("the subscriber connection is closed", async () => {
          const list = String(await admin.sendCommand(["CLIENT", "LIST", "TYPE", "pubsub"]));
          return list.trim() === "";
        });
      } finally {
        c.close();
      }
    });
  }
});

if (runtimeName() === "node") {
  describe("adapters: onResubscribed on an ioredis Cluster", () => {
    test("ioredis Cluster with sharded pub/sub: the hook fires once the shard subscribers are back", async () => {
      const topo = await import("../harness/topology.ts");
      const cluster = await topo.startCluster({ masters: 3, replicasPerMaster: 0 });
      const seeds = cluster.masters().map((m) => ({ host: "127.0.0.1", port: m.port }));
      const c = new IORedisCluster(seeds, { shardedSubscribers: true });
      c.on("error", () => {});
      try {
        if (c.status !== "ready") await new Promise((r) => c.once("ready", r));
        const d = ioredis(c);
        const seen = hook(d);
        const ch = fresh("cluster");
        const owner = cluster.ownerOf(cluster.slotOf(ch)).port;
        const got: string[] = [];
        await d.subscribe!(ch, (m) => void got.push(m));
        await cluster.command(owner, "SPUBLISH", ch, "0");
        await until("the first message is delivered", () => got.length === 1);
        const before = seen.count; // ioredis also reports its first subscribers as ready
        assert.equal(await cluster.command(owner, "CLIENT", "KILL", "TYPE", "pubsub"), 1);
        await until("the hook fired", () => seen.count > before, 10_000);
        await until("resubscribed", async () => {
          const r = await cluster.command(owner, "PUBSUB", "SHARDNUMSUB", ch) as unknown[];
          return Number(r[1]) === 1;
        });
        await cluster.command(owner, "SPUBLISH", ch, "1");
        await until("the message after the drop is delivered", () => got.includes("1"));
      } finally {
        await c.quit().catch(() => {});
        await cluster.stop();
      }
    });
  });
}
