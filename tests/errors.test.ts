// The error guards (isLeaseLostError and the others): each accepts the errors the library really raises, of its own
// class and of subclasses, and rejects every look-alike — a plain Error with the same name and fields, a class of
// the same name, a string. Across two copies of the library (the ESM and CommonJS builds) they hold where
// `instanceof` does not: that is checked on the packed build in package.node.test.ts.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  acquire,
  type Driver,
  isLeaseKindError,
  isLeaseLostError,
  isLockTimeoutError,
  isQuorumError,
  isRedisTimeoutError,
  isRedisUnavailableError,
  isRedleaseError,
  isReplicationError,
  isStaleFenceError,
  LeaseKindError,
  LeaseLostError,
  LockTimeoutError,
  QuorumError,
  RedisTimeoutError,
  RedisUnavailableError,
  RedleaseError,
  release,
  ReplicationError,
  StaleFenceError,
} from "../mod.ts";
import { nodeRedis } from "../src/adapters/node_redis.ts";
import { redlock } from "../src/redlock.ts";
import { abortedWithin, type Client, type RedisServer, startRedis } from "./_redis.ts";

const guards = {
  RedleaseError: isRedleaseError,
  LockTimeoutError: isLockTimeoutError,
  RedisUnavailableError: isRedisUnavailableError,
  RedisTimeoutError: isRedisTimeoutError,
  LeaseLostError: isLeaseLostError,
  LeaseKindError: isLeaseKindError,
  ReplicationError: isReplicationError,
  QuorumError: isQuorumError,
  StaleFenceError: isStaleFenceError,
};
type ErrorName = keyof typeof guards;

/** Which guards hold for `err`, by name. */
const accepted = (err: unknown) =>
  Object.entries(guards).filter(([, guard]) => guard(err)).map(([name]) => name).sort();

/** Each class's parent, where it is not RedleaseError: an outage of either kind is a RedisUnavailableError. */
const parent: Partial<Record<ErrorName, ErrorName>> = {
  RedisTimeoutError: "RedisUnavailableError",
  QuorumError: "RedisUnavailableError",
};

/** The guards an error of class `name` must pass: its own, its parent's (if any) and RedleaseError's. */
const expected = (name: ErrorName) => [...new Set(["RedleaseError", name, parent[name] ?? name])].sort();

let srv: RedisServer;
let a: Client;
let b: Client;
let n = 0;
const fresh = () => `errors-test-${++n}-${Math.random().toString(36).slice(2)}`;

