import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Cluster as IORedisCluster, Redis as IORedis } from "ioredis";
import { createClient, createCluster } from "redis";
import {
  createClient as createClient5,
  createCluster as createCluster5,
  createSentinel as createSentinel5,
} from "redis5";
import { acquire, campaign, extend, forceUnlock, inspect, observe, release, resume, withLock } from "../mod.ts";
import { fencedSet } from "../src/fence.ts";
import { redlock } from "../src/redlock.ts";
import { type Client, noCommands, type RedisServer, startRedis } from "./_redis.ts";
import { glideClient } from "./_glide.ts";

// A client on which any command fails the test's expectations: a TypeError/RangeError while its `sent` stays 0
// proves the input was rejected before any command.
const idle = noCommands();
// deno-lint-ignore no-explicit-any
const anyArgs = (f: (...args: any[]) => unknown, ...args: unknown[]) => Promise.resolve().then(() => f(...args));

const bad: Array<[string, unknown, object | undefined, ErrorConstructor, RegExp]> = [
  ["empty name", "", undefined, RangeError, /'name' must be a non-empty string/],
  ["non-string name", 42, undefined, TypeError, /'name'.*current value is 42/],
  ["very long name", "x".repeat(2000), undefined, RangeError, /'name'/],
  ["leaseMs 0", "n", { leaseMs: 0 }, RangeError, /'leaseMs' must be an integer from 1.*current value is 0/],
  ["negative leaseMs", "n", { leaseMs: -1 }, RangeError, /current value is -1/],
  ["NaN leaseMs", "n", { leaseMs: NaN }, RangeError, /'leaseMs'.*NaN/],
  ["fractional leaseMs", "n", { leaseMs: 1.5 }, RangeError, /'leaseMs'/],
  ["absurdly large leaseMs", "n", { leaseMs: 2 ** 31 }, RangeError, /'leaseMs'/],
  ["Infinity leaseMs", "n", { leaseMs: Infinity }, RangeError, /'leaseMs'/],
  ["string leaseMs", "n", { leaseMs: "100" }, TypeError, /'leaseMs'/],
  ["watchdogMs too small", "n", { watchdogMs: 10 }, RangeError, /'watchdogMs' must be an integer from 30/],
  ["leaseMs with watchdogMs", "n", { leaseMs: 100, watchdogMs: 3000 }, TypeError, /'watchdogMs' must be omitted/],
  ["negative waitMs", "n", { waitMs: -1 }, RangeError, /'waitMs' must be a non-negative integer or Infinity/],
  ["NaN waitMs", "n", { waitMs: NaN }, RangeError, /'waitMs'/],
  ["string waitMs", "n", { waitMs: "5" }, TypeError, /'waitMs'/],
  ["signal that is not an AbortSignal", "n", { signal: {} }, TypeError, /'signal' must be an AbortSignal/],
  ["empty owner", "n", { owner: "" }, RangeError, /'owner'/],
  [
    "owner that is neither string nor Lease",
    "n",
    { owner: { owner: "x" } },
    TypeError,
    /'owner' must be a string or a Lease/,
  ],
  ["prefix with a brace", "n", { prefix: "a{b}" }, RangeError, /'prefix'/],
  ["weight without permits", "n", { weight: 2 }, TypeError, /'weight' can only be given with 'permits'/],
  [
    "weight 0",
    "n",
    { permits: 4, weight: 0 },
    RangeError,
    /'weight' must be an integer from 1 to 4.*current value is 0/,
  ],
  ["weight above permits", "n", { permits: 4, weight: 5 }, RangeError, /'weight' must be an integer from 1 to 4/],
  ["fractional weight", "n", { permits: 4, weight: 1.5 }, RangeError, /'weight'/],
  ["string weight", "n", { permits: 4, weight: "2" }, TypeError, /'weight'.*current value is "2"/],
  ["options that are not an object", "n", 5 as unknown as object, TypeError, /'options' must be an object/],
];

