// One behavioural contract for every client redlease supports, in the manner of unjs/unstorage's driver suite:
// each adapter says which runtimes it runs on and how to make a client, and `contract()` registers the same tests
// for it (plus the adapter's own extras) against its own throwaway redis-server.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient as createClient4 } from "redis";
import { createClient as createClient5 } from "redis5";
import { Cluster as IORedisClusterClient, Redis as IORedis } from "ioredis";
import {
  acquire,
  campaign,
  forceUnlock,
  inspect,
  isStaleFenceError,
  type Lease,
  LeaseKindError,
  LeaseLostError,
  LockTimeoutError,
  observe,
  proclaim,
  type RedisLike,
  release,
  ReplicationError,
  resume,
  StaleFenceError,
  withLock,
} from "../mod.ts";
import { fencedDel, fencedEval, fencedHSet, fencedIncrBy, fencedSet } from "../src/fence.ts";
import { keysOf } from "../src/_protocol.ts";
import { ioredis } from "../src/adapters/ioredis.ts";
type IORedisCluster = InstanceType<typeof IORedisClusterClient>;
import { bunRedis, type BunRedisClient } from "../src/adapters/bun.ts";
import { upstash } from "../src/adapters/http.ts";
import { glide, redisWording } from "../src/adapters/glide.ts";
import { glideClient } from "./_glide.ts";
import { RedisUnavailableError } from "../src/errors.ts";
import { type Client, holdsOf, type RedisServer, runtimeName, sleep, startRedis } from "./_redis.ts";
import { startHttpBridge } from "../harness/http_bridge.ts";

export type Runtime = "node" | "bun" | "deno";

export interface Made {
  /** What the caller passes to acquire(). */
  readonly client: RedisLike;
  close(): Promise<void>;
}

export interface Ctx {
  readonly srv: RedisServer;
  /** Two clients of the adapter under test. */
  readonly a: RedisLike;
  readonly b: RedisLike;
  /** A node-redis v4 client for looking behind the adapter's back. */
  readonly admin: Client;
  fresh(): string;
}

export interface AdapterCase {
  readonly name: string;
  readonly runtimes: readonly Runtime[];
  /** Whether waiters are woken by pub/sub and handed the lease (else they poll). */
  readonly pubsub: boolean;
  make(redisUrl: string): Promise<Made>;
  /** Tests of this adapter only; they run after the shared ones, with the same server and clients. */
  extras?(ctx: Ctx): void;
}

const ALL: readonly Runtime[] = ["node", "bun", "deno"];

/** Client connections per kind, from the server's point of view. */
async function connections(admin: Client, name?: string): Promise<{ total: number; subscribers: number }> {
  const list = String(await admin.sendCommand(["CLIENT", "LIST"])).trim().split("\n");
  const others = list.filter((l) =>
    !/ cmd=client\|list /.test(l) && (name === undefined || l.includes(` name=${name} `))
  );
  return { total: others.length, subscribers: others.filter((l) => / sub=[1-9]/.test(l)).length };
}

async function until(what: string, cond: () => Promise<boolean>, ms = 2_000): Promise<void> {
  const end = performance.now() + ms;
  while (!(await cond())) {
    if (performance.now() > end) assert.fail(`timed out waiting until ${what}`);
    await sleep(20);
  }
}

