// An outage is not contention (issue 31): with Redis stopped (SIGKILL) or paused (SIGSTOP), every call rejects with
// RedisUnavailableError — RedisTimeoutError where a bound passed — carrying the Redis client's last error as its
// cause, never with LockTimeoutError; LockTimeoutError means held by others, and its times are whole milliseconds; a
// lease lost as "unreachable" carries the last error too; the attempt of an acquire is undone once Redis answers.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient } from "redis";
import { Redis as IORedis } from "ioredis";
import {
  acquire,
  campaign,
  type Driver,
  extend,
  forceUnlock,
  inspect,
  isLeaseLostError,
  isLockTimeoutError,
  isRedisUnavailableError,
  type Lease,
  LockTimeoutError,
  RedisTimeoutError,
  type RedisUnavailableError,
  release,
  resume,
  withLock,
} from "../mod.ts";
import { ioredis } from "../src/adapters/ioredis.ts";
import { nodeRedis } from "../src/adapters/node_redis.ts";
import { glide } from "../src/adapters/glide.ts";
import { glideClient } from "./_glide.ts";
import { abortedWithin, type Client, holdsOf, queued, type RedisServer, sleep, startRedis, until } from "./_redis.ts";

let n = 0;
const fresh = () => `outage-${++n}-${Math.random().toString(36).slice(2)}`;

/** The error `p` rejects with (fails when it resolves), within `ms`. */
async function rejection(p: Promise<unknown>, ms = 10_000): Promise<unknown> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms);
  });
  try {
    await Promise.race([p, limit]);
  } catch (e) {
    return e;
  } finally {
    clearTimeout(timer);
  }
  throw new Error("resolved; expected a rejection");
}

/** A node-redis client as users make them: offline queue on, endless reconnects, an error listener. */
async function userClient(url: string, options: { disableOfflineQueue?: boolean } = {}): Promise<Client> {
  const c = createClient({ url, socket: { reconnectStrategy: 50 }, ...options });
  c.on("error", () => {});
  await c.connect();
  return c;
}

/** An outage's error: a RedisUnavailableError (a RedisTimeoutError when `timedOut`), never a LockTimeoutError. */
function assertOutage(err: unknown, what: string, timedOut: boolean, withCause = true): void {
  assert.ok(isRedisUnavailableError(err), `${what}: expected RedisUnavailableError, got ${err}`);
  assert.ok(!isLockTimeoutError(err), `${what}: an outage is not contention`);
  assert.equal(err instanceof RedisTimeoutError, timedOut, `${what}: ${err}`);
  if (err instanceof RedisTimeoutError) assert.ok(Number.isInteger(err.timeoutMs), `${what}: whole ms`);
  if (withCause) assert.ok(err.cause instanceof Error, `${what}: the client's last error as cause, got ${err.cause}`);
}

