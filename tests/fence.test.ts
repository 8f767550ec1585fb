// Fenced writes (redlease/fence) on a real redis-server: each refuses a lower fence with StaleFenceError and leaves
// the resource as it was, accepts an equal one, and keeps its mark only as long as it can matter.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { acquire, forceUnlock, isStaleFenceError, LeaseLostError, release, StaleFenceError } from "../mod.ts";
import { DEFAULT_RETAIN_MS, fencedDel, fencedEval, fencedHSet, fencedIncrBy, fencedSet, markOf } from "../src/fence.ts";
import { abortedWithin, type Client, noCommands, type RedisServer, runtimeName, sleep, startRedis } from "./_redis.ts";

let srv: RedisServer;
let a: Client;
let b: Client;
let admin: Client;
let n = 0;
const fresh = () => `fence-${++n}-${Math.random().toString(36).slice(2, 8)}`;
// deno-lint-ignore no-explicit-any
const anyArgs = (f: (...args: any[]) => unknown, ...args: unknown[]) => Promise.resolve().then(() => f(...args));

/** Expect a StaleFenceError for `key` carrying `fence`, refused by `highest`. */
function stale(key: string, fence: number, highest: number, lockName = "") {
  return (e: unknown) => {
    assert.ok(e instanceof StaleFenceError, String(e));
    assert.ok(isStaleFenceError(e));
    assert.equal(e.name, "StaleFenceError");
    assert.deepEqual([e.key, e.fence, e.highest, e.lockName], [key, fence, highest, lockName]);
    return true;
  };
}

async function stats(): Promise<Record<string, number>> {
  const info = await admin.info("commandstats");
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]] = Number(m[2]);
  return out;
}