export const adapters: readonly AdapterCase[] = [
  {
    name: "node-redis v4",
    runtimes: ALL,
    pubsub: true,
    async make(url) {
      const c = createClient4({ url });
      c.on("error", () => {});
      await c.connect();
      return { client: c, close: () => c.disconnect().catch(() => {}) };
    },
  },
  {
    name: "node-redis v5",
    runtimes: ALL,
    pubsub: true,
    async make(url) {
      const c = createClient5({ url });
      c.on("error", () => {});
      await c.connect();
      return { client: c, close: async () => void await c.close().catch(() => {}) };
    },
  },
  {
    name: "ioredis",
    runtimes: ALL,
    pubsub: true,
    async make(url) {
      const c = new IORedis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
      c.on("error", () => {});
      await c.connect();
      return { client: ioredis(c), close: async () => void await c.quit().catch(() => {}) };
    },
    extras: (ctx) => {
      test("ioredis: ioredis() returns one driver per client and rejects other clients", () => {
        const c = new IORedis(ctx.srv.url, { lazyConnect: true });
        assert.equal(ioredis(c), ioredis(c));
        assert.throws(() => ioredis({} as IORedis), TypeError);
        c.disconnect();
      });

      test("ioredis: a client's keyPrefix applies to lease keys and to the waiters' channels", async () => {
        const [c1, c2] = [0, 1].map(() => new IORedis(ctx.srv.url, { keyPrefix: "tenant7:" }));
        try {
          const [d1, d2] = [ioredis(c1), ioredis(c2)];
          const name = ctx.fresh();
          const holder = await acquire(d1, name);
          assert.equal(await ctx.admin.exists(`tenant7:${keysOf("redlease", name).hash}`), 1);
          // (claimMs 10 s: a waiter that missed the message would look again only after 10 s.)
          const waiting = acquire(d2, name, { waitMs: 15_000, claimMs: 10_000 });
          await until("the waiter is queued", async () => (await inspect(d1, name)).waiters === 1);
          const t0 = performance.now();
          await release(holder);
          const next = await waiting;
          const took = performance.now() - t0;
          assert.ok(took < 2_000, `handoff took ${took} ms (a missed handoff waits 10 s for the waiter's own timer)`);
          await release(next);
        } finally {
          await Promise.all([c1.quit(), c2.quit()]);
        }
      });

      test("ioredis: the waiters' subscriber connection closes with the client", async () => {
        const connectionName = `subscriber-test-${crypto.randomUUID().slice(0, 8)}`;
        const named = async () => (await connections(ctx.admin, connectionName)).total;
        const c = new IORedis(ctx.srv.url, { connectionName });
        c.on("error", () => {});
        const d = ioredis(c);
        const name = ctx.fresh();
        const holder = await acquire(d, name);
        const waiting = acquire(d, name, { waitMs: 10_000 });
        // The duplicate carries the client's connectionName.
        await until(
          "the subscriber is up",
          async () => (await connections(ctx.admin, connectionName)).subscribers === 1,
        );
        assert.equal(await named(), 2);
        await release(holder);
        await release(await waiting);
        await c.quit();
        await until("both connections are closed", async () => (await named()) === 0);
      });
    },
  },
  {
    name: "bun",
    runtimes: ["bun"],
    pubsub: true,
    async make(url) {
      const { RedisClient } = (globalThis as unknown as {
        Bun: { RedisClient: new (url: string) => BunRedisClient & { connect(): Promise<void> } };
      }).Bun;
      const c = new RedisClient(url);
      await c.connect();
      return { client: bunRedis(c), close: () => Promise.resolve(c.close()) };
    },
    extras: (ctx) => {
      test("bun: the subscriber connection is closed once the last waiter has left", async () => {
        const name = ctx.fresh();
        const subscribers = async () => (await connections(ctx.admin)).subscribers;
        await until("earlier waiters' subscribers are gone", async () => (await subscribers()) === 0);
        const holder = await acquire(ctx.a, name);
        const waiting = acquire(ctx.b, name, { waitMs: 10_000 });
        await until("the subscriber is up", async () => (await subscribers()) === 1);
        await release(holder);
        await release(await waiting);
        await until("the subscriber is closed", async () => (await subscribers()) === 0);
      });
    },
  },
  {
    name: "glide",
    runtimes: ALL,
    pubsub: true,
    async make(url) {
      const c = await glideClient(url);
      return { client: glide(c), close: () => Promise.resolve(c.close()) };
    },
    extras: (ctx) => glideExtras(ctx),
  },
  {
    name: "http",
    runtimes: ALL,
    pubsub: false,
    async make(url) {
      const bridge = await startHttpBridge(url);
      return { client: upstash({ url: bridge.url, token: bridge.token }), close: () => bridge.stop() };
    },
    extras: (ctx) => {
      test("http: upstash() validates its options", () => {
        assert.throws(() => upstash({ url: "redis://x", token: "t" }), TypeError);
        assert.throws(() => upstash({ url: "http://x", token: "" }), TypeError);
        assert.throws(() => upstash(null as never), TypeError);
      });

      test("http: a wrong token rejects with the HTTP status, never a lease", async () => {
        const bridge = await startHttpBridge(ctx.srv.url);
        try {
          const bad = upstash({ url: bridge.url, token: "wrong" });
          await assert.rejects(
            acquire(bad, ctx.fresh()),
            (e) => e instanceof Error && /status 401: Unauthorized/.test(e.message),
          );
        } finally {
          await bridge.stop();
        }
      });

      test("http: requests go through the given fetch", async () => {
        const bridge = await startHttpBridge(ctx.srv.url);
        try {
          const seen: string[] = [];
          const d = upstash({
            url: bridge.url,
            token: bridge.token,
            fetch: (input, init) => {
              seen.push(JSON.parse(String(init.body))[0]);
              return fetch(input, init);
            },
          });
          await release(await acquire(d, ctx.fresh()));
          assert.ok(seen.filter((c) => c === "EVALSHA").length >= 2, seen.join(",")); // acquire and release
        } finally {
          await bridge.stop();
        }
      });
    },
  },
];

/**
 * Another way to run the contract: `label` names it in the test names, and `url` returns the URL the adapter's two
 * clients connect with, after preparing the server through `admin` (e.g. a restricted ACL user's credentials).
 */
export interface ContractVariant {
  readonly label: string;
  url(srv: RedisServer, admin: Client): Promise<string>;
}

