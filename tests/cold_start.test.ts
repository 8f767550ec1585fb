// Cold start (issue 10): what a fresh client sends to Redis before its first lease. A script is tried with EVALSHA
// first and sent in full (EVAL) only after NOSCRIPT, once per script however many calls need it at the same time;
// the eviction check (INFO) goes out only after the first script call has settled.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { acquire, type Driver, extend, inspect, release } from "../mod.ts";
import { upstash } from "../src/adapters/http.ts";
import { type HttpBridge, startHttpBridge } from "../harness/http_bridge.ts";
import { type Client, type RedisServer, sleep, startRedis, until } from "./_redis.ts";

let srv: RedisServer;
let admin: Client;
let bridge: HttpBridge;
let n = 0;
const fresh = () => `cold-${++n}-${Math.random().toString(36).slice(2)}`;

async function stats(): Promise<Record<string, number>> {
  const info = String(await admin.sendCommand(["INFO", "commandstats"]));
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]] = Number(m[2]);
  return out;
}

/** Forget every script and reset the command counters: the server has never seen redlease's scripts. */
async function flushed(): Promise<void> {
  await admin.sendCommand(["SCRIPT", "FLUSH"]);
  await admin.sendCommand(["CONFIG", "RESETSTAT"]);
}

/** What went out, in order, and the round trips: commands sent before any reply arrived count as one. */
interface Tally {
  roundTrips: number;
  readonly commands: string[];
}

function tally(): { t: Tally; sent(command: string): void; replied(): void } {
  const t: Tally = { roundTrips: 0, commands: [] };
  let answered = true;
  return {
    t,
    sent(command) {
      if (answered) t.roundTrips++;
      answered = false;
      t.commands.push(command.toLowerCase());
    },
    replied() {
      answered = true;
    },
  };
}

/** A new node-redis client whose commands (all of them redlease's) are tallied on the way out. */
async function countedClient(): Promise<{ client: Client; t: Tally }> {
  const client = await srv.client();
  const { t, sent, replied } = tally();
  const send = client.sendCommand.bind(client) as (...a: unknown[]) => Promise<unknown>;
  (client as unknown as { sendCommand: unknown }).sendCommand = (args: string[], ...rest: unknown[]) => {
    sent(args[0] === "SCRIPT" ? `script|${args[1]}` : args[0]);
    const p = send(args, ...rest);
    p.then(replied, replied);
    return p;
  };
  return { client, t };
}

/** A new HTTP driver whose requests are tallied (every command is one request). */
function countedHttp(): { driver: Driver; t: Tally } {
  const { t, sent, replied } = tally();
  const driver = upstash({
    url: bridge.url,
    token: bridge.token,
    fetch: (input, init) => {
      const command = JSON.parse(String(init.body)) as string[];
      sent(command[0] === "SCRIPT" ? `script|${command[1]}` : command[0]);
      const p = fetch(input, init);
      p.then(replied, replied);
      return p;
    },
  });
  return { driver, t };
}

/** A custom Driver with only the two required script functions: no `evalSource`. */
function minimalDriver(c: Client): Driver {
  return {
    evalScript: (sha, keys, args) => c.sendCommand(["EVALSHA", sha, String(keys.length), ...keys, ...args]),
    loadScript: async (source) => String(await c.sendCommand(["SCRIPT", "LOAD", source])),
  };
}

