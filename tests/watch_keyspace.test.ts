// watch() and the queue: a waiter joining or leaving runs no command a script could tell a watcher by (for free), so
// where the operator enabled keyspace notifications for sorted sets (`notify-keyspace-events` with K and z) the watch
// hears the server's own events on the queue key; the tests read the state by heartbeat once a minute, so a prompt
// report is the notification's. On every adapter with pub/sub; without the setting, the heartbeat finds them
// (docs/watch.md).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Redis as IORedis } from "ioredis";
import { createClient } from "redis";
import { ioredis } from "../src/adapters/ioredis.ts";
import { acquire, type Lease, release } from "../mod.ts";
import { type LeaseChange, watch } from "../src/watch.ts";
import { keysOf } from "../src/_protocol.ts";
import { adapters, type Made, type Runtime } from "./_contract.ts";
import { type Client, queued, type RedisServer, runtimeName, sleep, startRedis, until } from "./_redis.ts";

/** The first `queue` change after the first `from` items of `seen` with `waiters` queued, within `ms`. */
async function queueChange(seen: LeaseChange[], from: number, waiters: number, ms = 3_000): Promise<LeaseChange> {
  const end = performance.now() + ms;
  for (;;) {
    const found = seen.slice(from).find((c) => c.type === "queue" && c.info.waiters === waiters);
    if (found) return found;
    if (performance.now() > end) {
      const what = seen.map((c) => `${c.type}:${c.info.waiters}`).join(", ");
      assert.fail(`no 'queue' change to ${waiters} within ${ms} ms; seen: ${what}`);
    }
    await sleep(10);
  }
}

/** A waiter joins the queue of `name` (held by `holder`) and leaves it (its acquire aborted), watched from `on`. */
async function joinAndLeave(on: Parameters<typeof watch>[0], waiter: Parameters<typeof acquire>[0], name: string) {
  const stop = new AbortController(), seen: LeaseChange[] = [];
  const done = (async () => {
    for await (const c of watch(on, name, { signal: stop.signal, pollMs: 60_000 })) seen.push(c);
  })();
  let holder: Lease | undefined;
  try {
    await until("the watch's first state", () => seen.length > 0);
    holder = await acquire(waiter, name, { leaseMs: 30_000 });
    await until("the grant reported", () => seen.some((c) => c.type === "granted"), 3_000);
    const gone = new AbortController();
    const waiting = acquire(waiter, name, { leaseMs: 30_000, waitMs: 20_000, signal: gone.signal });
    waiting.catch(() => {});
    const n = seen.length;
    const grew = await queueChange(seen, n, 1);
    assert.ok(grew.type === "queue" && grew.was === 0);
    gone.abort();
    await assert.rejects(waiting);
    const shrank = await queueChange(seen, n, 0);
    assert.ok(shrank.type === "queue" && shrank.was === 1);
  } finally {
    if (holder) await release(holder).catch(() => {});
    stop.abort();
    await done;
  }
}

for (const ad of adapters) {
  // (GLIDE subscribes no keyspace channel: see src/adapters/glide.ts, and its own case below.)
  if (!ad.runtimes.includes(runtimeName() as Runtime) || !ad.pubsub || ad.name === "glide") continue;
  describe(`watch, keyspace notifications: ${ad.name}`, () => {
    let srv: RedisServer, admin: Client, made: Made[] = [];
    let count = 0;
    const fresh = () => `watch-ks-${ad.name.replace(/\W+/g, "-")}-${++count}`;
    before(async () => {
      srv = await startRedis(["--notify-keyspace-events", "Kzgx"]);
      admin = await srv.client();
      made = [await ad.make(srv.url), await ad.make(srv.url)];
    });
    after(async () => {
      for (const m of made) await m.close();
      await srv.stop();
    });

    test(`${ad.name}: a waiter joining and leaving the queue is told by the server`, async () => {
      const [a, b] = made.map((m) => m.client);
      const name = fresh();
      await joinAndLeave(a, b, name);
      // The watch ended: its keyspace subscription with it.
      const channel = `__keyspace@0__:${keysOf("redlease", name).queue}`;
      let subs: unknown;
      for (const t0 = performance.now(); performance.now() - t0 < 1_000; await sleep(10)) {
        subs = await admin.sendCommand(["PUBSUB", "NUMSUB", channel]);
        if ((subs as unknown[])[1] === 0) break;
      }
      assert.deepEqual(subs, [channel, 0]);
    });
  });
}

