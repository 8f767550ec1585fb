// The `label` acquire option: checked before any Redis command, carried in the owner string (no extra command, key
// or script), and reported by inspect() as owners[].label for every kind of hold: exclusive, re-entered, shared,
// permits, several names, an election's leader, and a hold resumed from its token.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { acquire, campaign, inspect, observe, release, resume } from "../mod.ts";
import { labelOf } from "../src/_protocol.ts";
import { type Client, noCommands, type RedisServer, startRedis } from "./_redis.ts";

let srv: RedisServer;
let a: Client;
let b: Client;
let n = 0;
const fresh = () => `label-test-${++n}-${Math.random().toString(36).slice(2)}`;
const T = { timeout: 60_000 };

/** Counts the commands a client sends, to see that a label adds none. */
function counting(c: Client): { count(): number } {
  let sent = 0;
  const original = c.sendCommand.bind(c);
  const wrap = c as unknown as { sendCommand: (...args: unknown[]) => unknown };
  wrap.sendCommand = (...args: unknown[]) => {
    sent++;
    return (original as (...a: unknown[]) => unknown)(...args);
  };
  return { count: () => sent };
}

describe("label", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("a bad label is refused before any Redis command, with a typed error", T, async () => {
    const idle = noCommands();
    const cases: Array<[unknown, ErrorConstructor, RegExp]> = [
      [42, TypeError, /'label' must be a string/],
      ["", RangeError, /'label' must be 1 to 256 characters/],
      ["x".repeat(257), RangeError, /'label' must be 1 to 256 characters/],
      ["two\nlines", RangeError, /without control characters/],
      ["nul\0", RangeError, /without control characters/],
      ["half \ud83d", RangeError, /lone surrogates/],
    ];
    for (const [label, Err, re] of cases) {
      await assert.rejects(
        acquire(idle, "x", { label } as never),
        (e: unknown) => e instanceof Err && re.test((e as Error).message),
      );
    }
    await assert.rejects(acquire(idle, "x", { label: "l", owner: "me" }), /'label' cannot be combined with 'owner'/);
    await assert.rejects(acquire(idle, "x", { owner: "half \udc00" }), /lone surrogates/);
    await assert.rejects(acquire(idle, ["x", "y"], { label: "" }), RangeError);
    await assert.rejects(campaign(idle, "x", { label: "\t" }), RangeError);
    assert.equal(idle.sent, 0);
    // The longest label, and any printable character (a space, ':', '|', non-ASCII) are fine.
    const odd = "host=a:b|c pid=1 cmd=é 🎉 " + "x".repeat(256 - 26);
    assert.equal(odd.length, 256);
    const lease = await acquire(a, fresh(), { label: odd });
    assert.equal((await inspect(a, lease.name)).owners[0].label, odd);
    await release(lease);
  });

  test("inspect reports the label of an exclusive hold, kept when re-entered; none without one", T, async () => {
    const name = fresh();
    const plain = await acquire(a, fresh());
    const scoped = await acquire(a, fresh(), { owner: "bob smith" });
    const lease = await acquire(a, name, { label: "host=h pid=1 cmd=job" });
    assert.match(lease.owner, /^[\w-]+ host=h pid=1 cmd=job$/);
    const again = await acquire(a, name, { owner: lease, waitMs: 0 });
    assert.equal(again.owner, lease.owner);
    const info = await inspect(b, name);
    assert.deepEqual(info.owners.map((o) => [o.owner, o.label, o.holds]), [[lease.owner, "host=h pid=1 cmd=job", 2]]);
    assert.equal((await inspect(b, plain.name)).owners[0].label, undefined);
    // An owner string is shown as it is (scoped to its client), never taken for a label, spaces and all.
    assert.equal((await inspect(b, scoped.name)).owners[0].label, undefined);
    assert.equal(labelOf(scoped.owner), undefined);
    await release(again);
    await release(lease);
    await release(plain);
    await release(scoped);
  });

  test("the label costs no Redis command: the same commands with and without it", T, async () => {
    const c = await srv.client();
    const counter = counting(c);
    const cost = async (label?: string) => {
      const before = counter.count();
      const lease = await acquire(c, fresh(), label === undefined ? {} : { label });
      await release(lease);
      return counter.count() - before;
    };
    for (let i = 0; i < 3; i++) await cost(); // the scripts are loaded by now
    // The fewest of a few rounds: a command the client sends in the background (a script load) may fall into one.
    const fewest = async (label?: string) => {
      let n = Infinity;
      for (let i = 0; i < 5; i++) n = Math.min(n, await cost(label));
      return n;
    };
    const without = await fewest();
    assert.equal(without, 2, "one script call to acquire, one to release");
    assert.equal(await fewest("host=h pid=1 cmd=x"), without);
  });

  test("shared holds, permits, several names and an election's leader carry their labels", T, async () => {
    const name = fresh();
    const r1 = await acquire(a, name, { shared: true, label: "reader 1" });
    const r2 = await acquire(b, name, { shared: true, label: "reader 2" });
    const r3 = await acquire(b, name, { shared: true });
    const shared = await inspect(a, name);
    assert.equal(shared.kind, "shared");
    assert.deepEqual(shared.owners.map((o) => o.label).sort(), ["reader 1", "reader 2", undefined]);
    for (const l of [r1, r2, r3]) await release(l);

    const sem = fresh();
    const p1 = await acquire(a, sem, { permits: 2, label: "permit a" });
    const p2 = await acquire(b, sem, { permits: 2, label: "permit b" });
    const permits = await inspect(a, sem);
    assert.equal(permits.kind, "permits");
    assert.deepEqual(permits.owners.map((o) => o.label).sort(), ["permit a", "permit b"]);
    await release(p1);
    await release(p2);

    const [x, y] = [fresh(), fresh()];
    const both = await acquire(a, [x, y], { label: "transfer 7" });
    assert.equal((await inspect(b, x)).owners[0].label, "transfer 7");
    assert.equal((await inspect(b, y)).owners[0].label, "transfer 7");
    await release(both);
    // Taken one by one (the all-at-once script refused: one name is held), still one labelled owner.
    const blocker = await acquire(b, y, { leaseMs: 300 });
    const stepwise = await acquire(a, [x, y], { label: "transfer 8", waitMs: 5_000 });
    assert.deepEqual([(await inspect(b, x)).owners[0].label, (await inspect(b, y)).owners[0].label], [
      "transfer 8",
      "transfer 8",
    ]);
    await release(stepwise);
    await release(blocker);

    const election = fresh();
    const leader = await campaign(a, election, { label: "scheduler on web-1" });
    assert.equal((await inspect(b, election)).owners[0].label, "scheduler on web-1");
    const stop = new AbortController();
    for await (const s of observe(b, election, { signal: stop.signal })) {
      assert.deepEqual([s.leader, s.label], [leader.owner, "scheduler on web-1"]);
      stop.abort();
    }
    await release(leader);
  });

  test("a hold resumed from its token keeps its owner and so its label", T, async () => {
    const name = fresh();
    const lease = await acquire(a, name, { label: "handler" });
    const resumed = await resume(b, lease.token);
    assert.equal(resumed.owner, lease.owner);
    assert.equal((await inspect(b, name)).owners[0].label, "handler");
    await release(resumed);
    await release(lease);
  });

  test("a waiter's label is its holder's label once the lease is handed over", T, async () => {
    const name = fresh();
    const first = await acquire(a, name, { label: "first" });
    const waiting = acquire(b, name, { label: "second", waitMs: 10_000 });
    for (let i = 0; i < 200 && (await inspect(a, name)).waiters === 0; i++) await new Promise((r) => setTimeout(r, 10));
    await release(first);
    const second = await waiting;
    assert.equal((await inspect(a, name)).owners[0].label, "second");
    await release(second);
  });

  test("the longest name with the longest label still makes a token that resumes", T, async () => {
    const name = "名".repeat(1_000);
    const lease = await acquire(a, name, { label: "ラ".repeat(256), waitMs: 0 });
    try {
      const other = await resume(b, lease.token);
      assert.equal(other.fence, lease.fence);
    } finally {
      await release(lease).catch(() => {});
    }
  });

  test(
    "an owner that is not labelOf()'s form has no label (an unscoped 'worker-7 nightly' of an older version)",
    T,
    async () => {
      const name = fresh();
      await a.sendCommand(["SET", `redlease:{${name}}`, "1795000000000000:att1:1::worker-7 nightly", "PX", "30000"]);
      const info = await inspect(b, name);
      assert.equal(info.owners[0].owner, "worker-7 nightly");
      assert.equal(info.owners[0].label, undefined);
    },
  );
});