describe("cold start: the first lease of a fresh client", () => {
  before(async () => {
    srv = await startRedis();
    admin = await srv.client();
    bridge = await startHttpBridge(srv.url);
  });
  after(async () => {
    await bridge?.stop();
    await srv?.stop();
  });

  test("node-redis, server without the scripts: at most 2 round trips, EVALSHA then the acquire script in full once", async () => {
    await flushed();
    const { client, t } = await countedClient();
    const lease = await acquire(client, fresh());
    const before = { roundTrips: t.roundTrips, commands: [...t.commands] };
    assert.ok(before.roundTrips <= 2, `${before.roundTrips} round trips: ${before.commands.join(", ")}`);
    assert.deepEqual(before.commands, ["evalsha", "eval"], "nothing but the script call, its text sent once");
    const s = await stats();
    assert.equal(s.eval, 1, "only the acquire script was sent in full");
    assert.equal(s["script|load"], undefined, "no script is loaded up front");
    // The eviction check goes out after the first script call, never before the lease.
    for (let i = 0; i < 500 && !t.commands.includes("info"); i++) await sleep(20);
    assert.deepEqual(t.commands.filter((c) => c === "info"), ["info"], t.commands.join(", "));
    assert.equal(await release(lease), true);
    assert.equal((await stats()).eval, 2, "the release script, sent in full on its first use");
  });

  test("node-redis, server that has the scripts: 1 round trip, one EVALSHA", async () => {
    await release(await acquire(await srv.client(), fresh())); // another client leaves the scripts cached
    const { client, t } = await countedClient();
    const lease = await acquire(client, fresh());
    assert.equal(t.roundTrips, 1, t.commands.join(", "));
    assert.deepEqual(t.commands, ["evalsha"]);
    assert.equal(await release(lease), true);
  });

  test("HTTP, server without the scripts: at most 2 requests; with them: 1 request", async () => {
    await flushed();
    const cold = countedHttp();
    const at = bridge.requests;
    const lease = await acquire(cold.driver, fresh());
    const requests = bridge.requests - at;
    assert.ok(requests <= 2, `${requests} requests: ${cold.t.commands.join(", ")}`);
    assert.equal(cold.t.commands.length, requests, "every request is one command");
    assert.deepEqual(cold.t.commands, ["evalsha", "eval"]);
    assert.equal(await release(lease), true);

    const warm = countedHttp();
    const at2 = bridge.requests;
    const again = await acquire(warm.driver, fresh());
    assert.equal(bridge.requests - at2, 1, warm.t.commands.join(", "));
    assert.deepEqual(warm.t.commands, ["evalsha"]);
    assert.equal(await release(again), true);
  });

  test("16 concurrent first acquires on a fresh node-redis client send the acquire script in full once", async () => {
    await flushed();
    const { client, t } = await countedClient();
    const leases = await Promise.all(Array.from({ length: 16 }, () => acquire(client, fresh())));
    const s = await stats();
    assert.equal(s.eval, 1, JSON.stringify(s));
    assert.equal(s["script|load"], undefined, JSON.stringify(s));
    assert.equal(t.commands.filter((c) => c === "eval").length, 1);
    for (const l of leases) assert.equal(await release(l), true);
    assert.equal((await stats()).eval, 2, "and the release script once, however many releases ran");
  });

  test("16 concurrent first acquires on a fresh HTTP driver send the acquire script in full once", async () => {
    await flushed();
    const { driver, t } = countedHttp();
    const leases = await Promise.all(Array.from({ length: 16 }, () => acquire(driver, fresh())));
    const s = await stats();
    assert.equal(s.eval, 1, JSON.stringify(s));
    assert.equal(s["script|load"], undefined, JSON.stringify(s));
    assert.equal(t.commands.filter((c) => c === "eval").length, 1);
    await Promise.all(leases.map(async (l) => assert.equal(await release(l), true)));
    assert.equal((await stats()).eval, 2);
  });

  test("HTTP: a call waiting for another call's send of the text is not failed when that caller gives up", async () => {
    await flushed();
    const [nameA, nameB] = [fresh(), fresh()];
    let evalOfA!: () => void;
    const aSending = new Promise<void>((r) => (evalOfA = r));
    const commandsOfB: string[] = [];
    let hung = false;
    let bAnswered = false; // B's first EVALSHA has its (NOSCRIPT) reply
    const driver = upstash({
      url: bridge.url,
      token: bridge.token,
      fetch: async (input, init) => {
        const command = JSON.parse(String(init.body)) as string[];
        const key = command[3] ?? "";
        if (key.includes(nameB)) commandsOfB.push(command[0]);
        if (command[0] === "EVAL" && key.includes(nameA) && !hung) {
          // A's text never reaches Redis: the request hangs until A's call gives up and aborts it.
          hung = true;
          evalOfA();
          return await new Promise<Response>((_, reject) => {
            init.signal!.addEventListener("abort", () => reject(init.signal!.reason), { once: true });
          });
        }
        const res = await fetch(input, init);
        // B's first NOSCRIPT arrives only once A has started sending the text: B waits for A's send.
        if (key.includes(nameB) && commandsOfB.length === 1) {
          await aSending;
          bAnswered = true;
        }
        return res;
      },
    });
    const ac = new AbortController();
    const a = acquire(driver, nameA, { waitMs: 60_000, signal: ac.signal });
    const b = acquire(driver, nameB, { waitMs: 60_000 });
    await aSending;
    await until("B's first EVALSHA answered", () => bAnswered);
    await sleep(100); // B, answered NOSCRIPT, is waiting for A's send now: it does not send the text meanwhile
    assert.deepEqual(commandsOfB, ["EVALSHA"], "B did not send the text while A's send was under way");
    ac.abort(new Error("A gave up"));
    await assert.rejects(a, /A gave up/);
    const lease = await b;
    assert.deepEqual(commandsOfB, ["EVALSHA", "EVALSHA", "EVAL"], "B retried, then sent the text itself");
    assert.equal(await release(lease), true);
  });

  test("a custom Driver without evalSource falls back to SCRIPT LOAD of the one script it needs, once", async () => {
    await flushed();
    const driver = minimalDriver(await srv.client());
    const leases = await Promise.all(Array.from({ length: 16 }, () => acquire(driver, fresh())));
    let s = await stats();
    assert.equal(s["script|load"], 1, JSON.stringify(s));
    assert.equal(s.eval, undefined, JSON.stringify(s));
    for (const l of leases) assert.equal(await release(l), true);
    s = await stats();
    assert.equal(s["script|load"], 2, "the release script, loaded on its first use");
    // NOSCRIPT later in life: loaded again, once, and the call retried.
    const lease = await acquire(driver, fresh());
    await flushed();
    assert.equal(await extend(lease), true);
    s = await stats();
    assert.equal(s["script|load"], 1, JSON.stringify(s));
    assert.equal(await release(lease), true);
  });

  test("a SCRIPT FLUSH mid-life is recovered: EVALSHA fails with NOSCRIPT, the script is sent in full once more", async () => {
    const { client } = await countedClient();
    const lease = await acquire(client, fresh());
    await flushed();
    assert.equal(await extend(lease), true);
    let s = await stats();
    assert.equal(s.eval, 1, JSON.stringify(s));
    assert.equal(s.evalsha, 1, "the EVALSHA that failed with NOSCRIPT");
    assert.equal(s["script|load"], undefined);
    await flushed();
    assert.equal(await release(lease), true);
    await flushed();
    const again = await acquire(client, lease.name, { waitMs: 0 });
    await flushed();
    assert.equal((await inspect(client, lease.name)).held, true);
    await flushed();
    assert.equal(await release(again), true);
    s = await stats();
    assert.equal(s.eval, 1, JSON.stringify(s));
  });
});
