import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient } from "redis";
import { acquire, extend, forceUnlock, inspect, release, withLock } from "../mod.ts";
import { type Client, type RedisServer, startRedis } from "./_redis.ts";

// A client that was never connected: any Redis command would fail with "The client is closed", so a
// TypeError/RangeError proves the input was rejected before any command.
const closed = createClient({ url: "redis://127.0.0.1:1" }) as unknown as Client;
// deno-lint-ignore no-explicit-any
const anyArgs = (f: (...args: any[]) => unknown, ...args: unknown[]) => Promise.resolve().then(() => f(...args));

const bad: Array<[string, unknown, object | undefined, ErrorConstructor, RegExp]> = [
  ["empty name", "", undefined, RangeError, /'name' must be a non-empty string/],
  ["non-string name", 42, undefined, TypeError, /'name'.*current value is 42/],
  ["very long name", "x".repeat(2000), undefined, RangeError, /'name'/],
  ["leaseMs 0", "n", { leaseMs: 0 }, RangeError, /'leaseMs' must be an integer from 1.*current value is 0/],
  ["negative leaseMs", "n", { leaseMs: -1 }, RangeError, /current value is -1/],
  ["NaN leaseMs", "n", { leaseMs: NaN }, RangeError, /'leaseMs'.*NaN/],
  ["fractional leaseMs", "n", { leaseMs: 1.5 }, RangeError, /'leaseMs'/],
  ["absurdly large leaseMs", "n", { leaseMs: 2 ** 31 }, RangeError, /'leaseMs'/],
  ["Infinity leaseMs", "n", { leaseMs: Infinity }, RangeError, /'leaseMs'/],
  ["string leaseMs", "n", { leaseMs: "100" }, TypeError, /'leaseMs'/],
  ["watchdogMs too small", "n", { watchdogMs: 10 }, RangeError, /'watchdogMs' must be an integer from 30/],
  ["leaseMs with watchdogMs", "n", { leaseMs: 100, watchdogMs: 3000 }, TypeError, /'watchdogMs' must be omitted/],
  ["negative waitMs", "n", { waitMs: -1 }, RangeError, /'waitMs' must be a non-negative integer or Infinity/],
  ["NaN waitMs", "n", { waitMs: NaN }, RangeError, /'waitMs'/],
  ["string waitMs", "n", { waitMs: "5" }, TypeError, /'waitMs'/],
  ["signal that is not an AbortSignal", "n", { signal: {} }, TypeError, /'signal' must be an AbortSignal/],
  ["empty owner", "n", { owner: "" }, RangeError, /'owner'/],
  ["owner that is neither string nor Lease", "n", { owner: { owner: "x" } }, TypeError, /'owner' must be a string or a Lease/],
  ["prefix with a brace", "n", { prefix: "a{b}" }, RangeError, /'prefix'/],
  ["options that are not an object", "n", 5 as unknown as object, TypeError, /'options' must be an object/],
];

describe("bad input fails with a clear error before any Redis command", () => {
  for (const [what, name, options, Err, message] of bad) {
    test(`acquire() rejects ${what} with ${Err.name}`, async () => {
      await assert.rejects(anyArgs(acquire, closed, name, options), (e: Error) => {
        assert.ok(e instanceof Err, `${e.name}: ${e.message}`);
        assert.match(e.message, message);
        assert.match(e.message, /^Cannot acquire lease as '/);
        return true;
      });
    });
  }

  for (const client of [undefined, null, {}, "redis://localhost", { sendCommand: 1 }]) {
    test(`acquire() rejects a client that is ${JSON.stringify(client)} with TypeError`, async () => {
      await assert.rejects(anyArgs(acquire, client, "n"), (e: Error) => e instanceof TypeError && /'client'/.test(e.message));
    });
  }

  test("an already-aborted signal rejects with its reason before any command", async () => {
    const reason = new Error("stop");
    await assert.rejects(acquire(closed, "n", { signal: AbortSignal.abort(reason) }), (e) => e === reason);
    await assert.rejects(withLock(closed, "n", () => 1, { signal: AbortSignal.abort(reason) }), (e) => e === reason);
  });

  test("withLock() rejects a non-function callback with TypeError", async () => {
    await assert.rejects(anyArgs(withLock, closed, "n", "not a function"), (e: Error) => e instanceof TypeError && /'fn' must be a function/.test(e.message));
  });

  test("forceUnlock() and inspect() check the name and prefix", async () => {
    await assert.rejects(anyArgs(forceUnlock, closed, ""), RangeError);
    await assert.rejects(anyArgs(inspect, closed, null), TypeError);
    await assert.rejects(anyArgs(inspect, closed, "n", { prefix: "" }), RangeError);
    await assert.rejects(anyArgs(inspect, {}, "n"), TypeError);
  });

  test("release() and extend() reject something that is not a Lease", async () => {
    await assert.rejects(anyArgs(release, { name: "n", owner: "o" }), (e: Error) => e instanceof TypeError && /'lease'/.test(e.message));
    await assert.rejects(anyArgs(extend, undefined), TypeError);
  });

  test("without validation the closed client really would fail (the checks above are meaningful)", async () => {
    await assert.rejects(acquire(closed, "n"), (e: Error) => !(e instanceof TypeError) && /closed/i.test(e.message));
  });
});

describe("extend() checks leaseMs before any command", () => {
  let srv: RedisServer;
  let a: Client;
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });
  test("extend() rejects 0, NaN, fractions and absurd values with RangeError", async () => {
    const lease = await acquire(a, "extend-validation");
    for (const v of [0, -5, NaN, 0.5, 2 ** 40]) await assert.rejects(extend(lease, v), RangeError);
    await assert.rejects(anyArgs(extend, lease, "10"), TypeError);
    assert.equal(await release(lease), true);
  });
});
