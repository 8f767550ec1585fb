// Several names on a Redlock group: every name on each master in one script call, granted by a majority of the
// masters within the validity, all or nothing, and never deadlocking against an overlapping set.
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  acquire,
  inspect,
  type Lease,
  LeaseLostError,
  LockTimeoutError,
  QuorumError,
  release,
  withLock,
} from "../mod.ts";
import { redlock } from "../src/redlock.ts";
import { waitUntil } from "../harness/wait.ts";
import { type Client, noCommands, type RedisServer, runProcess, runtimeArgs, sleep, startRedis } from "./_redis.ts";

const here = dirname(fileURLToPath(import.meta.url));
let n = 0;
const fresh = () => `rln-${++n}-${Math.random().toString(36).slice(2)}`;

/** On how many of `clients` the lease `name` is held. */
async function heldOn(clients: Client[], name: string): Promise<number> {
  let held = 0;
  for (const c of clients) if ((await inspect(c, name)).held) held++;
  return held;
}

/** Whether no key of `names` is left on any of `clients`. */
async function nothingLeft(clients: Client[], names: string[]): Promise<string | true> {
  for (const [i, c] of clients.entries()) {
    for (const name of names) if ((await inspect(c, name)).held) return `'${name}' held on master ${i}`;
  }
  return true;
}

/**
 * Three groups over their own connections take the sets {x, y}, {y, z} and {z, x} (a cycle: taken one by one in
 * the callers' orders, a deadlock) `rounds` times each, asserting that no name is held by two of them at once.
 */
async function contend(groups: ReturnType<typeof redlock>[], rounds: number, opts: { nodeTimeoutMs?: number } = {}) {
  const [x, y, z] = [fresh(), fresh(), fresh()];
  const sets = [[x, y], [y, z], [z, x]];
  const inUse = new Map<string, number>();
  let overlaps = 0;
  const done = [0, 0, 0];
  await Promise.all(groups.map(async (group, g) => {
    for (let r = 0; r < rounds; r++) {
      const lease: Lease = await acquire(group, sets[g], { waitMs: 20_000, retryDelayMs: 10, ...opts });
      for (const name of sets[g]) {
        if (inUse.has(name)) overlaps++;
        inUse.set(name, g);
      }
      await sleep(2);
      for (const name of sets[g]) inUse.delete(name);
      assert.equal(await release(lease), true);
      done[g]++;
    }
  }));
  return { overlaps, done, names: [x, y, z] };
}

