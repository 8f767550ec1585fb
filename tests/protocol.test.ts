// The lease protocol, call by call (src/_protocol.ts over lua/): attempt ids, the claim window, FIFO across
// expiry and the undo of an attempt, checked directly against Redis without the waiting engine around them.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type ClientState, stateOf } from "../src/_client.ts";
import {
  acquireCall,
  attemptId,
  extendCall,
  fenceOf,
  keysOf,
  parseMessage,
  type QueueEntry,
  releaseCall,
  type WaiterMessage,
} from "../src/_protocol.ts";
import { inspect } from "../mod.ts";
import { type Client, holdsOf, type RedisServer, sleep, startRedis, until } from "./_redis.ts";

let srv: RedisServer;
let admin: Client;
let sub: Client;
let st: ClientState;
let n = 0;
const fresh = () => `protocol-${++n}-${Math.random().toString(36).slice(2)}`;
const messages: WaiterMessage[] = [];

describe("the lease protocol", () => {
  before(async () => {
    srv = await startRedis();
    admin = await srv.client();
    st = stateOf(await srv.client());
    sub = (await srv.client()).duplicate();
    await sub.connect();
    // A live receiver on every waiter channel of client "c1", so that handoffs find the waiters alive.
    await sub.pSubscribe("redlease:*:w:c1", (m) => messages.push(parseMessage(m)!));
  });
  after(async () => {
    await sub.disconnect();
    await srv.stop();
  });

  const entryOf = (attempt: string, owner: string, claimMs = 200): QueueEntry => ({
    clientId: "c1",
    kind: "x",
    attempt,
    ms: 30_000,
    claimMs,
    owner,
  });

  test("a fence's digits are read exactly (1 to 16 of them), and anything else is NaN", () => {
    for (const text of ["1", "9", "10", "1764000000123456", "9999999999999999", "1000000000000000"]) {
      assert.equal(fenceOf(text), Number(text), text);
    }
    for (let i = 0; i < 1_000; i++) {
      const text = String(1 + Math.floor(Math.random() * 9)) + String(Math.random()).slice(2, 17).padEnd(15, "7");
      assert.equal(fenceOf(text), Number(text), text);
    }
    for (const text of ["", "-1", "1.5", "12a", " 12", "1e3", "12345678901234567"]) {
      assert.ok(Number.isNaN(fenceOf(text)), JSON.stringify(text));
    }
  });

  test("a retry of the same attempt returns its grant without a second hold", async () => {
    const keys = keysOf("redlease", fresh());
    const attempt = attemptId();
    const a = await acquireCall(st, keys, { kind: "x", owner: "svc-3", ms: 30_000, attempt });
    const b = await acquireCall(st, keys, { kind: "x", owner: "svc-3", ms: 30_000, attempt });
    assert.equal(b.fence, a.fence);
    assert.deepEqual(holdsOf(await inspect(admin, keys.hash.slice(10, -1))), [{ owner: "svc-3", holds: 1 }]);
  });

  test("undo by attempt id gives back exactly that attempt's hold, for a fixed owner too", async () => {
    const name = fresh();
    const keys = keysOf("redlease", name);
    const first = attemptId();
    await acquireCall(st, keys, { kind: "x", owner: "svc-3", ms: 30_000, attempt: first });
    const second = attemptId();
    await acquireCall(st, keys, { kind: "x", owner: "svc-3", ms: 30_000, attempt: second }); // re-entered: 2 holds
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "svc-3", attempt: second }), "kept");
    assert.deepEqual(holdsOf(await inspect(admin, name)), [{ owner: "svc-3", holds: 1 }]);
    assert.equal(
      await releaseCall(st, keys, { kind: "x", owner: "svc-3", attempt: attemptId() }),
      "not-held",
      "other attempts: nothing",
    );
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "svc-3" }), "freed");
  });

  test("a handoff is an unclaimed grant: claimed by extend, or taken back after its claim window", async () => {
    const name = fresh();
    const keys = keysOf("redlease", name);
    const h = await acquireCall(st, keys, { kind: "x", owner: "holder", ms: 30_000, attempt: attemptId() });
    const [w1, w2] = [attemptId(), attemptId()];
    const q1 = await acquireCall(st, keys, {
      kind: "x",
      owner: "w1",
      ms: 30_000,
      attempt: w1,
      entry: entryOf(w1, "w1"),
    });
    const q2 = await acquireCall(st, keys, {
      kind: "x",
      owner: "w2",
      ms: 30_000,
      attempt: w2,
      entry: entryOf(w2, "w2"),
    });
    assert.equal(q1.fence, undefined);
    assert.equal(q1.queuedNow, true);
    assert.ok(q2.queuedAt! >= q1.queuedAt!);
    messages.length = 0;
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "holder", fence: h.fence }), "handed-over");
    await until("w1's grant message", () => messages.some((m) => m.attempt === w1));
    const grant = messages.find((m) => m.attempt === w1);
    assert.equal(grant?.kind, "grant");
    if (grant?.kind !== "grant") return;
    assert.ok(grant.fence > h.fence!);
    assert.equal(grant.queuedAt, q1.queuedAt, "the message says when the waiter was queued");
    assert.ok(grant.grantedAt >= grant.queuedAt);
    assert.equal(messages.find((m) => m.attempt === w2), undefined, "the next waiter is not woken by the handoff");
    // Within the window, the next waiter is told how long is left of it.
    const early = await acquireCall(st, keys, {
      kind: "x",
      owner: "w2",
      ms: 30_000,
      attempt: w2,
      entry: entryOf(w2, "w2"),
    });
    assert.ok(early.retryMs! > 0 && early.retryMs! <= 201, `retry in ${early.retryMs} ms`);
    // Not claimed within 200 ms: the next waiter's re-check takes it back and gets it.
    await sleep(250);
    const late = await acquireCall(st, keys, {
      kind: "x",
      owner: "w2",
      ms: 30_000,
      attempt: w2,
      entry: entryOf(w2, "w2"),
    });
    assert.ok(late.fence! > grant.fence, "passed on with a newer fence");
    assert.deepEqual(holdsOf(await inspect(admin, name)), [{ owner: "w2", holds: 1 }]);
    assert.equal(
      await extendCall(st, keys, { kind: "x", owner: "w1", ms: 30_000, fence: grant.fence }),
      false,
      "a late claim fails",
    );
    // A grant claimed in time stays.
    const w3 = attemptId();
    await acquireCall(st, keys, { kind: "x", owner: "w3", ms: 30_000, attempt: w3, entry: entryOf(w3, "w3") });
    messages.length = 0;
    await releaseCall(st, keys, { kind: "x", owner: "w2", fence: late.fence });
    await until("w3's grant message", () => messages.some((m) => m.attempt === w3));
    const g3 = messages.find((m) => m.attempt === w3) as { fence: number };
    assert.equal(await extendCall(st, keys, { kind: "x", owner: "w3", ms: 30_000, fence: g3.fence }), true, "claimed");
    await sleep(250);
    const other = await acquireCall(st, keys, { kind: "x", owner: "x", ms: 30_000, attempt: attemptId() });
    assert.equal(other.fence, undefined, "a claimed grant is not taken back");
    assert.ok(other.retryMs! > 29_000, "busy for the claimed lease, not a claim window");
  });

  test("the same owner re-entering while its grant is unclaimed does not claim it for the waiter", async () => {
    const name = fresh();
    const keys = keysOf("redlease", name);
    const h = await acquireCall(st, keys, { kind: "x", owner: "holder", ms: 30_000, attempt: attemptId() });
    const w1 = attemptId();
    await acquireCall(st, keys, { kind: "x", owner: "svc", ms: 30_000, attempt: w1, entry: entryOf(w1, "svc") });
    await releaseCall(st, keys, { kind: "x", owner: "holder", fence: h.fence });
    const again = await acquireCall(st, keys, { kind: "x", owner: "svc", ms: 30_000, attempt: attemptId() }); // re-enters
    // The waiter's own re-check still recognises its grant: no third hold.
    const mine = await acquireCall(st, keys, {
      kind: "x",
      owner: "svc",
      ms: 30_000,
      attempt: w1,
      entry: entryOf(w1, "svc"),
    });
    assert.equal(mine.fence, again.fence);
    assert.deepEqual(holdsOf(await inspect(admin, name)), [{ owner: "svc", holds: 2 }]);
  });

  test("a lease freed by its TTL goes to the head of the queue, not to a newcomer", async () => {
    const name = fresh();
    const keys = keysOf("redlease", name);
    await acquireCall(st, keys, { kind: "x", owner: "holder", ms: 100, attempt: attemptId() });
    const w1 = attemptId();
    await acquireCall(st, keys, { kind: "x", owner: "w1", ms: 30_000, attempt: w1, entry: entryOf(w1, "w1") });
    await sleep(150); // expired
    messages.length = 0;
    const newcomer = await acquireCall(st, keys, { kind: "x", owner: "new", ms: 30_000, attempt: attemptId() });
    assert.equal(newcomer.fence, undefined, "the newcomer waits");
    await until("w1's grant message", () => messages.some((m) => m.attempt === w1));
    assert.equal(messages.find((m) => m.attempt === w1)?.kind, "grant", "the head of the queue was handed it");
    assert.deepEqual(holdsOf(await inspect(admin, name)), [{ owner: "w1", holds: 1 }]);
  });

  test("dead waiters (nobody listening) are skipped by a handoff", async () => {
    const name = fresh();
    const keys = keysOf("redlease", name);
    const h = await acquireCall(st, keys, { kind: "x", owner: "holder", ms: 30_000, attempt: attemptId() });
    const dead = attemptId();
    await acquireCall(st, keys, {
      kind: "x",
      owner: "gone",
      ms: 30_000,
      attempt: dead,
      entry: { ...entryOf(dead, "gone"), clientId: "nobody" },
    });
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "holder", fence: h.fence }), "freed");
    assert.equal((await inspect(admin, name)).waiters, 0);
  });

  test("a dead waiter skipped by a handoff consumes a fence, and the live one behind it is granted a larger one", async () => {
    const name = fresh();
    const keys = keysOf("redlease", name);
    const h = await acquireCall(st, keys, { kind: "x", owner: "holder", ms: 30_000, attempt: attemptId() });
    const [dead, live] = [attemptId(), attemptId()];
    const gone = { ...entryOf(dead, "gone"), clientId: "nobody" };
    await acquireCall(st, keys, { kind: "x", owner: "gone", ms: 30_000, attempt: dead, entry: gone });
    await acquireCall(st, keys, { kind: "x", owner: "w1", ms: 30_000, attempt: live, entry: entryOf(live, "w1") });
    messages.length = 0;
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "holder", fence: h.fence }), "handed-over");
    await until("the live waiter's grant message", () => messages.some((m) => m.attempt === live));
    const grant = messages.find((m) => m.attempt === live);
    assert.equal(grant?.kind, "grant");
    if (grant?.kind !== "grant") return;
    assert.ok(grant.fence > h.fence! + 1, "the dead waiter's grant took a fence of its own");
    assert.deepEqual(holdsOf(await inspect(admin, name)), [{ owner: "w1", holds: 1 }]);
    assert.equal((await inspect(admin, name)).waiters, 0);
  });

  test("a name released moments ago is taken again with a larger fence, also when its kept fence is ahead of the clock", async () => {
    const name = fresh();
    const keys = keysOf("redlease", name);
    const first = await acquireCall(st, keys, { kind: "x", owner: "a", ms: 30_000, attempt: attemptId() });
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "a", fence: first.fence }), "freed");
    assert.equal(await admin.get(keys.hash), String(first.fence), "the fence is kept");
    const again = await acquireCall(st, keys, { kind: "x", owner: "b", ms: 30_000, attempt: attemptId() });
    assert.ok(again.fence! > first.fence!);
    assert.ok((await admin.pTTL(keys.hash)) > 10_000, "the new hold has its own TTL");
    assert.deepEqual(holdsOf(await inspect(admin, name)), [{ owner: "b", holds: 1 }]);
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "b", fence: again.fence }), "freed");
    // A burst of grants may have run the fence ahead of the clock: the next is then the kept one + 1.
    await admin.set(keys.hash, "8999999999999999", { PX: 10_000 });
    const ahead = await acquireCall(st, keys, { kind: "x", owner: "c", ms: 30_000, attempt: attemptId() });
    assert.equal(ahead.fence, 9000000000000000);
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "c", fence: ahead.fence }), "freed");
    assert.equal(await admin.get(keys.hash), "9000000000000000");
  });

  test("a name released moments ago with a waiter queued goes to that waiter, not to a newcomer", async () => {
    const name = fresh();
    const keys = keysOf("redlease", name);
    const h = await acquireCall(st, keys, { kind: "x", owner: "holder", ms: 30_000, attempt: attemptId() });
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "holder", fence: h.fence }), "freed");
    // (A waiter queued while the record is the kept fence: as when its holder's grant lapsed.)
    const w1 = attemptId();
    await admin.zAdd(keys.queue, { score: Date.now() * 1000, value: `c1|${w1}|30000|200|x|w1` });
    messages.length = 0;
    const newcomer = await acquireCall(st, keys, { kind: "x", owner: "new", ms: 30_000, attempt: attemptId() });
    assert.equal(newcomer.fence, undefined, "the newcomer waits");
    await until("w1's grant message", () => messages.some((m) => m.attempt === w1));
    const grant = messages.find((m) => m.attempt === w1);
    assert.equal(grant?.kind, "grant");
    if (grant?.kind !== "grant") return;
    assert.ok(grant.fence > h.fence!);
    assert.deepEqual(holdsOf(await inspect(admin, name)), [{ owner: "w1", holds: 1 }]);
  });

  test("a grant its waiter releases before claiming it goes on like any last hold; a claim drops only its deadline", async () => {
    const name = fresh();
    const keys = keysOf("redlease", name);
    const h = await acquireCall(st, keys, { kind: "x", owner: "holder", ms: 30_000, attempt: attemptId() });
    const [w1, w2] = [attemptId(), attemptId()];
    await acquireCall(st, keys, { kind: "x", owner: "w1", ms: 30_000, attempt: w1, entry: entryOf(w1, "w1", 5_000) });
    await acquireCall(st, keys, { kind: "x", owner: "w2", ms: 30_000, attempt: w2, entry: entryOf(w2, "w2", 5_000) });
    messages.length = 0;
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "holder", fence: h.fence }), "handed-over");
    await until("w1's grant message", () => messages.some((m) => m.attempt === w1));
    const g1 = messages.find((m) => m.attempt === w1);
    if (g1?.kind !== "grant") throw new Error("w1 was not granted the lease");
    assert.match((await admin.get(keys.hash)) ?? "", new RegExp(`^${g1.fence}:${w1}:1:\\d+:w1$`), "unclaimed");
    // Released before it was claimed: handed to the next waiter.
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "w1", fence: g1.fence }), "handed-over");
    await until("w2's grant message", () => messages.some((m) => m.attempt === w2));
    const g2 = messages.find((m) => m.attempt === w2);
    if (g2?.kind !== "grant") throw new Error("w2 was not granted the lease");
    assert.ok(g2.fence > g1.fence);
    assert.equal(await extendCall(st, keys, { kind: "x", owner: "w1", ms: 30_000, fence: g1.fence }), false);
    // The claim keeps the fence, the attempt and the count, and drops the deadline.
    assert.equal(await extendCall(st, keys, { kind: "x", owner: "w2", ms: 30_000, fence: g2.fence }), true);
    assert.equal(await admin.get(keys.hash), `${g2.fence}:${w2}:1::w2`);
    assert.equal(await releaseCall(st, keys, { kind: "x", owner: "w2", fence: g2.fence }), "freed");
    assert.equal(await admin.get(keys.hash), String(g2.fence));
  });
});