describe("error guards", () => {
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("a LockTimeoutError from a busy lease passes isLockTimeoutError and isRedleaseError only", async () => {
    const name = fresh();
    const held = await acquire(a, name);
    const err = await acquire(b, name, { waitMs: 0 }).then(() => null, (e) => e);
    await release(held);
    assert.ok(err instanceof LockTimeoutError, String(err));
    assert.deepEqual(accepted(err), expected("LockTimeoutError"));
    if (!isLockTimeoutError(err)) throw new Error("unreachable"); // and the guard narrows the type
    assert.equal(err.lockName, name);
    assert.ok(err.remainingMs > 0);
  });

  test("a RedisTimeoutError from a release that Redis does not answer in time", async () => {
    let hang = false;
    const d = nodeRedis(a);
    const never = new Promise<never>(() => {});
    const driver: Driver = {
      evalScript: (sha, keys, args, signal) => hang ? never : d.evalScript(sha, keys, args, signal),
      evalSource: (source, keys, args, signal) => hang ? never : d.evalSource!(source, keys, args, signal),
      loadScript: (source, key, signal) => hang ? never : d.loadScript(source, key, signal),
    };
    const lease = await acquire(driver, fresh(), { leaseMs: 5_000 });
    hang = true;
    const err = await release(lease, { timeoutMs: 50 }).then(() => null, (e) => e);
    assert.ok(err instanceof RedisTimeoutError, String(err));
    assert.deepEqual(accepted(err), expected("RedisTimeoutError"));
    assert.ok(!isLockTimeoutError(err), "an outage is never contention");
  });

  test("a RedisUnavailableError from a client that cannot reach Redis, with the client's error as its cause", async () => {
    const cause = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
    const down: Driver = { evalScript: () => Promise.reject(cause), loadScript: () => Promise.reject(cause) };
    const err = await acquire(down, fresh(), { waitMs: 0 }).then(() => null, (e) => e);
    assert.ok(err instanceof RedisUnavailableError && !(err instanceof RedisTimeoutError), String(err));
    assert.deepEqual(accepted(err), expected("RedisUnavailableError"));
    assert.equal(err.cause, cause);
  });

  test("a Redis error reply is passed through as it is: Redis answered, so it is no outage", async () => {
    const denied = new Error("NOPERM this user has no permissions to run the 'evalsha' command");
    const driver: Driver = { evalScript: () => Promise.reject(denied), loadScript: () => Promise.reject(denied) };
    const err = await acquire(driver, fresh(), { waitMs: 0 }).then(() => null, (e) => e);
    assert.equal(err, denied);
    // …unless it says that Redis cannot serve now (loading its data, a replica since a failover): an outage.
    for (
      const text of ["LOADING Redis is loading the dataset in memory", "READONLY You can't write against a replica"]
    ) {
      const refusal = new Error(text);
      const d: Driver = { evalScript: () => Promise.reject(refusal), loadScript: () => Promise.reject(refusal) };
      const e = await acquire(d, fresh(), { waitMs: 0 }).then(() => null, (e) => e);
      assert.ok(isRedisUnavailableError(e) && e.cause === refusal, `${text}: ${e}`);
    }
  });

  test("a LeaseLostError that a fixed lease's signal aborts with", async () => {
    const lease = await acquire(a, fresh(), { leaseMs: 50 });
    const reason = await abortedWithin(lease.signal, 5_000);
    assert.ok(reason instanceof LeaseLostError, String(reason));
    assert.deepEqual(accepted(reason), expected("LeaseLostError"));
    assert.ok(isLeaseLostError(reason) && reason.why === "expired");
  });

  test("a LeaseKindError from permits asked of an exclusive lease", async () => {
    const name = fresh();
    const held = await acquire(a, name);
    const err = await acquire(b, name, { permits: 2, waitMs: 0 }).then(() => null, (e) => e);
    await release(held);
    assert.ok(err instanceof LeaseKindError, String(err));
    assert.deepEqual(accepted(err), expected("LeaseKindError"));
  });

  test("a ReplicationError from a standalone server that has no replica to acknowledge", async () => {
    const err = await acquire(a, fresh(), { replicas: 1, replicaTimeoutMs: 50 }).then(() => null, (e) => e);
    assert.ok(err instanceof ReplicationError, String(err));
    assert.deepEqual(accepted(err), expected("ReplicationError"));
  });

  test("a QuorumError from Redlock when 2 of 3 masters fail", async () => {
    const down = (): Driver => ({
      evalScript: () => Promise.reject(new Error("ECONNREFUSED")),
      loadScript: () => Promise.reject(new Error("ECONNREFUSED")),
    });
    const err = await acquire(redlock([a, down(), down()]), fresh(), { waitMs: 0, nodeTimeoutMs: 50 })
      .then(() => null, (e) => e);
    assert.ok(err instanceof QuorumError, String(err));
    assert.deepEqual(accepted(err), expected("QuorumError"));
  });

  test("every class, constructed, and a subclass of it pass their own guard and isRedleaseError", () => {
    const made: Array<[ErrorName, Error]> = [
      ["RedleaseError", new RedleaseError("n", "m")],
      ["LockTimeoutError", new LockTimeoutError("n", 10, 20)],
      ["RedisUnavailableError", new RedisUnavailableError("n", "m")],
      ["RedisTimeoutError", new RedisTimeoutError("n", 10)],
      ["LeaseLostError", new LeaseLostError("n", "not-held")],
      ["LeaseKindError", new LeaseKindError("n", "mismatch", 3)],
      ["ReplicationError", new ReplicationError("n", 0, 1)],
      ["QuorumError", new QuorumError("n", 1, 2, [])],
      ["StaleFenceError", new StaleFenceError("n", "k", 1, 2)],
    ];
    for (const [name, err] of made) {
      assert.equal(err.name, name);
      assert.deepEqual(accepted(err), expected(name), name);
      // The brand is inherited from the prototype, so it shows nowhere in the error itself.
      assert.deepEqual(Object.getOwnPropertySymbols(err), [], name);
    }
    class MyLeaseLostError extends LeaseLostError {}
    assert.deepEqual(accepted(new MyLeaseLostError("n", "expired")), expected("LeaseLostError"));
  });

  test("look-alikes pass no guard: a plain Error with the same name and fields, a class of that name, others", () => {
    for (const name of Object.keys(guards) as ErrorName[]) {
      const plain = Object.assign(new Error("m"), { name, lockName: "n", why: "expired", remainingMs: 1 });
      const Named = { [name]: class extends Error {} }[name];
      const named = new Named("m");
      named.name = name;
      const lookalikes = [plain, named, { name, lockName: "n" }, Object.create(null), name, undefined, null, 0];
      lookalikes.forEach((lookalike, i) => assert.deepEqual(accepted(lookalike), [], `${name}: look-alike #${i}`));
    }
    assert.deepEqual(accepted(new TypeError("Cannot acquire lease as 'name' must be a non-empty string")), []);
    assert.deepEqual(accepted(new DOMException("released", "AbortError")), []);
  });
});