describe("bad input fails with a clear error before any Redis command", () => {
  for (const [what, name, options, Err, message] of bad) {
    test(`acquire() rejects ${what} with ${Err.name}`, async () => {
      await assert.rejects(anyArgs(acquire, idle, name, options), (e: Error) => {
        assert.ok(e instanceof Err, `${e.name}: ${e.message}`);
        assert.match(e.message, message);
        assert.match(e.message, /^Cannot acquire lease as '/);
        return true;
      });
      assert.equal(idle.sent, 0);
    });
  }

  for (const client of [undefined, null, {}, "redis://localhost", { sendCommand: 1 }]) {
    test(`acquire() rejects a client that is ${JSON.stringify(client)} with TypeError`, async () => {
      await assert.rejects(
        anyArgs(acquire, client, "n"),
        (e: Error) => e instanceof TypeError && /'client'/.test(e.message),
      );
    });
  }

  test("an already-aborted signal rejects with its reason before any command", async () => {
    const reason = new Error("stop");
    await assert.rejects(acquire(idle, "n", { signal: AbortSignal.abort(reason) }), (e) => e === reason);
    await assert.rejects(withLock(idle, "n", () => 1, { signal: AbortSignal.abort(reason) }), (e) => e === reason);
  });

  test("withLock() rejects a non-function callback with TypeError", async () => {
    await assert.rejects(
      anyArgs(withLock, idle, "n", "not a function"),
      (e: Error) => e instanceof TypeError && /'fn' must be a function/.test(e.message),
    );
  });

  test("forceUnlock() and inspect() check the name and prefix", async () => {
    await assert.rejects(anyArgs(forceUnlock, idle, ""), RangeError);
    await assert.rejects(anyArgs(inspect, idle, null), TypeError);
    await assert.rejects(anyArgs(inspect, idle, "n", { prefix: "" }), RangeError);
    await assert.rejects(anyArgs(inspect, {}, "n"), TypeError);
  });

  test("release() and extend() reject something that is not a Lease", async () => {
    await assert.rejects(
      anyArgs(release, { name: "n", owner: "o" }),
      (e: Error) => e instanceof TypeError && /'lease'/.test(e.message),
    );
    await assert.rejects(anyArgs(extend, undefined), TypeError);
  });

  test("no command was sent, though valid input would have sent one (the checks above are meaningful)", async () => {
    assert.equal(idle.sent, 0);
    const probe = noCommands();
    await assert.rejects(acquire(probe, "n", { waitMs: 0 }), /no command may be sent/);
    assert.ok(probe.sent > 0);
  });
});

describe("extend() checks leaseMs before any command", () => {
  let srv: RedisServer;
  let a: Client;
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });
  test("extend() rejects 0, NaN, fractions and absurd values with RangeError", async () => {
    const lease = await acquire(a, "extend-validation");
    for (const v of [0, -5, NaN, 0.5, 2 ** 40]) await assert.rejects(extend(lease, v), RangeError);
    await assert.rejects(anyArgs(extend, lease, "10"), TypeError);
    assert.equal(await release(lease), true);
  });
});

