// Leader election on the lease engine: campaign() elects one candidate at a time with a strictly increasing term,
// proclaim() publishes the leader's value, observe() reports the current state and then every change (new leader,
// value, resignation, a leader that died), and resigning is release(). Two clients stand for two processes.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  acquire,
  campaign,
  type LeaderState,
  LeaseLostError,
  LockTimeoutError,
  observe,
  proclaim,
  release,
} from "../mod.ts";
import { upstash } from "../src/adapters/http.ts";
import { nodeRedisDriver } from "../src/_node_redis.ts";
import { proclaim as PROCLAIM } from "../src/_scripts.ts";
import type { Driver } from "../src/driver.ts";
import { forceUnlock, inspect } from "../mod.ts";
import { startHttpBridge } from "../harness/http_bridge.ts";
import { type Client, noCommands, queued, type RedisServer, sleep, startRedis } from "./_redis.ts";
import { waitUntil } from "../harness/wait.ts";

/** Until the candidate's entry is in `name`'s queue in Redis (a fixed sleep assumed an idle machine). */

let srv: RedisServer;
let a: Client;
let b: Client;
let n = 0;
const fresh = () => `election-test-${++n}-${Math.random().toString(36).slice(2)}`;

/** Collects the states an observer yields, until `stop` aborts. */
function watchAll(client: Parameters<typeof observe>[0], name: string, options: { pollMs?: number } = {}) {
  const stop = new AbortController();
  const seen: LeaderState[] = [];
  let wake: (() => void) | undefined;
  const done = (async () => {
    for await (const s of observe(client, name, { signal: stop.signal, ...options })) {
      seen.push(s);
      wake?.();
    }
  })();
  /** Resolves once a state matching `pred` was seen (or rejects after `ms`). */
  const until = async (pred: (s: LeaderState) => boolean, ms = 3_000): Promise<LeaderState> => {
    const end = performance.now() + ms;
    for (;;) {
      const hit = seen.find(pred);
      if (hit) return hit;
      if (performance.now() > end) throw new Error(`not seen within ${ms} ms: ${JSON.stringify(seen)}`);
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, 20);
      });
    }
  };
  return { seen, until, stop: async () => (stop.abort(), await done) };
}

