// Unknown option keys (issue 31): in plain JavaScript a misspelt option (`{ wait: 1000 }`) was ignored and its
// default used. Every exported function that takes an options object now rejects an unknown key with a TypeError
// that names it and the closest valid one, before any Redis command.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  acquire,
  campaign,
  configure,
  type Driver,
  extend,
  forceUnlock,
  inspect,
  observe,
  proclaim,
  release,
  resume,
  withLock,
} from "../mod.ts";
import { fencedDel, fencedEval, fencedHSet, fencedIncrBy, fencedSet, fencedSqlUpdate } from "../src/fence.ts";
import { otel } from "../src/otel.ts";
import { upstash } from "../src/adapters/http.ts";
import { nodeRedis } from "../src/adapters/node_redis.ts";
import { type Client, type RedisServer, startRedis } from "./_redis.ts";

// deno-lint-ignore no-explicit-any
type AnyFn = (...args: any[]) => unknown;
/** Call `f` with any arguments (as plain JavaScript may), as a promise that carries whatever it throws. */
const call = (f: AnyFn, ...args: unknown[]) => Promise.resolve().then(() => f(...args));

/** `p` rejects with a TypeError naming `key` and suggesting `closest` (or listing the valid options). */
async function unknown(p: Promise<unknown>, key: string, closest: string | RegExp): Promise<void> {
  const hint = typeof closest === "string" ? `\\(did you mean '${closest}'\\?\\)` : closest.source;
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof TypeError, `expected a TypeError, got ${e}`);
    assert.match(e.message, new RegExp(`unknown option '${key}' ${hint}`));
    return true;
  });
}

describe("unknown option keys are a TypeError naming the closest valid key, before any command", () => {
  let srv: RedisServer;
  let a: Client;
  let sent = 0;
  let counted: Driver;
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    const d = nodeRedis(a);
    counted = {
      ...d,
      evalScript: (...args) => (sent++, d.evalScript(...args)),
      evalSource: (...args) => (sent++, d.evalSource!(...args)),
      command: (...args) => (sent++, d.command!(...args)),
    };
  });
  after(async () => {
    await srv.stop();
  });

  test("the issue's case: { wait: 1000 } → 'waitMs'", async () => {
    await unknown(call(acquire, counted, "n", { wait: 1000 }), "wait", "waitMs");
    assert.equal(sent, 0);
  });

  test("acquire, withLock and campaign: misspelt, mis-cased and foreign keys", async () => {
    await unknown(call(acquire, counted, "n", { waitms: 0 }), "waitms", "waitMs");
    await unknown(call(acquire, counted, "n", { lease: 5000 }), "lease", "leaseMs");
    await unknown(
      call(acquire, counted, "n", { ttl: 5000 }),
      "ttl",
      /\(valid options: prefix, shared, .*retryDelayMs\)/,
    );
    await unknown(call(acquire, counted, ["x", "y"], { waitMS: 5 }), "waitMS", "waitMs");
    await unknown(call(withLock, counted, "n", () => 1, { watchdog: 100 }), "watchdog", "watchdogMs");
    await unknown(call(campaign, counted, "n", { lockDelay: 5 }), "lockDelay", "lockDelayMs");
    await unknown(call(campaign, counted, "n", { valeu: "x" }), "valeu", "value"); // campaign's own option
    // A key whose value is undefined is a key all the same; a valid one with undefined is fine.
    await unknown(call(acquire, counted, "n", { wait: undefined }), "wait", "waitMs");
    assert.equal(sent, 0);
  });

  test("release, extend, resume and proclaim (a live lease), inspect, forceUnlock, observe, configure", async () => {
    const lease = await acquire(counted, `opts-${Math.random()}`, { leaseMs: 10_000 });
    const leader = await campaign(counted, `opts-e-${Math.random()}`, { leaseMs: 10_000, waitMs: 0 });
    sent = 0;
    await unknown(call(release, lease, { timeout: 5 }), "timeout", "timeoutMs");
    await unknown(call(extend, lease, 1000, { timeOutMs: 5 }), "timeOutMs", "timeoutMs");
    await unknown(call(resume, counted, lease.token, { wait: 5 }), "wait", /\(valid options: leaseMs, .*timeoutMs\)/);
    await unknown(call(resume, counted, lease.token, { leaseMS: 5 }), "leaseMS", "leaseMs");
    await unknown(call(proclaim, leader, "v", { timout: 5 }), "timout", "timeoutMs");
    await unknown(call(inspect, counted, "n", { prefx: "p" }), "prefx", "prefix");
    await unknown(call(forceUnlock, counted, "n", { timeoutMS: 5 }), "timeoutMS", "timeoutMs");
    await unknown(call(observe, counted, "n", { poll: 100 }), "poll", "pollMs");
    await unknown(call(configure, counted, { onevent: () => {} }), "onevent", "onEvent");
    assert.equal(sent, 0, "no command was sent");
    assert.equal(lease.signal.aborted, false, "the lease is untouched");
    assert.equal(await release(lease, { timeoutMs: 5_000 }), true);
    assert.equal(await release(leader), true);
  });

  test("the fenced writes, otel() and upstash()", async () => {
    sent = 0;
    const f = { fence: 1 };
    await unknown(call(fencedSet, counted, f, "k", "v", { pX: 5 }), "pX", "px");
    await unknown(call(fencedSet, counted, f, "k", "v", { retain: 5 }), "retain", "retainMs");
    await unknown(call(fencedIncrBy, counted, f, "k", 1, { flor: 0 }), "flor", "floor");
    await unknown(call(fencedHSet, counted, f, "k", { a: "1" }, { px: 5 }), "px", /\(did you mean '\w+'\?\)|valid/);
    await unknown(call(fencedDel, counted, f, "k", { timeout: 5 }), "timeout", "timeoutMs");
    await unknown(call(fencedEval, counted, f, "return 1", [], [], { nam: "x" }), "nam", "name");
    const query = () => Promise.resolve({ rows: [], rowCount: 0 });
    const update = { table: "t", set: "a = 1" };
    await unknown(call(fencedSqlUpdate, query, f, update, { fence_column: "f" }), "fence_column", "fenceColumn");
    await unknown(call(otel, { leasename: "all" }), "leasename", "leaseName");
    await unknown(call(upstash, { url: "http://127.0.0.1:1", token: "t", fetcher: fetch }), "fetcher", "fetch");
    assert.equal(sent, 0);
  });

  test("valid options still pass (every key of each function)", async () => {
    const ac = new AbortController();
    const lease = await acquire(counted, `opts-${Math.random()}`, {
      prefix: "redlease",
      leaseMs: 5_000,
      waitMs: 0,
      signal: ac.signal,
      label: "x",
      replicas: 0,
      replicaTimeoutMs: 100,
      claimMs: 500,
      lockDelayMs: 0,
      nodeTimeoutMs: 100,
      retryDelayMs: 100,
      shared: false,
      permits: undefined,
    });
    assert.equal(await extend(lease, 5_000, { timeoutMs: 1_000 }), true);
    const again = await resume(counted, lease.token, {
      leaseMs: 5_000,
      signal: ac.signal,
      replicas: 0,
      replicaTimeoutMs: 100,
      timeoutMs: 1_000,
    });
    assert.equal(again.fence, lease.fence);
    assert.equal((await inspect(counted, lease.name, { prefix: "redlease", timeoutMs: 1_000 })).held, true);
    assert.equal(await release(again, { timeoutMs: 1_000 }), true);
    assert.equal(typeof await forceUnlock(counted, lease.name, { prefix: "redlease", timeoutMs: 1_000 }), "boolean");
  });
});