describe("outages are RedisUnavailableError, contention is LockTimeoutError", () => {
  let srv: RedisServer;
  let admin: Client;
  before(async () => {
    srv = await startRedis();
    admin = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("contention: a LockTimeoutError in whole milliseconds, and no outage", async () => {
    const name = fresh();
    const held = await acquire(admin, name, { leaseMs: 10_000 });
    const c = await srv.client();
    for (const waitMs of [0, 120]) {
      const err = await rejection(acquire(c, name, { waitMs }));
      assert.ok(err instanceof LockTimeoutError, String(err));
      assert.ok(!isRedisUnavailableError(err));
      assert.ok(Number.isInteger(err.remainingMs) && err.remainingMs > 0, `remainingMs ${err.remainingMs}`);
      assert.ok(Number.isInteger(err.waitedMs) && err.waitedMs >= waitMs, `waitedMs ${err.waitedMs}`);
    }
    await release(held);
  });

  test("Redis stopped, offline queue: every call rejects with RedisTimeoutError whose cause is the client's error", async () => {
    const own = await startRedis();
    const c = await userClient(own.url);
    try {
      const before = await acquire(c, fresh(), { leaseMs: 20_000 }); // scripts loaded; released after the outage
      const other = await acquire(c, fresh(), { leaseMs: 20_000 });
      const token = other.token;
      await own.kill();
      await until("the client saw its connection drop", () => !c.isReady);
      let errors = 0;
      c.on("error", () => errors++);
      await until("the client reported a connection error", () => errors > 0);
      const bound = { timeoutMs: 300 };
      assertOutage(await rejection(acquire(c, fresh(), { waitMs: 0 })), "acquire waitMs 0", true);
      assertOutage(await rejection(acquire(c, fresh(), { waitMs: 400 })), "acquire waitMs 400", true);
      assertOutage(await rejection(acquire(c, [fresh(), fresh()], { waitMs: 0 })), "acquire of two names", true);
      assertOutage(await rejection(withLock(c, fresh(), () => 1, { waitMs: 0 })), "withLock", true);
      assertOutage(await rejection(campaign(c, fresh(), { waitMs: 300 })), "campaign", true);
      assertOutage(await rejection(inspect(c, fresh(), bound)), "inspect", true);
      assertOutage(await rejection(forceUnlock(c, fresh(), bound)), "forceUnlock", true);
      assertOutage(await rejection(extend(before, 20_000, bound)), "extend", true);
      assertOutage(await rejection(resume(c, token, bound)), "resume", true);
      assertOutage(await rejection(release(before, bound)), "release", true);
    } finally {
      await c.disconnect().catch(() => {});
      await own.stop();
    }
  });

  test("Redis stopped, no offline queue: every call rejects at once with RedisUnavailableError, the client's error as cause", async () => {
    const own = await startRedis();
    const c = await userClient(own.url, { disableOfflineQueue: true });
    try {
      const held = await acquire(c, fresh(), { leaseMs: 20_000 });
      await own.kill();
      await until("the client saw its connection drop", () => !c.isReady);
      const t0 = performance.now();
      assertOutage(await rejection(acquire(c, fresh(), { waitMs: 2_000 })), "acquire waitMs 2000", false);
      assertOutage(await rejection(acquire(c, fresh(), { waitMs: 0 })), "acquire waitMs 0", false);
      assertOutage(await rejection(inspect(c, fresh())), "inspect", false);
      assertOutage(await rejection(forceUnlock(c, fresh())), "forceUnlock", false);
      assertOutage(await rejection(extend(held)), "extend", false);
      assertOutage(await rejection(release(held)), "release", false);
      assert.ok(performance.now() - t0 < 2_000, "none waited for its bound");
    } finally {
      await c.disconnect().catch(() => {});
      await own.stop();
    }
  });

  test("ioredis (redlease/ioredis), Redis stopped: RedisUnavailableError, the client's error as cause", async () => {
    const own = await startRedis();
    const io = new IORedis(own.port, "127.0.0.1", { retryStrategy: () => 50 });
    let errors = 0;
    io.on("error", () => errors++);
    try {
      const driver = ioredis(io);
      // (A free lease, with time to load the script on a loaded machine: this part is not the outage.)
      await release(await acquire(driver, fresh(), { waitMs: 5_000 }), { timeoutMs: 5_000 });
      await own.kill();
      await until("the client reported a connection error", () => errors > 0);
      assertOutage(await rejection(acquire(driver, fresh(), { waitMs: 300 })), "acquire over ioredis", true);
    } finally {
      io.disconnect();
      await own.stop();
    }
  });

  test("GLIDE (redlease/glide), Redis stopped: RedisUnavailableError, the client's error as cause", async () => {
    const own = await startRedis();
    const g = await glideClient(own.url); // requestTimeout 5 s (tests/_glide.ts)
    try {
      const driver = glide(g);
      // (A free lease, with time to load the script on a loaded machine: this part is not the outage.)
      await release(await acquire(driver, fresh(), { waitMs: 5_000 }), { timeoutMs: 5_000 });
      await own.kill();
      // GLIDE has no error event, and while it reconnects a call fails only at its requestTimeout ("timed out"), not
      // at once: the client's error is that of a call, which the adapter keeps. A call bounded past requestTimeout
      // fails with it: an outage, GLIDE's error as cause. (A call that met the connection's end instead fails with
      // GLIDE's ConnectionError, "… channel closed …": as a loaded CI run saw.)
      const first = await rejection(inspect(driver, fresh(), { timeoutMs: 10_000 }));
      assertOutage(first, "inspect bounded past GLIDE's requestTimeout", false);
      assert.match(String((first as RedisUnavailableError).cause), /timed out|ConnectionError/i, "GLIDE's own error");
      assertOutage(await rejection(acquire(driver, fresh(), { waitMs: 300 })), "acquire over GLIDE", true);
    } finally {
      g.close();
      await own.stop();
    }
  });

  test("held, then no answer to the wait's SUBSCRIBE: an outage by waitMs + 250 ms, not busy", async () => {
    const name = fresh();
    const held = await acquire(admin, name, { leaseMs: 10_000 });
    const real = nodeRedis(await srv.client());
    const deaf: Driver = { ...real, subscribe: () => new Promise<never>(() => {}) }; // Redis says "held", then nothing
    const t0 = performance.now();
    const err = await rejection(acquire(deaf, name, { waitMs: 300 }));
    assertOutage(err, "a waiter whose subscription gets no answer", true, false);
    const ms = performance.now() - t0;
    assert.ok(ms >= 500 && ms < 2_000, `settled after ${Math.round(ms)} ms (waitMs 300 + grace 250)`);
    // A wait that Redis keeps answering "held" is busy, however short. (Its call is bounded by waitMs + 250 ms: on a
    // loaded CI run the answer once took longer, an outage then, rightly; so up to 5 tries, each busy or slow.)
    let busy: unknown;
    for (let i = 0; i < 5 && !(busy instanceof LockTimeoutError); i++) {
      busy = await rejection(acquire(real, name, { waitMs: 1 }));
      assert.ok(busy instanceof LockTimeoutError || isRedisUnavailableError(busy), String(busy));
    }
    assert.ok(busy instanceof LockTimeoutError, String(busy));
    await release(held);
  });

  test("held, then Redis stopped during the wait: the outage wins", async () => {
    const own = await startRedis();
    const holder = await own.client();
    const c = await userClient(own.url);
    try {
      const name = fresh();
      await acquire(holder, name, { leaseMs: 20_000 });
      const waiting = rejection(acquire(c, name, { waitMs: 1_500 }));
      await queued(holder, name, 1); // Redis answered "held"
      await own.kill();
      assertOutage(await waiting, "the waiter", true);
    } finally {
      await c.disconnect().catch(() => {});
      await own.stop();
    }
  });

  test("Redis paused (no answer, no error): RedisTimeoutError; the attempt is undone once Redis answers", async () => {
    const own = await startRedis();
    const c = await own.client();
    try {
      await release(await acquire(c, fresh()));
      const name = fresh();
      own.pause();
      let err: unknown;
      try {
        err = await rejection(acquire(c, name, { waitMs: 0 }));
      } finally {
        own.resume();
      }
      assertOutage(err, "acquire from a paused Redis", true, false);
      // The acquire ran once Redis was back, and its undo after it: nothing is left held.
      await sleep(300);
      assert.deepEqual(holdsOf(await inspect(c, name)), []);
      const lease = await acquire(c, name, { waitMs: 0 });
      assert.equal(await release(lease), true);
    } finally {
      await own.stop();
    }
  });

  test("a lease lost as unreachable carries the last Redis error as its cause", async () => {
    const own = await startRedis();
    const c = await userClient(own.url);
    let lease: Lease | undefined;
    try {
      lease = await acquire(c, fresh(), { watchdogMs: 300 });
      await own.kill();
      const reason = await abortedWithin(lease.signal, 5_000);
      assert.ok(isLeaseLostError(reason) && reason.why === "unreachable", String(reason));
      assert.ok(isRedisUnavailableError(reason.cause), `cause: ${reason.cause}`);
      assert.ok((reason.cause as RedisUnavailableError).cause instanceof Error, "and the client's error under it");
    } finally {
      await c.disconnect().catch(() => {});
      await own.stop();
    }
  });
});