describe("several names on Redlock over 3 masters", () => {
  let servers: RedisServer[];
  let a: Client[];
  let b: Client[];
  let c: Client[];
  before(async () => {
    servers = await Promise.all([0, 1, 2].map(() => startRedis()));
    a = await Promise.all(servers.map((s) => s.client()));
    b = await Promise.all(servers.map((s) => s.client()));
    c = await Promise.all(servers.map((s) => s.client()));
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  test("takes the set on every master; each fence is that name's highest over the masters; release frees all", async () => {
    const names = [fresh(), fresh(), fresh()];
    // Older fences on master 2 for the second name, so that the masters disagree on its next one.
    for (let i = 0; i < 3; i++) await release(await acquire(b[2], names[1]));
    const lease = await acquire(redlock(a), names, { waitMs: 0 });
    assert.deepEqual(lease.names, names);
    for (const [j, name] of names.entries()) {
      assert.equal(await heldOn(a, name), 3, `'${name}' on every master`);
      const fences = await Promise.all(a.map((m) => inspect(m, name).then((i) => i.fence ?? 0)));
      assert.equal(lease.fences[j], Math.max(...fences));
    }
    assert.equal(await release(lease), true);
    assert.equal(await nothingLeft(a, names), true);
  });

  test("all or nothing: one name held on a majority fails the set and leaves no name on any master", async () => {
    const names = [fresh(), fresh(), fresh()];
    const others = await Promise.all(b.slice(0, 2).map((m) => acquire(m, names[1], { leaseMs: 10_000 })));
    const err = await acquire(redlock(a), names, { waitMs: 0 }).then(() => null, (e) => e);
    assert.ok(err instanceof LockTimeoutError, String(err));
    assert.equal(err.lockName, names[1], "names the name found held");
    assert.equal(await nothingLeft(a, [names[0], names[2]]), true);
    // Waiting: retried until the wait runs out, and still nothing left behind.
    await assert.rejects(acquire(redlock(a), names, { waitMs: 300, retryDelayMs: 20 }), LockTimeoutError);
    assert.equal(await nothingLeft(a, [names[0], names[2]]), true);
    assert.equal(await heldOn(a, names[1]), 2, "the other owner's holds are untouched");
    // Held on a minority only: the majority grants the whole set.
    await release(others[1]);
    const lease = await acquire(redlock(a), names, { waitMs: 0 });
    // Each master takes all or none: master 0 (where the other owner holds the second name) took none.
    assert.equal(await nothingLeft(a.slice(0, 1), [names[0], names[2]]), true);
    for (const name of names) assert.equal(await heldOn(a.slice(1), name), 2, `'${name}' on masters 1 and 2`);
    await release(lease);
    await release(others[0]);
    assert.equal(await nothingLeft(a, names), true);
  });

  test("a waiting set is granted once the held name is released", async () => {
    const names = [fresh(), fresh()];
    const held = await acquire(redlock(b), [names[1]]);
    const waiting = acquire(redlock(a), names, { waitMs: 5_000, retryDelayMs: 20 });
    await sleep(100);
    assert.equal(await heldOn(a, names[0]), 0, "nothing of the waiting set is held meanwhile");
    await release(held);
    const lease = await waiting;
    assert.ok(lease.fences[1] > held.fence);
    await release(lease);
  });

  test("overlapping sets in a cycle from three groups: all finish, no name ever held twice at once", async () => {
    const rounds = 15;
    const { overlaps, done, names } = await contend([redlock(a), redlock(b), redlock(c)], rounds);
    assert.equal(overlaps, 0);
    assert.deepEqual(done, [rounds, rounds, rounds]);
    assert.equal(await nothingLeft(a, names), true);
  });

  test("mutual exclusion per name across 3 processes taking overlapping sets in a cycle", async () => {
    const [x, y, z] = [fresh(), fresh(), fresh()];
    const [cmd, pre] = runtimeArgs(join(here, "fixtures", "redlock_names_worker.ts"));
    const urls = servers.map((s) => s.url);
    const runs = await Promise.all(
      [[x, y], [y, z], [z, x]].map((set) =>
        runProcess(cmd, [...pre, set.join(","), "10", ...urls], { cwd: join(here, ".."), timeoutMs: 60_000 })
      ),
    );
    assert.deepEqual(runs.map((r) => r.code), [0, 0, 0], runs.map((r) => r.stderr).join("\n"));
    for (const name of [x, y, z]) {
      assert.equal(await a[0].get(`${name}:counter`), "20", `'${name}' counted by both sets that take it`);
      assert.equal(await a[0].get(`${name}:overlaps`), null);
    }
  });

  test("withLock over several names; shared, permits and replicas are refused before any command", async () => {
    const names = [fresh(), fresh()];
    const fences = await withLock(redlock(a), names, (_signal, lease) => lease.fences);
    assert.equal(fences.length, 2);
    assert.equal(await nothingLeft(a, names), true);
    const drivers = [noCommands(), noCommands(), noCommands()];
    const none = redlock(drivers);
    await assert.rejects(acquire(none, names, { shared: true }), /shared.*several names on Redlock/);
    await assert.rejects(acquire(none, names, { permits: 2 }), /permits.*Redlock/);
    await assert.rejects(acquire(none, names, { replicas: 1 }), /replicas.*Redlock/);
    await assert.rejects(acquire(none, ["a", "a"]), RangeError);
    await assert.rejects(withLock(none, names, () => 1, { shared: true }), TypeError);
    assert.deepEqual(drivers.map((d) => d.sent), [0, 0, 0]);
  });

  test("renewal keeps the set past its TTL on every master", async () => {
    const names = [fresh(), fresh()];
    const lease = await acquire(redlock(a), names, { watchdogMs: 1_000 });
    await sleep(2_600);
    assert.equal(lease.signal.aborted, false, String(lease.signal.reason));
    for (const name of names) assert.equal(await heldOn(a, name), 3);
    assert.equal(await release(lease), true);
    assert.equal(await nothingLeft(a, names), true);
  });

  test("a name lost on a majority aborts the set's signal; the release frees the others", async () => {
    const names = [fresh(), fresh(), fresh()];
    const lease = await acquire(redlock(a), names, { watchdogMs: 600 });
    // Another application's value in the second name's key on two masters: the lease is not held there.
    for (const m of a.slice(0, 2)) await m.set(`redlease:{${names[1]}}`, "a/b", { PX: 10_000 });
    const reason = await new Promise<unknown>((r) =>
      lease.signal.aborted
        ? r(lease.signal.reason)
        : lease.signal.addEventListener("abort", () => r(lease.signal.reason))
    );
    assert.ok(reason instanceof LeaseLostError && reason.why === "not-held", String(reason));
    assert.equal(await release(lease), false, "not every name was still held");
    assert.equal(await nothingLeft(a, [names[0], names[2]]), true);
    for (const m of a) await m.del(`redlease:{${names[1]}}`);
  });

  test("one master down: the cycle still completes by 2 of 3; two down: QuorumError, nothing left, a held set is lost", async () => {
    process.kill(servers[2].pid, "SIGKILL");
    await sleep(100);
    const rounds = 8;
    const { overlaps, done, names } = await contend([redlock(a), redlock(b), redlock(c)], rounds, {
      nodeTimeoutMs: 100,
    });
    assert.equal(overlaps, 0);
    assert.deepEqual(done, [rounds, rounds, rounds]);
    assert.equal(await nothingLeft(a.slice(0, 2), names), true);
    const held = await acquire(redlock(b), [fresh(), fresh()], { watchdogMs: 600, nodeTimeoutMs: 50 });
    process.kill(servers[1].pid, "SIGKILL");
    await sleep(100);
    const set = [fresh(), fresh()];
    const err = await acquire(redlock(a), set, { waitMs: 0, nodeTimeoutMs: 50 }).then(() => null, (e) => e);
    assert.ok(err instanceof QuorumError, String(err));
    assert.equal(err.required, 2);
    assert.equal(err.errors.length, 2);
    await waitUntil("nothing of the failed set left on the live master", 2_000, async () => {
      const left = await nothingLeft(a.slice(0, 1), set);
      return left;
    });
    const reason = await new Promise<unknown>((r) =>
      held.signal.aborted ? r(held.signal.reason) : held.signal.addEventListener("abort", () => r(held.signal.reason))
    );
    assert.ok(reason instanceof LeaseLostError && reason.why === "unreachable", String(reason));
  });
});