/** Register the contract tests for `ad` (nothing when the current runtime cannot run it). */
export function contract(ad: AdapterCase, variant?: ContractVariant): void {
  if (!ad.runtimes.includes(runtimeName() as Runtime)) return;
  const n = variant ? `${ad.name} ${variant.label}` : ad.name;
  let srv: RedisServer;
  let admin: Client;
  let made: Made[] = [];
  let a: RedisLike;
  let b: RedisLike;
  let count = 0;
  const fresh = () => `contract-${n.replace(/\W+/g, "-")}-${++count}-${Math.random().toString(36).slice(2, 8)}`;
  const keyOf = (name: string) => keysOf("redlease", name).hash;
  // Sends of a script's text: EVAL after NOSCRIPT (every adapter has evalSource), or SCRIPT LOAD.
  const scriptLoads = async () => {
    const info = await admin.info("commandstats");
    const calls = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
    return calls("eval") + calls("script\\|load");
  };
  // (Already aborted: its reason at once. The holder may learn of a loss before the test asks, e.g. a renewal that
  // ran while slow HTTP calls of the test were in flight: waiting for an "abort" event then hung the whole file.)
  const abortReason = (lease: Lease) =>
    lease.signal.aborted
      ? Promise.resolve<unknown>(lease.signal.reason)
      : new Promise<unknown>((r) =>
        lease.signal.addEventListener("abort", () => r(lease.signal.reason), { once: true })
      );

  describe(`contract: ${n}`, () => {
    before(async () => {
      srv = await startRedis();
      admin = await srv.client();
      const url = variant ? await variant.url(srv, admin) : srv.url;
      made = [await ad.make(url), await ad.make(url)];
      [a, b] = made.map((m) => m.client);
    });
    after(async () => {
      for (const m of made) await m.close();
      await srv.stop();
    });

    test(`${n}: acquire() holds the lease, inspect() reports it and release() frees it`, async () => {
      const name = fresh();
      const lease = await acquire(a, name);
      assert.equal(lease.name, name);
      assert.ok(lease.fence > 0);
      const info = await inspect(b, name);
      assert.equal(info.held, true);
      assert.deepEqual(holdsOf(info), [{ owner: lease.owner, holds: 1 }]);
      assert.equal(info.fence, lease.fence);
      assert.ok(info.remainingMs > 29_000 && info.remainingMs <= 30_000, String(info.remainingMs));
      assert.equal(await release(lease), true);
      assert.equal(await release(lease), false);
      assert.equal((await inspect(b, name)).held, false);
      assert.equal(lease.signal.aborted, true);
    });

    test(`${n}: acquire() by a second client fails with LockTimeoutError carrying remainingMs`, async () => {
      const name = fresh();
      const lease = await acquire(a, name, { leaseMs: 5_000 });
      const err = await acquire(b, name, { waitMs: 0 }).then(() => null, (e: unknown) => e);
      assert.ok(err instanceof LockTimeoutError, String(err));
      assert.equal(err.lockName, name);
      assert.ok(err.remainingMs > 3_000 && err.remainingMs <= 5_000, String(err.remainingMs));
      const waited = await acquire(b, name, { waitMs: 150 }).then(() => null, (e: unknown) => e);
      assert.ok(waited instanceof LockTimeoutError, String(waited));
      assert.ok(waited.waitedMs >= 140, String(waited.waitedMs));
      assert.equal((await inspect(a, name)).waiters, 0, "a timed-out waiter leaves the queue");
      await release(lease);
      await release(await acquire(b, name, { waitMs: 0 }));
    });

    test(`${n}: acquire() by the same owner is reentrant and counts holds`, async () => {
      const name = fresh();
      const first = await acquire(a, name);
      const second = await acquire(a, name, { owner: first, waitMs: 0 });
      const third = await acquire(a, name, { owner: first.owner, waitMs: 0 });
      assert.equal(second.fence, first.fence);
      assert.equal(third.fence, first.fence);
      assert.deepEqual(holdsOf(await inspect(a, name)), [{ owner: first.owner, holds: 3 }]);
      await assert.rejects(acquire(b, name, { waitMs: 0 }), LockTimeoutError);
      assert.equal(await release(second), true);
      assert.equal(await release(third), true);
      assert.deepEqual(holdsOf(await inspect(a, name)), [{ owner: first.owner, holds: 1 }]);
      assert.equal(await release(first), true);
      assert.equal((await inspect(a, name)).held, false);
      // An owner string counts on its own client only: on another client it is another owner.
      const w = await acquire(a, name, { owner: "w", leaseMs: 5_000 });
      await assert.rejects(acquire(b, name, { owner: "w", waitMs: 0 }), LockTimeoutError);
      assert.equal((await acquire(a, name, { owner: "w", waitMs: 0 })).fence, w.fence);
      assert.deepEqual(holdsOf(await inspect(a, name)), [{ owner: w.owner, holds: 2 }]);
      await forceUnlock(admin, name);
    });

    test(`${n}: resume() takes a hold over from lease.token on another client, which releases it`, async () => {
      const name = fresh();
      // (A 1.5 s TTL: a 300 ms one expired once in a full Bun run, when the whole process stalled for ~550 ms, and a
      // 1 s one once in a loaded CI run on Deno.)
      const lease = await acquire(a, name, { watchdogMs: 1_500 });
      const held = await resume(b, lease.token, { watchdogMs: 1_500 });
      assert.equal(held.fence, lease.fence);
      assert.equal(held.owner, lease.owner);
      assert.deepEqual(holdsOf(await inspect(admin, name)), [{ owner: lease.owner, holds: 1 }]);
      await sleep(1_700); // renewed by both for longer than the TTL
      assert.equal((await inspect(admin, name)).held, true);
      assert.equal(await release(held), true);
      assert.equal((await inspect(admin, name)).held, false);
      await assert.rejects(resume(b, lease.token), (e) => e instanceof LeaseLostError && e.why === "not-held");
      await release(lease);
    });

    test(`${n}: acquire() with leaseMs aborts lease.signal when the fixed lease expires`, async () => {
      const name = fresh();
      const t0 = performance.now();
      const lease = await acquire(a, name, { leaseMs: 300 });
      const reason = await abortReason(lease);
      const at = performance.now() - t0;
      assert.ok(reason instanceof LeaseLostError, String(reason));
      assert.equal(reason.why, "expired");
      assert.ok(at >= 250 && at < 2_000, `aborted after ${at} ms`);
      await until("Redis expired it too", async () => !(await inspect(b, name)).held);
      assert.equal(await release(lease), false);
    });

    test(`${n}: acquire() watchdog keeps a short lease alive across three periods`, async () => {
      const name = fresh();
      // A 1.5 s TTL (renewed every ~500 ms): with 300 ms, one stall of ~300 ms on a busy machine (a concurrent
      // run, or an HTTP renewal through the bridge) let it lapse, and with 1 s a loaded CI run (three runtimes at
      // once on 2 cores) still did, once. Two full TTLs pass, so only renewals keep it.
      const lease = await acquire(a, name, { watchdogMs: 1_500 });
      await sleep(3_100);
      assert.equal(lease.signal.aborted, false, String(lease.signal.reason));
      const info = await inspect(b, name);
      assert.equal(info.held, true);
      assert.ok(info.remainingMs > 0 && info.remainingMs <= 1_500, String(info.remainingMs));
      assert.equal(await release(lease), true);
      await release(await acquire(b, name, { waitMs: 0 }));
    });

    test(`${n}: lease.signal aborts with 'not-held' when the key is deleted behind the holder`, async () => {
      const name = fresh();
      const lease = await acquire(a, name, { watchdogMs: 900 }); // renews every 300 ms
      await admin.del(keyOf(name));
      const t0 = performance.now();
      const reason = await abortReason(lease);
      const took = performance.now() - t0;
      assert.ok(reason instanceof LeaseLostError, String(reason));
      assert.equal(reason.why, "not-held");
      assert.ok(took < 1_500, `detected after ${took} ms`);
      assert.equal(await release(lease), false);
    });

    test(`${n}: acquire() recovers from NOSCRIPT after SCRIPT FLUSH by sending the script again`, async () => {
      const name = fresh();
      await release(await acquire(a, name)); // the scripts it uses are cached on the server
      await admin.sendCommand(["SCRIPT", "FLUSH"]);
      const loads = await scriptLoads();
      const lease = await acquire(a, name, { waitMs: 0 });
      assert.ok((await scriptLoads()) > loads, "the script was sent in full again");
      await admin.sendCommand(["SCRIPT", "FLUSH"]);
      assert.equal(await release(lease), true);
      assert.equal((await inspect(b, name)).held, false);
    });

    if (ad.pubsub) {
      test(`${n}: acquire() waiter is handed the lease by the release, not by its TTL or a timer`, async () => {
        const name = fresh();
        const holder = await acquire(a, name); // 30 s TTL: only a handoff can be this quick
        // (claimMs 10 s: a waiter that missed the message would look again only after 10 s.)
        const waiting = acquire(b, name, { waitMs: 15_000, claimMs: 10_000 });
        await until("the waiter is queued", async () => (await inspect(admin, name)).waiters === 1);
        const channels = await admin.sendCommand(["PUBSUB", "CHANNELS", "redlease:*"]) as string[];
        assert.equal(channels.length, 1, "the waiter's client listens on one channel");
        const t0 = performance.now();
        await release(holder);
        const next = await waiting;
        const took = performance.now() - t0;
        assert.ok(took < 2_000, `handoff took ${took} ms`);
        assert.ok(next.fence > holder.fence);
        const info = await inspect(admin, name);
        assert.deepEqual(holdsOf(info), [{ owner: next.owner, holds: 1 }]);
        assert.equal(info.waiters, 0);
        await release(next);
      });
    } else {
      test(`${n}: acquire() waiter polls and gets the lease soon after the release`, async () => {
        const name = fresh();
        const holder = await acquire(a, name);
        const waiting = acquire(b, name, { waitMs: 10_000 });
        await sleep(300);
        const info = await inspect(admin, name);
        assert.equal(info.waiters, 0, "a polling waiter does not queue");
        assert.deepEqual(holdsOf(info), [{ owner: holder.owner, holds: 1 }]);
        const t0 = performance.now();
        await release(holder);
        const next = await waiting;
        const took = performance.now() - t0;
        assert.ok(took < 3_000, `the poller got it ${took} ms after the release`);
        assert.ok(next.fence > holder.fence);
        await release(next);
      });
    }

    test(`${n}: acquire() wait is cancelled by an AbortSignal with its reason`, async () => {
      const name = fresh();
      const holder = await acquire(a, name);
      const ctl = new AbortController();
      const waiting = acquire(b, name, { waitMs: Infinity, signal: ctl.signal });
      await sleep(100);
      const reason = new Error("user gave up");
      const t0 = performance.now();
      ctl.abort(reason);
      await assert.rejects(waiting, (e) => e === reason);
      assert.ok(performance.now() - t0 < 1_000); // (waitMs Infinity: only the signal ends it)
      await until("the queue is empty", async () => (await inspect(admin, name)).waiters === 0);
      await release(holder);
      assert.equal((await inspect(admin, name)).held, false, "the release did not go to the cancelled waiter");
    });

    test(`${n}: shared holds coexist and exclude an exclusive one, which a release admits`, async () => {
      const name = fresh();
      const r1 = await acquire(a, name, { shared: true, waitMs: 0 });
      const r2 = await acquire(b, name, { shared: true, waitMs: 0 });
      assert.ok(r2.fence > r1.fence);
      await assert.rejects(acquire(b, name, { waitMs: 0 }), LockTimeoutError);
      const writer = acquire(b, name, { waitMs: 10_000 });
      await sleep(100);
      await release(r1);
      await release(r2);
      const w = await writer;
      assert.equal(w.kind, "exclusive");
      assert.ok(w.fence > r2.fence);
      await assert.rejects(acquire(a, name, { shared: true, waitMs: 0 }), LockTimeoutError);
      const reader = acquire(a, name, { shared: true, waitMs: 10_000 });
      await sleep(100);
      await release(w);
      const r3 = await reader;
      assert.equal((await inspect(admin, name)).kind, "shared");
      await release(r3);
      assert.equal((await inspect(admin, name)).held, false);
    });

    test(`${n}: permits admit n holders and a freed permit admits the next waiter; n must agree`, async () => {
      const name = fresh();
      const p1 = await acquire(a, name, { permits: 2, waitMs: 0 });
      const p2 = await acquire(b, name, { permits: 2, waitMs: 0 });
      await assert.rejects(acquire(a, name, { permits: 2, waitMs: 0 }), LockTimeoutError);
      await assert.rejects(
        acquire(a, name, { permits: 3, waitMs: 0 }),
        (e) => e instanceof LeaseKindError && e.found === 2,
      );
      const third = acquire(a, name, { permits: 2, waitMs: 10_000 });
      await sleep(100);
      await release(p1);
      const p3 = await third;
      assert.equal(p3.kind, "permit");
      assert.ok(p3.fence > p2.fence);
      const info = await inspect(admin, name);
      assert.equal(info.permits, 2);
      assert.equal(info.owners.length, 2);
      await release(p2);
      await release(p3);
      assert.equal((await inspect(admin, name)).held, false);
    });

    test(`${n}: weighted permits: k of n at once or none, first come first served, mixed weights, sum shown`, async () => {
      const name = fresh();
      const heavy = await acquire(a, name, { permits: 5, weight: 3, waitMs: 0 });
      assert.equal(heavy.kind, "permit");
      const light = await acquire(b, name, { permits: 5, waitMs: 0 });
      // 4 of 5 taken: a weight of 2 does not fit, and takes nothing (all or none).
      await assert.rejects(acquire(b, name, { permits: 5, weight: 2, waitMs: 0 }), LockTimeoutError);
      let info = await inspect(admin, name);
      assert.equal(info.permits, 5);
      assert.equal(info.permitsTaken, 4);
      assert.deepEqual(info.owners.map((o) => o.weight).sort(), [1, 3]);
      const two = acquire(b, name, { permits: 5, weight: 2, waitMs: 10_000 });
      let one: Promise<Lease> | undefined;
      if (ad.pubsub) {
        // A waiter of weight 2 at the head: a newcomer of weight 1, which would fit, queues behind it (strict FIFO).
        await until("the weight-2 waiter is queued", async () => (await inspect(admin, name)).waiters === 1);
        await assert.rejects(acquire(a, name, { permits: 5, waitMs: 0 }), LockTimeoutError);
        one = acquire(a, name, { permits: 5, waitMs: 10_000 });
        await until("both are queued", async () => (await inspect(admin, name)).waiters === 2);
      }
      // The same owner again with another weight: refused (a re-entry takes no more permits); with its own, re-entered.
      await assert.rejects(
        acquire(a, name, { permits: 5, weight: 2, owner: heavy, waitMs: 0 }),
        (e) => e instanceof LeaseKindError && e.why === "weight" && e.found === 5,
      );
      const again = await acquire(a, name, { permits: 5, weight: 3, owner: heavy, waitMs: 0 });
      assert.equal(again.fence, heavy.fence);
      await release(again);
      // Freeing 3 of them admits both waiters, in order: 1 + 2 + 1 = 4 of 5 (without pub/sub, the one that polls).
      await release(heavy);
      const w2 = await two;
      const w1 = one && await one;
      assert.ok(w2.fence > light.fence && (!w1 || w1.fence > w2.fence), "one fence per hold, in queue order");
      info = await inspect(admin, name);
      assert.equal(info.permitsTaken, w1 ? 4 : 3);
      assert.equal(info.waiters, 0);
      for (const lease of [light, w2, w1]) if (lease) await release(lease);
      info = await inspect(admin, name);
      assert.equal(info.held, false);
      // Nothing is left of the weights: all 5 are free again, for one hold of 5.
      await release(await acquire(b, name, { permits: 5, weight: 5, waitMs: 0 }));
    });

    test(`${n}: one lease over several names, all or nothing, waiting for a busy one`, async () => {
      const [x, y] = [fresh(), fresh()];
      const lease = await acquire(a, [x, y], { waitMs: 0 });
      assert.deepEqual(lease.names, [x, y]);
      assert.equal((await inspect(admin, y)).owners[0]?.owner, lease.owner);
      await assert.rejects(acquire(b, [y, x], { waitMs: 0 }), LockTimeoutError);
      assert.equal((await inspect(admin, x)).owners.length, 1, "nothing of the failed acquire is kept");
      const waiting = acquire(b, [y, x], { waitMs: 10_000 });
      await sleep(100);
      await release(lease);
      const next = await waiting;
      assert.ok(next.fences[0] > lease.fences[1] && next.fences[1] > lease.fences[0]);
      await release(next);
      assert.equal((await inspect(admin, x)).held, false);
    });

    test(`${n}: an election: one leader, a higher term after a resignation, observed with its value`, async () => {
      const name = fresh();
      const stop = new AbortController();
      const seen: Array<string | undefined> = [];
      const watching = (async () => {
        for await (const s of observe(b, name, { signal: stop.signal, pollMs: 50 })) seen.push(s.value);
      })();
      const first = await campaign(a, name, { value: "one" });
      const second = campaign(b, name);
      await sleep(100);
      await release(first);
      const next = await second;
      assert.ok(next.fence > first.fence);
      assert.equal(await proclaim(next, "two"), true);
      await until("the observer saw both values", () => Promise.resolve(seen.includes("one") && seen.includes("two")));
      await release(next);
      stop.abort();
      await watching;
    });

    test(`${n}: acquire() fences strictly increase across clients`, async () => {
      const name = fresh();
      const fences: number[] = [];
      for (let i = 0; i < 6; i++) {
        const lease = await acquire(i % 2 ? b : a, name, { waitMs: 0 });
        fences.push(lease.fence);
        await release(lease);
      }
      for (let i = 1; i < fences.length; i++) assert.ok(fences[i] > fences[i - 1], fences.join(" "));
    });

    test(`${n}: forceUnlock() frees a held lease and the holder learns it is lost`, async () => {
      const name = fresh();
      const old = await acquire(a, name, { watchdogMs: 600 });
      assert.equal(await forceUnlock(b, name), true);
      assert.equal(await forceUnlock(b, name), false);
      const next = await acquire(b, name, { waitMs: 0, leaseMs: 10_000 });
      assert.ok(next.fence > old.fence);
      const reason = await abortReason(old);
      assert.ok(reason instanceof LeaseLostError, String(reason));
      assert.equal(reason.why, "not-held");
      assert.equal(await release(old), false);
      assert.deepEqual(holdsOf(await inspect(a, name)), [{ owner: next.owner, holds: 1 }]);
      await release(next);
    });

    test(`${n}: withLock() runs fn under the lease, returns its value and releases`, async () => {
      const name = fresh();
      const value = await withLock(a, name, async (signal, lease) => {
        assert.equal(signal.aborted, false);
        assert.equal((await inspect(b, name)).held, true);
        return lease.fence;
      });
      assert.ok(value > 0);
      assert.equal((await inspect(b, name)).held, false);
      const boom = new Error("boom");
      await assert.rejects(withLock(b, name, () => Promise.reject(boom)), (e) => e === boom);
      assert.equal((await inspect(a, name)).held, false);
    });

    test(`${n}: fenced writes: a live lease writes, a lower fence is refused, a warm write is one EVALSHA`, async () => {
      const name = fresh(), key = `{${name}}:stock`;
      const lease = await acquire(a, name);
      assert.equal(await fencedIncrBy(b, lease, key, 2, { floor: 0 }), 2);
      assert.equal(await fencedSet(b, lease, `${key}:note`, "two left", { px: 60_000 }), true);
      await assert.rejects(fencedIncrBy(a, lease.fence - 1, key, -1), (e) => isStaleFenceError(e) && e.key === key);
      assert.equal(await admin.get(key), "2");
      const body = "return {redis.call('DECRBY', KEYS[1], ARGV[1]), #KEYS, #ARGV}";
      const before = await scriptLoads();
      assert.deepEqual(await fencedEval(b, lease, body, [key], ["1"]), [1, 1, 1]);
      assert.deepEqual(await fencedEval(b, lease, body, [key], ["1"]), [0, 1, 1]);
      assert.equal(await scriptLoads(), before + 1, "the body sent in full once, then run by EVALSHA");
      await assert.rejects(fencedEval(a, lease.fence - 1, body, [key], ["1"]), StaleFenceError);
      assert.equal(await fencedHSet(a, lease, `${key}:h`, { f: "v" }), 1);
      assert.equal(await fencedDel(a, lease, `${key}:h`), true);
      await release(lease);
    });

    test(`${n}: fenced writes: a holder whose lease passed to another is refused at the resource`, async () => {
      const name = fresh(), key = `{${name}}:doc`;
      const old = await acquire(a, name);
      assert.equal(await fencedSet(a, old, key, "old"), true);
      await forceUnlock(b, name);
      const next = await acquire(b, name, { waitMs: 0 });
      assert.equal(await fencedSet(b, next, key, "new"), true);
      await assert.rejects(
        fencedSet(a, old, key, "late"),
        (e) => e instanceof StaleFenceError && e.highest === next.fence,
      );
      assert.equal(await admin.get(key), "new");
      await release(next);
      await release(old);
    });

    test(`${n}: acquire() rejects with the Redis error (WRONGTYPE), never a lease`, async () => {
      const name = fresh();
      await admin.hSet(keyOf(name), "f", "not a lease record");
      await assert.rejects(acquire(a, name), (e) => e instanceof Error && /WRONGTYPE/.test(e.message));
      await admin.del(keyOf(name));
      await release(await acquire(a, name, { waitMs: 0 }));
    });

    ad.extras?.({
      get srv() {
        return srv;
      },
      get a() {
        return a;
      },
      get b() {
        return b;
      },
      get admin() {
        return admin;
      },
      fresh,
    });
  });
}