describe("leader election", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("a leadership's TTL is 8 s by default (not a lock's 30 s); watchdogMs and leaseMs still choose it", async () => {
    const ttl = async (options?: Parameters<typeof campaign>[2]) => {
      const name = fresh();
      const lease = await campaign(a, name, options);
      const left = (await inspect(b, name)).remainingMs;
      await release(lease);
      return left;
    };
    const byDefault = await ttl();
    assert.ok(byDefault > 7_000 && byDefault <= 8_000, String(byDefault));
    const undefinedGiven = await ttl({ watchdogMs: undefined, leaseMs: undefined });
    assert.ok(undefinedGiven > 7_000 && undefinedGiven <= 8_000, String(undefinedGiven));
    const longer = await ttl({ watchdogMs: 30_000 });
    assert.ok(longer > 29_000 && longer <= 30_000, String(longer));
    const fixed = await ttl({ leaseMs: 60_000 });
    assert.ok(fixed > 59_000 && fixed <= 60_000, String(fixed));
  });

  test("waitMs: undefined campaigns until elected, as no waitMs does (not acquire's 10 s default)", async () => {
    const name = fresh();
    const leader = await campaign(a, name, { leaseMs: 30_000 });
    const candidate = campaign(b, name, { waitMs: undefined });
    candidate.catch(() => {}); // (checked below)
    const after = await Promise.race([candidate.then(() => "elected", (e) => `rejected: ${e}`), sleep(10_600)]);
    assert.equal(after, undefined, "still campaigning after 10.6 s");
    await release(leader);
    const next = await candidate;
    assert.ok(next.fence > leader.fence);
    await release(next);
  });

  test("one leader at a time; a resignation elects the next candidate with a higher term", async () => {
    const name = fresh();
    const first = await campaign(a, name);
    const second = campaign(b, name);
    await queued(a, name);
    assert.equal(first.signal.aborted, false);
    await release(first); // resign
    const next = await second;
    assert.ok(next.fence > first.fence, "a new term");
    await assert.rejects(campaign(a, name, { waitMs: 0 }), LockTimeoutError);
    await release(next);
  });

  test("observe: the current state first, then a new leader, its value, a resignation (vacancy) — each once", async () => {
    const name = fresh();
    const leader = await campaign(a, name, { value: "v1" });
    const w = watchAll(b, name);
    const s0 = await w.until(() => true);
    assert.deepEqual([s0.leader, s0.term, s0.value], [leader.owner, leader.fence, "v1"]);
    assert.ok(s0.remainingMs > 0);
    assert.equal(await proclaim(leader, "v2"), true);
    await w.until((s) => s.value === "v2");
    const candidate = campaign(b, name);
    await queued(a, name);
    const t0 = performance.now();
    await release(leader);
    const next = await candidate;
    const s2 = await w.until((s) => s.leader === next.owner);
    assert.ok(performance.now() - t0 < 1_500, "told by message, not found by a timer");
    assert.equal(s2.term, next.fence);
    assert.equal(s2.value, undefined, "a new term starts without a value");
    await release(next);
    await w.until((s) => s.leader === undefined);
    await w.stop();
    for (let i = 1; i < w.seen.length; i++) {
      const [p, q] = [w.seen[i - 1], w.seen[i]];
      assert.ok(p.leader !== q.leader || p.term !== q.term || p.value !== q.value, "consecutive states differ");
    }
  });

  test("a leader that dies is seen to go when its lease ends, and the waiting candidate takes over", async () => {
    const name = fresh();
    // A fixed lease never renewed or released: its holder "died".
    const dead = await campaign(a, name, { leaseMs: 400 });
    const w = watchAll(b, name);
    await w.until((s) => s.leader === dead.owner);
    const next = await campaign(b, name, { waitMs: 5_000 });
    assert.ok(next.fence > dead.fence);
    await w.until((s) => s.leader === next.owner);
    const reason = dead.signal.reason;
    assert.ok(reason instanceof LeaseLostError, String(reason));
    await release(next);
    await w.stop();
    // Nobody else waiting: the observer sees the vacancy when the TTL ends.
    const alone = await campaign(a, name, { leaseMs: 300 });
    const w2 = watchAll(b, name);
    await w2.until((s) => s.leader === alone.owner);
    await w2.until((s) => s.leader === undefined, 2_000);
    await w2.stop();
  });

  test("proclaim by a leader whose term ended returns false and changes nothing", async () => {
    const name = fresh();
    const old = await campaign(a, name, { leaseMs: 300, value: "old" });
    await sleep(400);
    const now = await campaign(b, name, { value: "new" });
    assert.equal(await proclaim(old, "stale"), false);
    const w = watchAll(b, name);
    const s = await w.until(() => true);
    assert.deepEqual([s.leader, s.value], [now.owner, "new"]);
    await w.stop();
    await release(now);
  });

  test("an election through the HTTP driver: observe polls", async () => {
    const bridge = await startHttpBridge(srv.url);
    try {
      const http = upstash({ url: bridge.url, token: bridge.token });
      const name = fresh();
      const w = watchAll(http, name, { pollMs: 50 });
      await w.until((s) => s.leader === undefined);
      const leader = await campaign(http, name, { value: "x" });
      await w.until((s) => s.leader === leader.owner && s.value === "x");
      await release(leader);
      await w.until((s) => s.leader === undefined && s.term === leader.fence);
      await w.stop();
    } finally {
      await bridge.stop();
    }
  });

  test("bad input is rejected before any Redis command", async () => {
    await assert.rejects(campaign(noCommands(), "e", { value: 3 as unknown as string }), TypeError);
    await assert.rejects(campaign(noCommands(), "e", { shared: true } as never), TypeError);
    assert.throws(() => observe(noCommands(), ""), RangeError);
    assert.throws(() => observe(noCommands(), "e", { pollMs: 1 }), RangeError);
    const lease = await acquire(a, fresh(), { shared: true });
    await assert.rejects(proclaim(lease, "x"), TypeError);
    await assert.rejects(proclaim(lease, 5 as unknown as string), TypeError);
    await release(lease);
  });
});

