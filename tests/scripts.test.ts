import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  acquire,
  configure,
  type Driver,
  extend,
  inspect,
  LeaseLostError,
  type LogDetails,
  RedisTimeoutError,
  release,
} from "../mod.ts";
import { nodeRedis } from "../src/adapters/node_redis.ts";
import { giveBack } from "../src/_acquire.ts";
import { stateOf } from "../src/_client.ts";
import { keysOf } from "../src/_protocol.ts";
import { abortedWithin, type Client, noCommands, type RedisServer, startRedis, until } from "./_redis.ts";

let srv: RedisServer;
let a: Client;
let admin: Client;
let n = 0;
const fresh = () => `script-test-${++n}`;

async function stats(): Promise<Record<string, number>> {
  const info = await admin.info("commandstats");
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]] = Number(m[2]);
  return out;
}

describe("scripts: EVALSHA, the text sent in full (EVAL) only after NOSCRIPT", () => {
  before(async () => {
    srv = await startRedis();
    [a, admin] = [await srv.client(), await srv.client()];
  });
  after(async () => {
    await srv.stop();
  });

  test("a script is sent in full once, on its first use, and run with EVALSHA afterwards; nothing is preloaded", async () => {
    await admin.sendCommand(["CONFIG", "RESETSTAT"]);
    for (let i = 0; i < 20; i++) await release(await acquire(a, fresh()));
    const s = await stats();
    assert.equal(s["script|load"], undefined, "no SCRIPT LOAD");
    assert.equal(s.eval, 2, "acquire.lua and release.lua sent in full once each; the others never used");
    assert.equal(s.evalsha, 40, "one EVALSHA per acquire and per release (the first of each: NOSCRIPT)");
  });

  test("after SCRIPT FLUSH, NOSCRIPT is recovered transparently (the script sent in full once more)", async () => {
    const lease = await acquire(a, fresh());
    await admin.sendCommand(["SCRIPT", "FLUSH"]);
    await admin.sendCommand(["CONFIG", "RESETSTAT"]);
    assert.equal(await extend(lease), true);
    const s = await stats();
    assert.equal(s["script|load"], undefined);
    assert.equal(s.evalsha, 1, "the EVALSHA that failed with NOSCRIPT");
    assert.equal(s.eval, 1, "extend.lua in full, which ran the call too");
    await admin.sendCommand(["SCRIPT", "FLUSH"]);
    assert.equal(await release(lease), true);
    await admin.sendCommand(["SCRIPT", "FLUSH"]);
    const again = await acquire(a, lease.name, { waitMs: 0 });
    await admin.sendCommand(["SCRIPT", "FLUSH"]);
    assert.equal((await inspect(a, lease.name)).held, true);
    await release(again);
  });

  test("a NOSCRIPT that follows a TRYAGAIN (slot moving to a new master) is still reloaded", async () => {
    const real = nodeRedis(a);
    let first = true;
    const resharding: Driver = {
      ...real,
      evalScript: async (sha, keys, args) => {
        if (first) {
          first = false;
          await admin.sendCommand(["SCRIPT", "FLUSH"]); // the slot's new master never ran the script
          throw new Error("TRYAGAIN Multiple keys request during rehashing of slot");
        }
        return await real.evalScript(sha, keys, args);
      },
    };
    const lease = await acquire(resharding, fresh());
    assert.equal(await release(lease), true);
  });

  test("what Redis never ran (CLUSTERDOWN, or a call the driver says is unsent) is sent again while the caller waits, and only then", async () => {
    const real = nodeRedis(a);
    const unsentError = new Error("Disconnects client");
    /** A driver whose first `failures` acquire calls fail with `error()`; counts the acquire calls. */
    const failover = (error: () => Error, failures: number) => {
      let acquireSha = "";
      const d: { acquires: number; failures: number; driver: Driver } = {
        acquires: 0,
        failures,
        driver: {
          ...real,
          evalScript: (sha, keys, args) => {
            acquireSha ||= sha; // the first call is an acquire
            if (sha !== acquireSha) return real.evalScript(sha, keys, args);
            d.acquires++;
            return d.failures-- > 0 ? Promise.reject(error()) : real.evalScript(sha, keys, args);
          },
          unsent: (e) => e === unsentError,
        },
      };
      return d;
    };
    // A cluster that is down for ~0.5 s: the call is refused five times (100 ms apart) and then runs.
    const down = failover(() => new Error("CLUSTERDOWN The cluster is down"), 5);
    const t0 = performance.now();
    const lease = await acquire(down.driver, fresh(), { waitMs: 2_000 });
    assert.equal(down.acquires, 6);
    assert.ok(performance.now() - t0 >= 400, "100 ms between two tries");
    assert.equal(await release(lease), true);
    // Unsent (queued for a node its client dropped): sent again 20 ms later.
    const dropped = failover(() => unsentError, 3);
    assert.equal(await release(await acquire(dropped.driver, fresh(), { waitMs: 1_000 })), true);
    assert.equal(dropped.acquires, 4);
    // Still down when the caller's bound passes: nothing is sent after it.
    const longer = failover(() => new Error("CLUSTERDOWN The cluster is down"), 1_000);
    // An outage, not contention (issue 31): no answer by the bound, the last refusal as its cause.
    await assert.rejects(acquire(longer.driver, fresh(), { waitMs: 300 }), (e: unknown) => {
      assert.ok(e instanceof RedisTimeoutError, String(e));
      assert.match(String((e as Error).cause), /CLUSTERDOWN/);
      return true;
    });
    const sent = longer.acquires;
    assert.ok(sent >= 4 && sent <= 7, `${sent} tries within 300 + 250 ms`);
    await new Promise((r) => setTimeout(r, 250));
    assert.equal(longer.acquires, sent, "nothing sent after the caller gave up");
    // Any other failure is not sent again (its outcome is unknown).
    const closed = failover(() => new Error("Socket closed unexpectedly"), 1);
    await assert.rejects(acquire(closed.driver, fresh(), { waitMs: 1_000 }), /Socket closed unexpectedly/);
    assert.equal(closed.acquires, 1);
  });

  test("an uncontended acquire + release is two round trips", async () => {
    await release(await acquire(a, fresh())); // warm
    await admin.sendCommand(["CONFIG", "RESETSTAT"]);
    for (let i = 0; i < 10; i++) await release(await acquire(a, fresh()));
    const s = await stats();
    const client = Object.entries(s)
      .filter(([k]) => ["evalsha", "eval", "subscribe", "unsubscribe", "script|load", "ping"].includes(k))
      .reduce((sum, [, v]) => sum + v, 0);
    assert.equal(client, 20);
  });
});