/**
 * ioredis against real topologies (Node only: a cluster and a sentinel group take seconds to start): Cluster with
 * sharded pub/sub, Cluster without it (waiters poll), WAIT routed to the lease's master, and Sentinel with a
 * failover.
 */
export function ioredisTopologies(): void {
  describe("contract: ioredis Cluster and Sentinel", () => {
    let topo: typeof import("../harness/topology.ts");
    let cluster: Awaited<ReturnType<typeof topo.startCluster>>;
    const clients: IORedisCluster[] = [];
    const newCluster = async (options: object): Promise<IORedisCluster> => {
      const seeds = cluster.masters().map((m) => ({ host: "127.0.0.1", port: m.port }));
      const c = new IORedisClusterClient(seeds, options);
      c.on("error", () => {});
      clients.push(c);
      if (c.status !== "ready") await new Promise((r) => c.once("ready", r));
      return c;
    };
    // Names whose keys live on different masters.
    const names = ["alpha", "bravo", "echo"];
    const keyOf = (name: string) => keysOf("redlease", name).hash;

    before(async () => {
      topo = await import("../harness/topology.ts");
      cluster = await topo.startCluster({ masters: 3, replicasPerMaster: 1 });
    });
    after(async () => {
      for (const c of clients) await c.quit().catch(() => {});
      await cluster?.stop();
    });

    test("ioredis Cluster: acquire() waiters on every master are handed the lease by sharded pub/sub", async () => {
      assert.ok(new Set(names.map((n) => cluster.ownerOf(cluster.slotOf(keyOf(n))).port)).size >= 2);
      const [x, y] = [
        ioredis(await newCluster({ shardedSubscribers: true })),
        ioredis(await newCluster({ shardedSubscribers: true })),
      ];
      assert.equal(x.sharded, true);
      for (const name of names) {
        const holder = await acquire(x, name);
        const waiting = acquire(y, name, { waitMs: 15_000, claimMs: 10_000 }); // (a missed message: 10 s)
        await until("the waiter is queued", async () => (await inspect(x, name)).waiters === 1);
        const t0 = performance.now();
        await release(holder);
        const next = await waiting;
        const took = performance.now() - t0;
        assert.ok(took < 2_000, `${name}: handoff took ${took} ms`);
        await release(next);
      }
    });

    test("ioredis Cluster: acquire() waiters poll without shardedSubscribers and still get the lease", async () => {
      const [x, y] = [ioredis(await newCluster({})), ioredis(await newCluster({}))];
      assert.equal(x.subscribe, undefined);
      const holder = await acquire(x, names[0]);
      const waiting = acquire(y, names[0], { waitMs: 10_000 });
      await sleep(200);
      assert.equal((await inspect(x, names[0])).waiters, 0);
      await release(holder);
      await release(await waiting);
    });

    test("ioredis Cluster: acquire() recovers from NOSCRIPT on every master", async () => {
      const x = ioredis(await newCluster({}));
      for (const name of names) await release(await acquire(x, name));
      for (const m of cluster.masters()) await cluster.command(m.port, "SCRIPT", "FLUSH");
      for (const name of names) await release(await acquire(x, name, { waitMs: 0 }));
    });

    test("ioredis Cluster: acquire() with replicas sends WAIT to the master that wrote the lease", async () => {
      const x = ioredis(await newCluster({}));
      for (const name of names) {
        const info = String(await x.command!(keyOf(name), ["INFO", "server"]));
        assert.equal(Number(/tcp_port:(\d+)/.exec(info)?.[1]), cluster.ownerOf(cluster.slotOf(keyOf(name))).port);
        await release(await acquire(x, name, { replicas: 1, replicaTimeoutMs: 2_000 }));
      }
      // With the replica of alpha's master stopped, only alpha's shard falls short.
      const owner = cluster.ownerOf(cluster.slotOf(keyOf("alpha")));
      const replica = cluster.replicas().find((r) => r.masterId === owner.id)!;
      topo.pause(replica.pid);
      try {
        await assert.rejects(acquire(x, "alpha", { replicas: 1, replicaTimeoutMs: 300 }), ReplicationError);
        const other = names.find((n) => cluster.ownerOf(cluster.slotOf(keyOf(n))).port !== owner.port)!;
        await release(await acquire(x, other, { replicas: 1, replicaTimeoutMs: 2_000 }));
      } finally {
        topo.resume(replica.pid);
      }
    });

    test("ioredis Sentinel: handoff, replicas and NOSCRIPT recovery after a failover", async () => {
      const s = await topo.startSentinel({ replicas: 1, sentinels: 3 });
      try {
        const [x, y] = [ioredis(await s.ioredisClient()), ioredis(await s.ioredisClient())];
        const holder = await acquire(x, "s1");
        const waiting = acquire(y, "s1", { waitMs: 15_000, claimMs: 10_000 }); // (a missed message: 10 s)
        await until("the waiter is queued", async () => (await inspect(x, "s1")).waiters === 1);
        const t0 = performance.now();
        await release(holder);
        await release(await waiting);
        assert.ok(performance.now() - t0 < 2_000);
        await release(await acquire(x, "s2", { replicas: 1, replicaTimeoutMs: 2_000 }));
        const old = s.master.port;
        await s.killMaster();
        await s.waitForFailover(old);
        // ioredis asks the sentinels for the new master; its empty script cache answers NOSCRIPT once.
        await until("the new master is reachable", async () => {
          try {
            await release(await acquire(x, "s3", { waitMs: 0 }));
            return true;
          } catch {
            return false;
          }
        }, 10_000);
      } finally {
        await s.stop();
      }
    });
  });
}