describe("the usual client mistakes are named, with what to do, before any Redis command", () => {
  let srv: RedisServer;
  before(async () => {
    srv = await startRedis();
  });
  after(async () => {
    await srv.stop();
  });

  // Every entry point that takes a client, called as a user would; a synchronous throw counts as a rejection.
  const calls: Array<[string, RegExp, (client: unknown) => unknown]> = [
    ["acquire", /^Cannot acquire lease as 'client' /, (c) => acquire(c as never, "n")],
    ["withLock", /^Cannot run withLock as 'client' /, (c) => withLock(c as never, "n", () => 1)],
    ["inspect", /^Cannot inspect lease as 'client' /, (c) => inspect(c as never, "n")],
    ["forceUnlock", /^Cannot force-unlock lease as 'client' /, (c) => forceUnlock(c as never, "n")],
    ["resume", /^Cannot resume lease as 'client' /, (c) => resume(c as never, "token")],
    ["campaign", /^Cannot campaign as 'client' /, (c) => campaign(c as never, "e")],
    ["observe", /^Cannot observe election as 'client' /, (c) => observe(c as never, "e")],
    ["redlock", /^Cannot make a Redlock group as 'clients' /, (c) => redlock([noCommands(), c as never, noCommands()])],
    ["fencedSet", /^Cannot make a fenced write as 'client' /, (c) => fencedSet(c as never, 5, "k", "v")],
  ];

  async function refusedEverywhere(client: unknown, hint: RegExp, except?: string): Promise<void> {
    for (const [what, prefix, call] of calls) {
      if (what === except) continue;
      await assert.rejects(Promise.resolve().then(() => call(client)), (e: Error) => {
        assert.ok(e instanceof TypeError, `${what}: ${e.name}: ${e.message}`);
        assert.match(e.message, prefix, what);
        assert.match(e.message, hint, what);
        return true;
      });
    }
  }

  const notConnected = /is a node-redis client that is not connected: await client\.connect\(\) first/;

  test("a pending connect() (node-redis v4 and v5): await it", async () => {
    for (const create of [createClient, createClient5] as Array<(o: { url: string }) => Client>) {
      const client = create({ url: srv.url });
      client.on("error", () => {});
      const pending = client.connect();
      await refusedEverywhere(pending, /is a Promise: await it first \(`await createClient\(\)\.connect\(\)` resolves/);
      // Awaited, the same client is taken.
      const lease = await acquire(await pending, "validation-pending", { waitMs: 0 });
      assert.equal(await release(lease), true);
      await client.disconnect();
    }
  });

  test("node-redis clients never connected (v4 and v5: client, cluster, sentinel): connect them first", async () => {
    const url = "redis://127.0.0.1:1";
    const clients = [
      createClient({ url }),
      createClient5({ url }),
      createCluster({ rootNodes: [{ url }] }),
      createCluster5({ rootNodes: [{ url }] }),
      createSentinel5({ name: "mymaster", sentinelRootNodes: [{ host: "127.0.0.1", port: 1 }] }),
    ];
    for (const client of clients) {
      assert.equal(client.isOpen, false);
      // A Redlock group takes it as a failed node (Redlock tolerates a minority of them).
      await refusedEverywhere(client, notConnected, "redlock");
      assert.doesNotThrow(() => redlock([noCommands(), client, noCommands()]));
    }
  });

  test("a node-redis client that was closed (v4 quit, v5 close): connect it again", async () => {
    const v4 = await createClient({ url: srv.url }).connect();
    assert.equal(await release(await acquire(v4, "validation-closed", { waitMs: 0 })), true);
    await v4.quit();
    await refusedEverywhere(v4, notConnected, "redlock");
    const v5 = await createClient5({ url: srv.url }).connect();
    assert.equal(await release(await acquire(v5, "validation-closed", { waitMs: 0 })), true);
    await v5.close();
    await refusedEverywhere(v5, notConnected, "redlock");
  });

  test("an ioredis client that was not wrapped (Redis and Cluster): wrap it with ioredis() from redlease/ioredis", async () => {
    const standalone = new IORedis(srv.port, "127.0.0.1", { lazyConnect: true });
    const cluster = new IORedisCluster([{ host: "127.0.0.1", port: srv.port }], { lazyConnect: true });
    try {
      for (const client of [standalone, cluster]) {
        await refusedEverywhere(
          client,
          /is an ioredis client: wrap it with ioredis\(client\) from "redlease\/ioredis"/,
        );
      }
      // Nothing was sent: a lazyConnect client connects on its first command.
      assert.equal(standalone.status, "wait");
    } finally {
      standalone.disconnect();
      cluster.disconnect();
    }
  });

  test("a Bun RedisClient that was not wrapped: wrap it with bunRedis() from redlease/bun", async () => {
    const Bun = (globalThis as { Bun?: { RedisClient: new (url: string) => { close(): void } } }).Bun;
    // The real one on Bun (it connects on its first command), elsewhere an object of its shape.
    const client = Bun ? new Bun.RedisClient(srv.url) : {
      send: () => Promise.reject(new Error("no command may be sent")),
      duplicate: () => Promise.reject(new Error("no command may be sent")),
      subscribe: () => Promise.reject(new Error("no command may be sent")),
      close() {},
    };
    try {
      await refusedEverywhere(client, /is a Bun RedisClient: wrap it with bunRedis\(client\) from "redlease\/bun"/);
    } finally {
      client.close();
    }
  });

  test("a Valkey GLIDE client that was not wrapped: wrap it with glide() from redlease/glide", async () => {
    const client = await glideClient(srv.url);
    try {
      await refusedEverywhere(client, /is a Valkey GLIDE client: wrap it with glide\(client\) from "redlease\/glide"/);
    } finally {
      client.close();
    }
  });

  test("anything else is refused as no client at all", async () => {
    for (const client of [undefined, null, {}, "redis://localhost", { sendCommand: 1 }, [noCommands()]]) {
      await refusedEverywhere(client, /'clients?' must (be a node-redis client or a redlease Driver|be one client)/);
    }
  });
});