describe("eviction policy warning", () => {
  test("a client warns once when Redis may evict lease keys (volatile-lru), and not under noeviction", async () => {
    const evicting = await startRedis(["--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"]);
    const safe = await startRedis();
    const warnings: string[] = [];
    const original = console.warn;
    console.warn = (...args: unknown[]) => void warnings.push(args.join(" "));
    try {
      const c = await evicting.client();
      await release(await acquire(c, "evict-1"));
      await release(await acquire(c, "evict-2"));
      const d = await safe.client();
      await release(await acquire(d, "safe-1"));
      // The check runs after the first script call: wait for the warning, then a moment for any second one.
      await until("the eviction warning", () => warnings.length >= 1);
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      console.warn = original;
      await evicting.stop();
      await safe.stop();
    }
    assert.equal(warnings.length, 1, warnings.join("\n"));
    assert.match(warnings[0], /maxmemory-policy volatile-lru/);
  });

  test("configure(): the warning goes to the client's logger with its details; null silences it", async () => {
    const evicting = await startRedis(["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"]);
    const onConsole: string[] = [];
    const original = console.warn;
    console.warn = (...args: unknown[]) => void onConsole.push(args.join(" "));
    try {
      const logged: Array<[string, LogDetails]> = [];
      const c = await evicting.client();
      configure(c, { logger: { warn: (message, details) => void logged.push([message, details]) } });
      await release(await acquire(c, "evict-logged"));
      const quiet = await evicting.client();
      configure(quiet, { logger: null });
      await release(await acquire(quiet, "evict-quiet"));
      await until("the eviction warning", () => logged.length >= 1);
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(logged.length, 1, JSON.stringify(logged));
      assert.match(logged[0][0], /maxmemory-policy allkeys-lru/);
      assert.equal(logged[0][1].policy, "allkeys-lru");
      assert.deepEqual(onConsole, [], "nothing went to the console");
    } finally {
      console.warn = original;
      await evicting.stop();
    }
  });

  test("configure(): a give-back that never gets through warns once; a logger that throws breaks nothing", async () => {
    const failing = () => Promise.reject(new Error("LOADING Redis is loading the dataset in memory"));
    const driver: Driver = { evalScript: failing, evalSource: failing, loadScript: failing };
    const warned: string[] = [];
    configure(driver, { logger: { warn: (m) => void warned.push(m) } });
    await giveBack(stateOf(driver), keysOf("redlease", "gb"), { kind: "x", owner: "me" }, 300, "gb");
    await new Promise((r) => setTimeout(r, 700)); // its retries, until the lease would have lapsed anyway
    await until("the give-back's warning", () => warned.length >= 1); // (later on a loaded machine)
    assert.equal(warned.length, 1, warned.join("\n"));
    // (A LOADING reply is an outage: issue 31.)
    assert.match(warned[0], /lease 'gb' was not surely given back \(RedisUnavailableError: .*LOADING/);
    // A logger that throws: the give-back settles, and nothing is left unhandled (the test runner would fail on it).
    configure(driver, {
      logger: {
        warn: () => {
          throw new Error("warn broke");
        },
      },
    });
    await giveBack(stateOf(driver), keysOf("redlease", "gb"), { kind: "x", owner: "me" }, 300, "gb");
    await new Promise((r) => setTimeout(r, 700));
    // An async logger whose promise rejects: its rejection is its own too.
    configure(driver, { logger: { warn: () => Promise.reject(new Error("log sink unreachable")) } });
    await giveBack(stateOf(driver), keysOf("redlease", "gb"), { kind: "x", owner: "me" }, 300, "gb");
    await new Promise((r) => setTimeout(r, 700));
  });

  test("configure(): a logger's debug hears of a lost lease, with its name and why; bad options are refused", async () => {
    const srv = await startRedis();
    try {
      const c = await srv.client();
      const admin = await srv.client();
      const debug: Array<[string, LogDetails]> = [];
      configure(c, { logger: { warn: () => {}, debug: (message, details) => void debug.push([message, details]) } });
      const lease = await acquire(c, "debug-lost", { watchdogMs: 300 });
      await admin.del("redlease:{debug-lost}");
      const reason = await abortedWithin(lease.signal, 5_000);
      assert.ok(reason instanceof LeaseLostError, String(reason));
      assert.equal(debug.length, 1, JSON.stringify(debug));
      assert.match(debug[0][0], /lease 'debug-lost' lost \(not-held\)/);
      assert.equal(debug[0][1].name, "debug-lost");
      assert.equal(debug[0][1].why, "not-held");
      const none = noCommands();
      assert.throws(() => configure(none, { logger: {} as never }), TypeError);
      assert.throws(() => configure(none, { logger: { warn: () => {}, debug: 1 } as never }), TypeError);
      assert.throws(() => configure(none, null as never), TypeError);
      assert.throws(() => configure({} as never, { logger: null }), TypeError);
      assert.equal(none.sent, 0);
    } finally {
      await srv.stop();
    }
  });
});