/** The GLIDE adapter's own tests (see src/adapters/glide.ts), on the contract's server. */
function glideExtras(ctx: Ctx): void {
  test("glide: glide() returns one driver per client and rejects what is not a GLIDE client", async () => {
    const c = await glideClient(ctx.srv.url);
    try {
      assert.equal(glide(c), glide(c));
      assert.throws(
        () => glide({} as never),
        (e) => e instanceof TypeError && /must be a GLIDE client/.test(e.message),
      );
      const pending = glideClient(ctx.srv.url);
      assert.throws(
        () => glide(pending as never),
        (e) => e instanceof TypeError && /await createClient/.test(e.message),
      );
      (await pending).close();
      assert.throws(() => glide(new IORedis(ctx.srv.url, { lazyConnect: true }) as never), TypeError);
    } finally {
      c.close();
    }
  });

  test("glide: error replies keep Redis's wording: NOSCRIPT is recovered from, WRONGTYPE is no outage", async () => {
    assert.equal(
      redisWording("An error was signalled by the server: - NoScriptError: No matching script. Please use EVAL."),
      "NOSCRIPT No matching script. Please use EVAL.",
    );
    assert.equal(redisWording("WRONGTYPE: Operation against a key"), "WRONGTYPE Operation against a key");
    assert.equal(redisWording("An error was signalled by the server: - ResponseError: unknown"), "ERR unknown");
    assert.equal(redisWording("Request timed out"), undefined);
    const name = ctx.fresh();
    await ctx.admin.hSet(keysOf("redlease", name).hash, "f", "not a lease record");
    const e = await acquire(ctx.a, name).then(() => null, (e: unknown) => e);
    assert.ok(e instanceof Error && /^WRONGTYPE /.test(e.message), String(e));
    assert.ok(!(e instanceof RedisUnavailableError));
    await ctx.admin.del(keysOf("redlease", name).hash);
  });

  test("glide: WAIT outlives GLIDE's default 250 ms request timeout: too few replicas is a ReplicationError", async () => {
    const c = await glideClient(ctx.srv.url, { requestTimeout: undefined }); // GLIDE's default: 250 ms
    try {
      const t0 = performance.now();
      const e = await acquire(glide(c), ctx.fresh(), { replicas: 1, replicaTimeoutMs: 700 }).then(
        () => null,
        (e: unknown) => e,
      );
      const took = performance.now() - t0;
      assert.ok(e instanceof ReplicationError, String(e));
      assert.ok(took >= 650, `WAIT ended after ${took} ms`);
    } finally {
      c.close();
    }
  });

  test("glide: a client created with a pub/sub callback gets every message, so its waiters poll", async () => {
    const c = await glideClient(ctx.srv.url, {
      pubsubSubscriptions: { channelsAndPatterns: {}, callback: () => {} },
    });
    try {
      const d = glide(c);
      assert.equal(d.subscribe, undefined);
      const name = ctx.fresh();
      const holder = await acquire(ctx.a, name);
      const waiting = acquire(d, name, { waitMs: 10_000 });
      await sleep(200);
      assert.equal((await inspect(ctx.admin, name)).waiters, 0, "a polling waiter does not queue");
      await release(holder);
      await release(await waiting);
    } finally {
      c.close();
    }
  });
}
