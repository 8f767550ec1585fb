// The fault tests of tests/faults.test.ts, with Valkey GLIDE (redlease/glide) between the chaos proxy
// (chaos/_proxy.ts) and a real redis-server: a reply lost after the command ran, a connection reset, a half-open
// connection, a reply that comes after the lease ran out, and a handoff message lost while GLIDE reconnected. GLIDE
// keeps one connection per client, carrying both the commands and the waiters' subscriptions, so each fault hits
// both. Also the counterpart of faults.test.ts's ioredis `stringNumbers` case: a client whose replies are bytes.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Decoder, type GlideClient } from "@valkey/valkey-glide";
import { acquire, inspect, LockTimeoutError, RedisUnavailableError, release } from "../mod.ts";
import { glide } from "../src/adapters/glide.ts";
import { type FaultProxy, startProxy } from "../chaos/_proxy.ts";
import { type Client, holdsOf, queued, type RedisServer, settled, sleep, startRedis } from "./_redis.ts";
import { glideClient } from "./_glide.ts";

let n = 0;
const fresh = () => `glide-fault-${++n}-${Math.random().toString(36).slice(2)}`;

/** Settles within `ms`, else rejects: a test never hangs on the behaviour it checks. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still pending after ${ms} ms`)), ms);
  });
  return Promise.race([p, limit]).finally(() => clearTimeout(timer));
}

describe("the fault contract on Valkey GLIDE", () => {
  let srv: RedisServer;
  let admin: Client;
  const proxies: FaultProxy[] = [];
  const clients: GlideClient[] = [];
  /** A GLIDE client through a proxy of its own, reconnecting quickly. */
  const routed = async () => {
    const proxy = await startProxy({ port: srv.port });
    proxies.push(proxy);
    const client = await glideClient(proxy.url, {
      connectionBackoff: { numberOfRetries: 3, factor: 20, exponentBase: 2 },
    });
    clients.push(client);
    return { proxy, client, driver: glide(client) };
  };

  before(async () => {
    srv = await startRedis();
    admin = await srv.client();
  });
  after(async () => {
    for (const c of clients) c.close();
    for (const p of proxies) await p.close();
    await srv.stop();
  });

  test("a fixed owner whose acquire reply was lost: the retry holds once, not twice", async () => {
    const { proxy, driver } = await routed();
    await release(await acquire(driver, fresh())); // scripts cached, connection up
    const name = fresh();
    const lost = proxy.loseNextReply({ kind: "all" });
    const first = await settled(acquire(driver, name, { owner: "svc-3", waitMs: 2_000 }));
    await within(lost, 5_000, "the reply was lost");
    if (first.error) assert.ok(first.error instanceof RedisUnavailableError, `an outage: ${first.error}`);
    const lease = first.value ?? await within(acquire(driver, name, { owner: "svc-3", waitMs: 5_000 }), 6_000, "retry");
    await sleep(100);
    assert.deepEqual(holdsOf(await inspect(admin, name)), [{ owner: lease.owner, holds: 1 }]);
    assert.equal(await release(lease), true);
    assert.equal((await inspect(admin, name)).held, false, "one release frees it");
  });

  test("a waiter whose connection is reset takes a freed lease within about a claim window", async () => {
    const name = fresh();
    const holder = await acquire(admin, name);
    const { proxy, driver } = await routed();
    const waiting = settled(acquire(driver, name, { waitMs: 20_000, claimMs: 500 }));
    await queued(admin, name, 1);
    await sleep(300); // the reply of its queueing call read: the reset cuts no call in flight (that would be an outage)
    assert.ok(proxy.reset() >= 1, "the waiter's connection was reset");
    await sleep(50);
    const t0 = performance.now();
    await release(holder);
    const { value: lease, error } = await within(waiting, 5_000, "the waiter");
    assert.ok(lease, `the waiter got no lease: ${error}`);
    const took = performance.now() - t0;
    assert.ok(took < 1_600, `the waiter took it ${Math.round(took)} ms after the release`);
    await release(lease);
  });

  test("a waiter whose connection goes half-open at the handoff: the grant passes to the next live waiter", async () => {
    const name = fresh();
    const holder = await acquire(admin, name);
    const cut = await routed();
    const live = await srv.client();
    const doomed = settled(acquire(cut.driver, name, { waitMs: 3_000, claimMs: 500 }));
    await queued(admin, name, 1);
    const next = acquire(live, name, { waitMs: 20_000, claimMs: 500 });
    await queued(admin, name, 2);
    cut.proxy.blackhole({ kind: "all", direction: "both" });
    const t0 = performance.now();
    await release(holder);
    const lease = await within(next, 5_000, "the next live waiter");
    const took = performance.now() - t0;
    assert.ok(took < 1_600, `passed on ${Math.round(took)} ms after the release (claim window 500 ms)`);
    const d = await within(doomed, 6_000, "the cut-off waiter settles by its waitMs");
    assert.ok(d.error instanceof RedisUnavailableError, `the cut-off waiter's Redis stopped answering: ${d.error}`);
    cut.proxy.heal();
    assert.deepEqual(holdsOf(await inspect(admin, name)), [{ owner: lease.owner, holds: 1 }]);
    await release(lease);
    await live.disconnect();
  });

  test("a half-open connection: acquire settles at once when its signal aborts, and by waitMs otherwise", async () => {
    const { proxy, driver } = await routed();
    await release(await acquire(driver, fresh()));
    proxy.blackhole({ kind: "all", direction: "both" });
    try {
      const ac = new AbortController();
      setTimeout(() => ac.abort(new Error("enough")), 300);
      const r = await settled(within(acquire(driver, fresh(), { signal: ac.signal }), 10_000, "acquire"));
      assert.equal((r.error as Error)?.message, "enough");
      assert.ok(r.ms < 700, `settled after ${Math.round(r.ms)} ms`);
      const w = await settled(within(acquire(driver, fresh(), { waitMs: 800 }), 10_000, "acquire"));
      assert.ok(w.error instanceof RedisUnavailableError, `an outage: ${w.error}`);
      assert.ok(w.ms < 1_800, `settled after ${Math.round(w.ms)} ms (waitMs 800 + grace)`);
    } finally {
      proxy.heal();
    }
  });

  test("a handoff message lost while GLIDE reconnected: the waiter re-checks once its connection is back", async () => {
    const name = fresh();
    const holder = await acquire(admin, name);
    const { proxy, driver } = await routed();
    // A 10 s claim window (heartbeat ~3.3 s): only the adapter's reconnection check makes the waiter re-check sooner.
    const waiting = settled(acquire(driver, name, { waitMs: 15_000, claimMs: 10_000 }));
    await queued(admin, name, 1);
    await sleep(300); // the reply of its queueing call read: the reset cuts no call in flight (that would be an outage)
    proxy.pause(); // GLIDE cannot reconnect: the release's message reaches no one of this client
    assert.ok(proxy.reset() >= 1);
    await release(holder);
    await sleep(300);
    proxy.resume();
    const t0 = performance.now();
    const { value: lease, error } = await within(waiting, 12_000, "the waiter");
    assert.ok(lease, `the waiter got no lease: ${error}`);
    const took = performance.now() - t0;
    assert.ok(took < 2_500, `the waiter got the lease ${Math.round(took)} ms after GLIDE could reconnect`);
    await release(lease);
  });

  test("a grant whose reply arrives after the lease ran out is not returned", async () => {
    const { proxy, driver } = await routed();
    await release(await acquire(driver, fresh()));
    const name = fresh();
    proxy.delay({ ms: 1_500, kind: "all", direction: "down" });
    const r = await settled(within(acquire(driver, name, { leaseMs: 500, waitMs: 1_000 }), 10_000, "acquire"));
    proxy.delay({ ms: 0, kind: "all", direction: "down" });
    if (r.value) {
      assert.ok(r.value.remainingMs > 0 && !r.value.signal.aborted, "a returned lease is live");
    } else {
      // Too slow to hold a lease: an outage (a timeout, or a grant that came too late), not contention (issue 31).
      assert.ok(r.error instanceof RedisUnavailableError, `rejects with RedisUnavailableError: ${r.error}`);
    }
    assert.ok(r.ms < 2_000, `settled after ${Math.round(r.ms)} ms`);
  });

  test("a grant whose reply arrives after the caller's deadline is undone at once, not left to its TTL", async () => {
    const { proxy, driver } = await routed();
    await release(await acquire(driver, fresh()));
    const name = fresh();
    // Replies held back 4 s, the call bounded by waitMs 500 (+ its grace): given up long before the grant's reply.
    proxy.delay({ ms: 4_000, kind: "all", direction: "down" });
    const t0 = performance.now();
    const r = await settled(within(acquire(driver, name, { leaseMs: 10_000, waitMs: 500 }), 10_000, "acquire"));
    assert.ok(r.error instanceof RedisUnavailableError, `rejects with RedisUnavailableError: ${r.error}`);
    // The grant ran at once (only replies are held back): its 10 s TTL would keep it held for a while yet, but the
    // given-up call's undo has run by now (its command is not delayed).
    await sleep(Math.max(0, 2_500 - (performance.now() - t0)));
    const info = await inspect(admin, name);
    proxy.delay({ ms: 0, kind: "all", direction: "down" });
    assert.ok(performance.now() - t0 < 8_000, "read well inside the grant's TTL");
    assert.equal(info.held, false, "nothing left held: the undo ran");
  });

  test("a client whose replies are bytes (defaultDecoder Bytes) never reads 'busy' as a grant, and is handed leases", async () => {
    const name = fresh();
    const holder = await acquire(admin, name, { leaseMs: 30_000 });
    const c = await glideClient(srv.url, { defaultDecoder: Decoder.Bytes });
    clients.push(c);
    const driver = glide(c);
    await assert.rejects(acquire(driver, name, { waitMs: 0 }), LockTimeoutError);
    await assert.rejects(acquire(driver, name, { waitMs: 300 }), LockTimeoutError);
    const lease = await acquire(driver, fresh());
    assert.ok(lease.fence > 0);
    assert.equal(await release(lease), true);
    // Its waiter reads the handoff message (a channel and payload in bytes too).
    const waiting = acquire(driver, name, { waitMs: 10_000 });
    await queued(admin, name, 1);
    const t0 = performance.now();
    await release(holder);
    const next = await within(waiting, 5_000, "the waiter");
    assert.ok(performance.now() - t0 < 1_000, "handed over by the message, not found by its heartbeat");
    assert.equal(await release(next), true);
  });
});