// docs/security.md's ACL grants `&redlease:*`, not the keyspace channels: the watcher's SUBSCRIBE there is refused.
// That must leave the watch going (by heartbeat) and the client's waiters, whose channels share its subscriber
// connection, untouched (Bun closes the subscriber connection on a refused SUBSCRIBE).
for (const ad of adapters) {
  if (!ad.runtimes.includes(runtimeName() as Runtime) || !ad.pubsub) continue;
  describe(`watch, keyspace channels refused by the ACL: ${ad.name}`, () => {
    let srv: RedisServer, admin: Client, made: Made | undefined;
    before(async () => {
      srv = await startRedis(["--notify-keyspace-events", "Kz"]);
      admin = await srv.client();
      const rule = ["on", ">pw", "~redlease:*", "resetchannels", "&redlease:*", "+@all"];
      await admin.sendCommand(["ACL", "SETUSER", "app", ...rule]);
      const url = new URL(srv.url);
      [url.username, url.password] = ["app", "pw"];
      made = await ad.make(url.href);
    });
    after(async () => {
      await made?.close();
      await srv.stop();
    });

    test(`${ad.name}: the watch goes on by heartbeat, and a waiter of the same client is handed the lease`, async () => {
      const c = made!.client, name = `watch-ks-acl-${ad.name.replace(/\W+/g, "-")}`;
      const stop = new AbortController(), seen: LeaseChange[] = [];
      let failed: unknown;
      const done = (async () => {
        for await (const ch of watch(c, name, { signal: stop.signal, pollMs: 200 })) seen.push(ch);
      })().catch((e) => void (failed = e));
      try {
        await until("the watch's first state", () => seen.length > 0 || failed !== undefined, 5_000);
        const holder = await acquire(admin, name, { leaseMs: 30_000 });
        const waiting = acquire(c, name, { leaseMs: 30_000, waitMs: 20_000 });
        await queued(admin, name);
        await queueChange(seen, 0, 1);
        const t0 = performance.now();
        await release(holder);
        const next = await waiting;
        const took = performance.now() - t0;
        assert.ok(took < 5_000, `handoff took ${took} ms (a missed handoff waits for the holder's TTL)`);
        await release(next);
        assert.equal(failed, undefined);
      } finally {
        stop.abort();
        await done;
      }
    });
  });
}

for (const ad of adapters) {
  if (!ad.runtimes.includes(runtimeName() as Runtime) || ad.name !== "glide") continue;
  describe(`watch, keyspace notifications: ${ad.name}`, () => {
    let srv: RedisServer, admin: Client, made: Made[] = [];
    before(async () => {
      srv = await startRedis(["--notify-keyspace-events", "Kzgx"]);
      admin = await srv.client();
      made = [await ad.make(srv.url), await ad.make(srv.url)];
    });
    after(async () => {
      for (const m of made) await m.close();
      await srv.stop();
    });

    test(`${ad.name}: no keyspace channel is subscribed; the queue's changes come at the heartbeat`, async () => {
      const [a, b] = made.map((m) => m.client), name = "watch-ks-glide";
      const stop = new AbortController(), seen: LeaseChange[] = [];
      const done = (async () => {
        for await (const c of watch(a, name, { signal: stop.signal, pollMs: 300 })) seen.push(c);
      })();
      try {
        await until("the watch's first state", () => seen.length > 0);
        const holder = await acquire(admin, name, { leaseMs: 30_000 });
        const waiting = acquire(b, name, { leaseMs: 30_000, waitMs: 20_000 });
        await queued(admin, name);
        await queueChange(seen, 0, 1);
        const channel = `__keyspace@0__:${keysOf("redlease", name).queue}`;
        assert.deepEqual(await admin.sendCommand(["PUBSUB", "NUMSUB", channel]), [channel, 0]);
        await release(holder);
        await release(await waiting);
      } finally {
        stop.abort();
        await done;
      }
    });
  });
}

describe("watch, keyspace notifications: another database, an older server's refusal", () => {
  let srv: RedisServer;
  before(async () => {
    srv = await startRedis(["--notify-keyspace-events", "Kz"]);
  });
  after(async () => {
    await srv.stop();
  });

  test("a client on database 3 hears the events of its own database", async () => {
    const [w, c] = await Promise.all([0, 1].map(() => createClient({ url: `${srv.url}/3` }).connect()));
    try {
      await joinAndLeave(w, c, "watch-ks-db3");
    } finally {
      await Promise.all([w.disconnect(), c.disconnect()]);
    }
  });

  test("an ioredis client with a keyPrefix hears the events of its prefixed queue key", async () => {
    // Redis names the channel after the key as stored (`__keyspace@0__:tenant7:redlease:{…}:q`): the prefix goes
    // inside the channel's name, after the database, not in front of it as for the lease's own channels.
    const [c1, c2] = [0, 1].map(() => new IORedis(srv.url, { keyPrefix: "tenant7:" }));
    try {
      await joinAndLeave(ioredis(c1), ioredis(c2), "watch-ks-prefix");
    } finally {
      await Promise.all([c1.quit(), c2.quit()]);
    }
  });

  test("where CLIENT INFO is refused, the watch goes on (the queue at its heartbeat)", async () => {
    const admin = await srv.client();
    await admin.sendCommand(["ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-client|info"]);
    const w = await createClient({ url: srv.url, username: "noinfo", password: "pw" }).connect();
    const stop = new AbortController(), seen: LeaseChange[] = [];
    try {
      const name = "watch-ks-noinfo";
      const done = (async () => {
        for await (const c of watch(w, name, { signal: stop.signal, pollMs: 200 })) seen.push(c);
      })();
      // (Its first state read before the waiter joins: read after, it shows the waiter already, and no change
      // follows; a run with two CPU hogs beside the suite saw that.)
      await until("the watch's first state", () => seen.length > 0);
      const holder = await acquire(admin, name, { leaseMs: 30_000 });
      const waiting = acquire(admin, name, { leaseMs: 30_000, waitMs: 5_000 });
      await queued(admin, name);
      await queueChange(seen, 0, 1);
      await release(holder);
      await release(await waiting);
      stop.abort();
      await done;
    } finally {
      stop.abort();
      await w.disconnect();
    }
  });
});
