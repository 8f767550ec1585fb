// What issue 30's fast paths (Bounded/ScriptCall, the uncontended acquire, the Lua fast paths) must keep of the
// general paths, checked against real Redis. Node only: getEventListeners() is node:events'.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { after, before, describe, test } from "node:test";
import { acquire, extend, LockTimeoutError, release } from "../mod.ts";
import { stateOf } from "../src/_client.ts";
import {
  acquireCall,
  attemptId,
  channelOf,
  extendCall,
  forceUnlockCall,
  inspectCall,
  keysOf,
  releaseCall,
} from "../src/_protocol.ts";
import { type Client, queued, type RedisServer, sleep, startRedis, until } from "./_redis.ts";

let srv: RedisServer;
let a: Client;
let b: Client;
let n = 0;
const fresh = () => `review-${++n}-${Math.random().toString(36).slice(2)}`;

describe("fast paths keep the general paths' behaviour", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("every call removes its abort listener from the caller's signal once it settles", async () => {
    const ac = new AbortController();
    const listeners = () => getEventListeners(ac.signal, "abort").length;
    const name = fresh();
    const first = await acquire(a, name, { signal: ac.signal, leaseMs: 30_000 });
    assert.equal(listeners(), 0, "after an uncontended acquire");
    await assert.rejects(acquire(b, name, { signal: ac.signal, waitMs: 0 }), LockTimeoutError);
    assert.equal(listeners(), 0, "after a busy try");
    const waiting = acquire(b, name, { signal: ac.signal, waitMs: 10_000 });
    await queued(a, name);
    assert.equal(await release(first), true);
    const second = await waiting;
    assert.equal(listeners(), 0, "after a wait ended by a handoff");
    assert.equal(await extend(second, 30_000), true);
    assert.equal(await release(second), true);
    assert.equal(listeners(), 0);
  });

  // The Lua fast paths tell a record's shape by one match: records that look like the common one but are not (an
  // owner with ':' or digits, a lock delay, a claim deadline) must take the general path, as before them.
  test("records that resemble the common shape take the general path (owner with ':', lock delay, claim deadline)", async () => {
    const st = stateOf(a);
    const keysFor = () => keysOf("redlease", fresh());
    const F = "1000000000000001", future = String(Date.now() * 1000 + 60_000_000);
    // A hold in its lock delay (PTTL <= delay) is not its owner's: not released, even with an owner like "d5:y".
    let k = keysFor();
    await a.set(k.hash, `${F}:a0:1:d50000:d5:y`, { PX: 10_000 });
    assert.equal(await releaseCall(st, k, { kind: "x", owner: "d5:y", fence: F }), "not-held");
    assert.equal(await a.get(k.hash), `${F}:a0:1:d50000:d5:y`);
    assert.equal(await extendCall(st, k, { kind: "x", owner: "d5:y", ms: 30_000, fence: F }), false);
    // An owner made of digits and ':' after an empty claim deadline: released, its fence kept.
    k = keysFor();
    await a.set(k.hash, `${F}:a0:1::12:x`, { PX: 10_000 });
    assert.equal(await releaseCall(st, k, { kind: "x", owner: "12:x", fence: F }), "freed");
    assert.equal(await a.get(k.hash), F);
    // Another owner's unclaimed grant with a lock delay, within its claim window: busy for the window at most.
    k = keysFor();
    await a.set(k.hash, `${F}:a0:1:${future}d300:o:2`, { PX: 30_000 });
    const busy = await acquireCall(st, k, { kind: "x", owner: "o", ms: 30_000, attempt: attemptId() });
    assert.equal(busy.fence, undefined);
    assert.ok(busy.retryMs! > 0 && busy.retryMs! <= 30_000, String(busy.retryMs));
    // Its owner's claim drops the deadline only, keeping the delay and an owner with ':'.
    assert.equal(await extendCall(st, k, { kind: "x", owner: "o:2", ms: 30_000, fence: F }), true);
    assert.equal(await a.get(k.hash), `${F}:a0:1:d300:o:2`);
    // A count of 1 followed by more digits is a reentrant hold: one hold released, the record kept.
    k = keysFor();
    await a.set(k.hash, `${F}:a0:12::o`, { PX: 10_000 });
    assert.equal(await releaseCall(st, k, { kind: "x", owner: "o", fence: F }), "kept");
    assert.equal(await a.get(k.hash), `${F}:a0:11::o`);
  });

  // Found by bench/fuzz_set_paths.ts (8063f8a against its parent): acquire_set's fast path took a set record
  // "<fence>/<kind>" with no holds as free of waiters, so a newcomer passed the queue where the general path admits
  // the waiters first. Library calls leave that state: a shared hold released while a shorter one stays (the record
  // keeps the released one's TTL), the short one expiring, and a force unlock that purges it and finds nothing held.
  test("a set record left without holds does not let a newcomer pass a queued waiter", async () => {
    const st = stateOf(a);
    const k = keysOf("redlease", fresh());
    const listener = await srv.client();
    const heard: string[] = [];
    await listener.subscribe(channelOf(k, "w1"), (m) => heard.push(m));
    const long = await acquireCall(st, k, { kind: "s", owner: "A", ms: 30_000, attempt: attemptId() });
    const short = await acquireCall(st, k, { kind: "s", owner: "B", ms: 100, attempt: attemptId() });
    assert.ok(long.fence && short.fence);
    // An exclusive waiter queues behind the shared holds.
    const xa = attemptId();
    const entry = { clientId: "w1", attempt: xa, ms: 30_000, claimMs: 30_000, kind: "x" as const, owner: "X" };
    const waiting = await acquireCall(st, k, { kind: "x", owner: "X", ms: 30_000, attempt: xa, entry });
    assert.equal(waiting.fence, undefined);
    assert.notEqual(await releaseCall(st, k, { kind: "s", owner: "A", fence: long.fence }), "not-held");
    await sleep(150);
    assert.equal(await forceUnlockCall(st, k), "not-held");
    assert.match(String(await a.get(k.hash)), /^\d+\/s$/, "the set record is left, with no holds");
    assert.equal(await a.exists(k.holders), 0);
    // A newcomer: the queued waiter goes first (it is granted the lease), the newcomer waits.
    const newcomer = await acquireCall(st, k, { kind: "s", owner: "C", ms: 30_000, attempt: attemptId() });
    assert.equal(newcomer.fence, undefined, `the newcomer passed the queue: ${JSON.stringify(newcomer)}`);
    const info = await inspectCall(st, k);
    assert.deepEqual(info.holders.map((h) => [h.owner, h.kind]), [["X", "x"]]);
    assert.equal(info.waiters, 0);
    assert.ok(info.fence > long.fence!, "the grant's fence is above the set record's");
    await until("the waiter told of its grant", () => heard.length === 1);
    assert.match(heard[0], new RegExp(`^${xa}:${info.fence}:`));
  });

  // release_set's fast path ends a release at once while live holds stay; with only expired ones left it takes the
  // general path, which purges them and keeps the fence for FENCE_RETAIN_MS (as for the last hold of all), instead of
  // leaving the set record to the end of the expired holds.
  test("a release that leaves only expired holds keeps the fence for FENCE_RETAIN_MS", async () => {
    const st = stateOf(a);
    const k = keysOf("redlease", fresh());
    const long = await acquireCall(st, k, { kind: "p2", owner: "A", ms: 600, attempt: attemptId() });
    const short = await acquireCall(st, k, { kind: "p2", owner: "B", ms: 100, attempt: attemptId() });
    assert.ok(long.fence && short.fence);
    await sleep(200); // B's hold has expired (not purged yet); A's is live
    assert.equal(await releaseCall(st, k, { kind: "p2", owner: "A", fence: long.fence }), "freed");
    assert.equal(await a.get(k.hash), String(short.fence), "the last fence, kept as a free record");
    assert.ok(await a.pTTL(k.hash) > 5_000, `kept for FENCE_RETAIN_MS, not ${await a.pTTL(k.hash)} ms`);
    assert.equal(await a.exists(k.holders), 0, "the expired hold purged");
  });
});