// Found by an adversarial review: each failed before its fix.
describe("leader election: edge cases", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("a candidate that loses its lease before its proclamation is not elected: it campaigns on", async () => {
    const name = fresh();
    const base = nodeRedisDriver(a);
    let once = true;
    const driver: Driver = {
      evalScript: async (sha, keys, args, signal) => {
        if (sha === PROCLAIM.sha && args[0] !== "" && once) {
          once = false;
          await forceUnlock(b, name); // lost between the grant and the proclamation
        }
        return base.evalScript(sha, keys, args, signal);
      },
      evalSource: (src, keys, args, signal) => base.evalSource!(src, keys, args, signal),
      loadScript: (src, key, signal) => base.loadScript(src, key, signal),
      subscribe: (c, l) => base.subscribe!(c, l),
      unsubscribe: (c, l) => base.unsubscribe!(c, l),
    };
    const leader = await campaign(driver, name, { value: "v", waitMs: 5_000 });
    assert.equal(once, false, "the first proclamation found the lease gone");
    assert.equal(leader.signal.aborted, false);
    const w = watchAll(b, name);
    const s = await w.until(() => true);
    assert.deepEqual([s.leader, s.value], [leader.owner, "v"], "elected, with its value, on the second try");
    await w.stop();
    await release(leader);
  });

  test("an observer aborted while it subscribes leaves no subscription behind", async () => {
    const name = fresh();
    const stop = new AbortController();
    const it = observe(b, name, { signal: stop.signal });
    const first = it.next();
    stop.abort();
    assert.equal((await first).done, true);
    await waitUntil("the aborted observer's subscription is gone", 10_000, async () => {
      const [, count] = await a.sendCommand(["PUBSUB", "NUMSUB", `redlease:{${name}}:o`]) as [string, number];
      return Number(count) === 0 || `${count} subscribed`;
    }, 20);
  });

  test("a resignation is announced before release() resolves: a client that disconnects at once still tells observers", async () => {
    const name = fresh();
    const c = await srv.client();
    const leader = await campaign(c, name, { watchdogMs: 20_000 });
    const w = watchAll(b, name);
    await w.until((s) => s.leader === leader.owner);
    const t0 = performance.now();
    await release(leader);
    await c.disconnect();
    await w.until((s) => s.leader === undefined, 2_000);
    assert.ok(performance.now() - t0 < 1_500);
    await w.stop();
  });

  test("a forceUnlock is announced; once nobody leads, the term shown does not go back when Redis forgets it", async () => {
    const name = fresh();
    const leader = await campaign(a, name, { watchdogMs: 20_000 });
    const w = watchAll(b, name); // reads again on a message, at the TTL's end (20 s) or every 30 s
    await w.until((s) => s.leader === leader.owner);
    assert.equal(await forceUnlock(a, name), true);
    await w.until((s) => s.leader === undefined, 1_500);
    await w.stop();
    const polling = watchAll(b, name, { pollMs: 50 });
    await polling.until((s) => s.leader === undefined);
    await a.pExpire(`redlease:{${name}}`, 1); // the kept fence expires
    await sleep(300); // several reads
    await polling.stop();
    assert.deepEqual(polling.seen.map((s) => s.term), [leader.fence], JSON.stringify(polling.seen));
  });
});