describe("fenced writes", () => {
  before(async () => {
    srv = await startRedis();
    [a, b, admin] = [await srv.client(), await srv.client(), await srv.client()];
  });
  after(async () => {
    await srv.stop();
  });

  test("fencedSet() writes under a live lease, refuses a lower fence (value unchanged), accepts an equal one", async () => {
    const key = `{${fresh()}}:v`;
    await using lease = await acquire(a, fresh());
    assert.equal(await fencedSet(a, lease, key, "one"), true);
    assert.equal(await admin.get(markOf(key)), String(lease.fence));
    await assert.rejects(fencedSet(b, lease.fence - 1, key, "old"), stale(key, lease.fence - 1, lease.fence));
    await assert.rejects(fencedSet(b, { fence: 1 }, key, "old"), stale(key, 1, lease.fence));
    assert.equal(await admin.get(key), "one");
    assert.equal(await fencedSet(b, lease.fence, key, "two"), true, "an equal fence passes");
    assert.equal(await fencedSet(b, lease.fence + 5, key, "three"), true);
    assert.equal(await admin.get(markOf(key)), String(lease.fence + 5));
    await assert.rejects(fencedSet(a, lease, key, "four"), stale(key, lease.fence, lease.fence + 5, lease.name));
    assert.equal(await admin.get(key), "three");
  });

  test("fencedSet() with ifChanged resolves false and leaves the TTL when the value is equal; px sets one", async () => {
    const key = fresh();
    await using lease = await acquire(a, fresh());
    assert.equal(await fencedSet(a, lease, key, "x", { px: 60_000, ifChanged: true }), true);
    assert.ok(await admin.pTTL(key) > 59_000);
    assert.equal(await fencedSet(a, lease, key, "x", { ifChanged: true }), false);
    assert.ok(await admin.pTTL(key) > 59_000, "nothing written: the TTL stays");
    assert.equal(await fencedSet(a, lease, key, "y", { ifChanged: true }), true);
    assert.equal(await admin.pTTL(key), -1, "a write without px leaves no TTL, as SET");
    assert.equal(await fencedSet(a, lease, key, "y"), true, "without ifChanged an equal value is written");
    await assert.rejects(fencedSet(a, 1, key, "y", { ifChanged: true }), StaleFenceError);
  });

  test("fencedHSet() adds fields as HSET, refuses a lower fence, accepts an equal one", async () => {
    const key = fresh();
    await using lease = await acquire(a, fresh());
    assert.equal(await fencedHSet(a, lease, key, { status: "paid", by: "a" }), 2);
    assert.equal(await fencedHSet(a, lease, key, { status: "shipped", at: "now" }), 1);
    await assert.rejects(
      fencedHSet(b, lease.fence - 1, key, { status: "lost" }),
      stale(key, lease.fence - 1, lease.fence),
    );
    assert.deepEqual({ ...await admin.hGetAll(key) }, { status: "shipped", by: "a", at: "now" });
    assert.equal(await fencedHSet(b, lease.fence, key, { by: "b" }), 0);
  });

  test("fencedIncrBy() counts within floor and ceiling, resolves undefined when refused, refuses a lower fence", async () => {
    const key = `{${fresh()}}:stock`;
    await using lease = await acquire(a, fresh());
    assert.equal(await fencedIncrBy(a, lease, key, 2), 2, "an absent key counts as 0");
    assert.equal(await fencedIncrBy(a, lease, key, -1, { floor: 0 }), 1);
    assert.equal(await fencedIncrBy(a, lease, key, -1, { floor: 0 }), 0);
    assert.equal(await fencedIncrBy(a, lease, key, -1, { floor: 0 }), undefined, "sold out");
    assert.equal(await admin.get(key), "0");
    assert.equal(await fencedIncrBy(a, lease, key, 3, { floor: 0, ceiling: 3 }), 3);
    assert.equal(await fencedIncrBy(a, lease, key, 1, { ceiling: 3 }), undefined);
    await assert.rejects(fencedIncrBy(b, lease.fence - 1, key, -1), stale(key, lease.fence - 1, lease.fence));
    assert.equal(await admin.get(key), "3");
    assert.equal(await fencedIncrBy(b, lease.fence, key, -3, { floor: 0 }), 0);
    await admin.set(key, "not a number");
    await assert.rejects(fencedIncrBy(a, lease, key, 1, { floor: 0 }), /not an integer/);
  });

  test("fencedDel() deletes, refuses a lower fence (key kept), and says whether the key existed", async () => {
    const key = fresh();
    await using lease = await acquire(a, fresh());
    await fencedSet(a, lease, key, "x");
    await assert.rejects(fencedDel(b, lease.fence - 1, key), stale(key, lease.fence - 1, lease.fence));
    assert.equal(await admin.get(key), "x");
    assert.equal(await fencedDel(a, lease, key), true);
    assert.equal(await fencedDel(a, lease, key), false);
    await assert.rejects(fencedSet(b, lease.fence - 1, key, "again"), StaleFenceError, "a deleted key stays guarded");
    assert.equal(await admin.exists(key), 0);
  });

  test("fencedEval() runs the caller's Lua with its own KEYS and ARGV, and refuses a lower fence without running it", async () => {
    const tag = `{${fresh()}}`;
    const keys = [`${tag}:a`, `${tag}:b`];
    await using lease = await acquire(a, fresh());
    const echo = "redis.call('INCR', KEYS[2]) return {#KEYS, #ARGV, KEYS[1], KEYS[2], ARGV[1], ARGV[2]}";
    assert.deepEqual(await fencedEval(a, lease, echo, keys, ["x", "y"]), [2, 2, ...keys, "x", "y"]);
    assert.deepEqual(await fencedEval(a, lease, echo, keys, []), [2, 0, ...keys]);
    await assert.rejects(fencedEval(b, lease.fence - 1, echo, keys, []), stale(keys[0], lease.fence - 1, lease.fence));
    assert.equal(await admin.get(keys[1]), "2", "the refused script did not run");
    assert.deepEqual(await fencedEval(b, lease.fence, echo, keys, ["z"]), [2, 1, ...keys, "z"], "an equal fence");
    assert.equal(await fencedEval(a, lease, "return nil", keys, []), null);
    assert.equal(await fencedEval(a, lease, "return 'text'", keys, []), "text");
    assert.equal(await fencedEval(a, lease, "return redis.status_reply('FINE')", keys, []), "FINE");
    await assert.rejects(
      fencedEval(a, lease, "return redis.error_reply('MINE went wrong')", keys, []),
      /MINE went wrong/,
    );
    await assert.rejects(fencedEval(a, lease, "error('boom')", keys, []), /boom/);
    await assert.rejects(fencedEval(a, lease, "this is not lua", keys, []), /compil|syntax|unexpected|near/i);
  });

  test("fencedEval() records the fence before the script runs: a script that fails after writing stays guarded", async () => {
    const key = fresh();
    await using lease = await acquire(a, fresh());
    await fencedSet(a, lease.fence - 10, key, "before");
    const body = "redis.call('SET', KEYS[1], ARGV[1]) error('after the write')";
    await assert.rejects(fencedEval(a, lease, body, [key], ["written"]), /after the write/);
    assert.equal(await admin.get(key), "written");
    await assert.rejects(fencedSet(b, lease.fence - 1, key, "older"), stale(key, lease.fence - 1, lease.fence));
  });

  test("a stale writer after a real handover: A's lease force-unlocked, B acquires and writes, A is refused", async () => {
    const name = fresh(), key = `{${name}}:ledger`;
    const holderA = await acquire(a, name);
    assert.equal(await fencedSet(a, holderA, key, "A1"), true);
    await forceUnlock(b, name);
    const holderB = await acquire(b, name, { waitMs: 0 });
    assert.ok(holderB.fence > holderA.fence);
    assert.equal(await fencedSet(b, holderB, key, "B1"), true);
    // A has not noticed yet (its watchdog renews every 10 s): its write reaches Redis and is refused there.
    assert.equal(holderA.signal.aborted, false);
    await assert.rejects(fencedSet(a, holderA, key, "A2"), stale(key, holderA.fence, holderB.fence, name));
    await assert.rejects(fencedIncrBy(a, holderA, `{${name}}:ledger`, 1), StaleFenceError);
    assert.equal(await admin.get(key), "B1");
    await release(holderB);
    await release(holderA);
  });

  test("a released or lost lease is refused before any command, with its signal's reason", async () => {
    const idle = noCommands();
    const released = await acquire(a, fresh());
    await release(released);
    await assert.rejects(fencedSet(idle, released, "k", "v"), (e: Error) => e.name === "AbortError");
    const lost = await acquire(a, fresh(), { leaseMs: 30 });
    assert.ok(await abortedWithin(lost.signal, 2_000) instanceof LeaseLostError);
    await assert.rejects(fencedIncrBy(idle, lost, "k", 1), LeaseLostError);
    await assert.rejects(fencedEval(idle, lost, "return 1", ["k"], []), LeaseLostError);
    assert.equal(idle.sent, 0);
    // The fence of a lost lease, carried as a number, still reaches Redis: the mark decides.
    assert.equal(await fencedSet(a, lost.fence, fresh(), "v"), true);
  });

  test("a lease over several names: `name` picks whose fence guards the resource", async () => {
    const [n1, n2] = [fresh(), fresh()];
    await using lease = await acquire(a, [n1, n2]);
    const key = fresh();
    await assert.rejects(fencedSet(a, lease, key, "v"), /'name' must say which of the lease's names/);
    await assert.rejects(fencedSet(a, lease, key, "v", { name: "another" }), (e: Error) => {
      assert.ok(e instanceof TypeError);
      assert.match(e.message, /'name' must be one of the lease's names, not a lease from another name/);
      return true;
    });
    assert.equal(await fencedSet(a, lease, key, "v", { name: n2 }), true);
    assert.equal(await admin.get(markOf(key)), String(lease.fences[1]));
    const single = await acquire(a, fresh());
    await assert.rejects(fencedSet(a, single, key, "v", { name: n1 }), TypeError);
    await release(single);
  });

  test("permits: each guards its own resource; on a resource they share, an older permit is refused after a newer wrote", async () => {
    const name = fresh();
    const [p1, p2] = [await acquire(a, name, { permits: 2 }), await acquire(b, name, { permits: 2 })];
    assert.ok(p2.fence > p1.fence, "every permit has its own fence, in the order they were taken");
    const own1 = `{${name}}:slot:1`, own2 = `{${name}}:slot:2`, shared = `{${name}}:total`;
    assert.equal(await fencedSet(a, p1, own1, "p1"), true);
    assert.equal(await fencedSet(b, p2, own2, "p2"), true);
    assert.equal(await fencedSet(a, p1, own1, "p1 again"), true, "a newer permit elsewhere does not refuse it");
    assert.equal(await fencedIncrBy(a, p1, shared, 1), 1, "the older permit writes first");
    assert.equal(await fencedIncrBy(b, p2, shared, 1), 2);
    await assert.rejects(fencedIncrBy(a, p1, shared, 1), stale(shared, p1.fence, p2.fence, name));
    await release(p1);
    await release(p2);
  });

  test("shared holds are ordered by fence like permits; a reentrant hold shares its fence and passes", async () => {
    const name = fresh(), key = `{${name}}:report`;
    const [r1, r2] = [await acquire(a, name, { shared: true }), await acquire(b, name, { shared: true })];
    assert.ok(r2.fence > r1.fence);
    assert.equal(await fencedSet(b, r2, key, "r2"), true);
    await assert.rejects(fencedSet(a, r1, key, "r1"), stale(key, r1.fence, r2.fence, name));
    await release(r1);
    await release(r2);
    const outer = await acquire(a, name);
    const inner = await acquire(a, name, { owner: outer });
    assert.equal(inner.fence, outer.fence);
    assert.equal(await fencedSet(a, outer, key, "outer"), true);
    assert.equal(await fencedSet(a, inner, key, "inner"), true, "an equal fence passes");
    await release(inner);
    await release(outer);
  });

  test("the mark: stays retainMs after a delete, then expires; follows the resource's TTL; none while it has none", async () => {
    await using lease = await acquire(a, fresh());
    const gone = fresh();
    await fencedSet(a, lease, gone, "x");
    assert.equal(await admin.pTTL(markOf(gone)), -1, "a resource without TTL: the mark has none either");
    assert.equal(await fencedDel(a, lease, gone, { retainMs: 300 }), true);
    const left = await admin.pTTL(markOf(gone));
    assert.ok(left > 0 && left <= 300, String(left));
    await assert.rejects(fencedSet(b, lease.fence - 1, gone, "stale"), StaleFenceError, "refused within the retention");
    await sleep(400);
    assert.equal(await admin.exists(markOf(gone)), 0, "no mark left behind for a deleted resource");

    const cached = fresh();
    await fencedSet(a, lease, cached, "x", { px: 2_000, retainMs: 1_000 });
    const ttl = await admin.pTTL(markOf(cached));
    assert.ok(ttl > 2_500 && ttl <= 3_000, `the resource's TTL plus retainMs: ${ttl}`);
    await fencedSet(a, lease, cached, "y", { retainMs: 1_000 });
    assert.equal(await admin.pTTL(markOf(cached)), -1, "the resource lost its TTL (SET): so did the mark");

    const dropped = fresh();
    await fencedDel(a, lease, dropped);
    const day = await admin.pTTL(markOf(dropped));
    assert.ok(day > DEFAULT_RETAIN_MS - 5_000 && day <= DEFAULT_RETAIN_MS, String(day));
    assert.equal(DEFAULT_RETAIN_MS, 86_400_000);
  });

  test("a warm fenced write is one EVALSHA; fencedEval's SHA1 (Web Crypto) is the one Redis computes", async () => {
    await using lease = await acquire(a, fresh());
    const key = fresh();
    const body = "return redis.call('GET', KEYS[1])";
    // Warm: each script sent once (after NOSCRIPT).
    await fencedSet(a, lease, key, "v");
    await fencedIncrBy(a, lease, `${key}:n`, 1);
    await fencedEval(a, lease, body, [key], []);
    await admin.sendCommand(["CONFIG", "RESETSTAT"]);
    for (let i = 0; i < 5; i++) {
      await fencedSet(a, lease, key, `v${i}`);
      await fencedIncrBy(a, lease, `${key}:n`, 1, { floor: 0 });
      assert.equal(await fencedEval(a, lease, body, [key], []), `v${i}`);
    }
    const s = await stats();
    assert.equal(s.evalsha, 15, JSON.stringify(s));
    assert.equal(s.eval, undefined, "no script sent in full once warm");
    assert.equal(s["script|load"], undefined);
    // What else is counted ran inside the scripts (Redis counts a script's commands too): none from the client.
    assert.ok(Object.keys(s).every((c) => ["config|resetstat", "evalsha", "get", "set", "pttl", "incrby"].includes(c)));
  });

  test("bad input is rejected with TypeError or RangeError before any command", async () => {
    const idle = noCommands();
    const live = { fence: 5 };
    const cases: Array<[string, () => Promise<unknown>, ErrorConstructor, RegExp]> = [
      ["a fence of 0", () => anyArgs(fencedSet, idle, 0, "k", "v"), RangeError, /'fence' must be a positive safe/],
      ["a fractional fence", () => anyArgs(fencedSet, idle, 1.5, "k", "v"), RangeError, /'fence'/],
      ["an unsafe fence", () => anyArgs(fencedSet, idle, 2 ** 60, "k", "v"), RangeError, /'fence'/],
      ["a string fence", () => anyArgs(fencedSet, idle, { fence: "5" }, "k", "v"), TypeError, /'fence'/],
      ["no lease", () => anyArgs(fencedSet, idle, null, "k", "v"), TypeError, /'lease' must be a Lease/],
      ["a name with a fence", () => anyArgs(fencedSet, idle, 5, "k", "v", { name: "x" }), TypeError, /'name'/],
      ["an empty key", () => anyArgs(fencedSet, idle, live, "", "v"), RangeError, /'key' must be a non-empty/],
      ["a number key", () => anyArgs(fencedDel, idle, live, 5), TypeError, /'key'/],
      ["a number value", () => anyArgs(fencedSet, idle, live, "k", 5), TypeError, /'value' must be a string/],
      ["px 0", () => anyArgs(fencedSet, idle, live, "k", "v", { px: 0 }), RangeError, /'px'/],
      ["ifChanged 1", () => anyArgs(fencedSet, idle, live, "k", "v", { ifChanged: 1 }), TypeError, /'ifChanged'/],
      ["retainMs 0", () => anyArgs(fencedDel, idle, live, "k", { retainMs: 0 }), RangeError, /'retainMs'/],
      ["timeoutMs '5'", () => anyArgs(fencedDel, idle, live, "k", { timeoutMs: "5" }), TypeError, /'timeoutMs'/],
      ["a signal that is not one", () => anyArgs(fencedDel, idle, live, "k", { signal: {} }), TypeError, /'signal'/],
      ["options 5", () => anyArgs(fencedDel, idle, live, "k", 5), TypeError, /'options' must be an object/],
      ["no fields", () => anyArgs(fencedHSet, idle, live, "k", {}), RangeError, /'fields' must have at least one/],
      ["a number field", () => anyArgs(fencedHSet, idle, live, "k", { a: 1 }), TypeError, /'fields.a'/],
      ["fields array", () => anyArgs(fencedHSet, idle, live, "k", ["a"]), TypeError, /'fields'/],
      ["by 0.5", () => anyArgs(fencedIncrBy, idle, live, "k", 0.5), RangeError, /'by' must be a safe integer/],
      ["by '1'", () => anyArgs(fencedIncrBy, idle, live, "k", "1"), TypeError, /'by'/],
      [
        "ceiling below floor",
        () => anyArgs(fencedIncrBy, idle, live, "k", 1, { floor: 5, ceiling: 4 }),
        RangeError,
        /'ceiling' must not be below 'floor'/,
      ],
      ["an empty body", () => anyArgs(fencedEval, idle, live, " ", ["k"], []), RangeError, /'body'/],
      [
        "a body with flags",
        () => anyArgs(fencedEval, idle, live, "#!lua flags=no-writes\nreturn 1", ["k"], []),
        RangeError,
        /'body' must not start with a '#!' line/,
      ],
      ["no keys", () => anyArgs(fencedEval, idle, live, "return 1", [], []), TypeError, /'keys'/],
      ["a number arg", () => anyArgs(fencedEval, idle, live, "return 1", ["k"], [1]), TypeError, /'args\[0\]'/],
      ["a client that is not one", () => anyArgs(fencedSet, {}, live, "k", "v"), TypeError, /'client'/],
    ];
    for (const [what, call, Err, message] of cases) {
      await assert.rejects(call(), (e: Error) => {
        assert.ok(e instanceof Err, `${what}: ${e.name}: ${e.message}`);
        assert.match(e.message, message, what);
        assert.match(e.message, /^Cannot make a fenced write as '/, what);
        return true;
      });
    }
    const aborted = AbortSignal.abort(new Error("stop"));
    await assert.rejects(fencedSet(idle, live, "k", "v", { signal: aborted }), /stop/);
    assert.equal(idle.sent, 0);
  });

  test("on a Redis Cluster a key without a hash tag, or fencedEval keys in two slots, are refused before any command", async () => {
    const idle = { ...noCommands(), sharded: true };
    const count = () => idle.sent;
    await assert.rejects(fencedSet(idle, 5, "stock", "v"), /'key' must have a non-empty hash tag on a Redis Cluster/);
    await assert.rejects(fencedDel(idle, 5, "{}stock"), TypeError, "an empty tag is no tag");
    await assert.rejects(
      fencedEval(idle, 5, "return 1", ["{sale}:stock", "{other}:x"], []),
      /'keys' must all be in the slot of keys\[0\]/,
    );
    assert.equal(count(), 0);
    // On one slot they are sent (and this client refuses every command).
    await assert.rejects(fencedEval(idle, 5, "return 1", ["{sale}:stock", "{sale}:x"], []), /no command may be sent/);
  });
});

if (runtimeName() === "node") {
  describe("fenced writes on a Redis Cluster", () => {
    test("a hash-tagged resource and its mark share a slot: write, refuse, delete", async () => {
      const { startCluster } = await import("../harness/topology.ts");
      const c = await startCluster({ masters: 3, replicasPerMaster: 0 });
      try {
        const client = await c.cluster();
        const lease = await acquire(client, fresh());
        const key = `{${fresh()}}:stock`;
        assert.equal(await fencedIncrBy(client, lease, key, 5), 5);
        assert.equal(await fencedEval(client, lease, "return redis.call('GET', KEYS[1])", [key, `${key}:x`], []), "5");
        await assert.rejects(fencedIncrBy(client, lease.fence - 1, key, -1), StaleFenceError);
        assert.equal(await fencedDel(client, lease, key), true);
        await release(lease);
      } finally {
        await c.stop();
      }
    });
  });
}
