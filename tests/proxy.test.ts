// The fault-injecting proxy of the chaos runs (chaos/_proxy.ts), each fault checked against a real redis-server
// through node-redis. With PROXY_EXIT_CHECK=<redis port> this file is instead the child of the "close" test.
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { once } from "node:events";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { createClient } from "redis";
import { type FaultProxy, startProxy } from "../chaos/_proxy.ts";
import { type Client, type RedisServer, runProcess, runtimeArgs, runtimeName, sleep, startRedis } from "./_redis.ts";

const TIMEOUT = Symbol("timeout");
const PING = "*1\r\n$4\r\nPING\r\n";

/** `p`, or TIMEOUT if it has not settled within `ms`. */
async function within<T>(p: Promise<T>, ms: number): Promise<T | typeof TIMEOUT> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<typeof TIMEOUT>((resolve) => (timer = setTimeout(() => resolve(TIMEOUT), ms)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function waitFor(cond: () => boolean, ms = 5_000): Promise<void> {
  for (const t0 = performance.now(); !cond(); await sleep(20)) {
    if (performance.now() - t0 > ms) throw new Error("condition not met in time");
  }
}

/** A raw socket to the proxy, for the cases node-redis would retry on its own. */
async function rawSocket(port: number): Promise<Socket> {
  const s = connect(port, "127.0.0.1");
  s.on("error", () => {});
  await once(s, "connect");
  return s;
}

/** Resolves when `s` closes: true for an error (an RST), false for a clean close. */
const closed = (s: Socket) => new Promise<boolean>((resolve) => s.once("close", resolve));

/** The child of the "close" test: leave delayed and held bytes behind, close(), and exit by itself. */
async function exitCheck(redisPort: number): Promise<void> {
  const proxy = await startProxy({ port: redisPort });
  const a = await rawSocket(proxy.port);
  a.write(PING);
  await once(a, "data");
  proxy.delay({ ms: 30_000, direction: "down" });
  a.write(PING); // its reply waits on a 30 s timer
  const b = await rawSocket(proxy.port);
  proxy.blackhole({ kind: "all", direction: "up", hold: true });
  b.write(PING); // held
  await sleep(200);
  await proxy.close();
  console.log("closed");
}

const exitCheckPort = process.env.PROXY_EXIT_CHECK;
if (exitCheckPort) await exitCheck(Number(exitCheckPort));
else {
  describe(`fault proxy (${runtimeName()})`, () => {
    let srv: RedisServer;
    let direct: Client;
    const proxies: FaultProxy[] = [];
    const clients: Client[] = [];
    let n = 0;
    const fresh = () => `proxy-test-${++n}-${Math.random().toString(36).slice(2)}`;

    async function newProxy(): Promise<FaultProxy> {
      const p = await startProxy({ port: srv.port });
      proxies.push(p);
      return p;
    }

    async function clientVia(proxy: FaultProxy): Promise<Client> {
      const c = createClient({ url: proxy.url, socket: { reconnectStrategy: (i) => Math.min(50 * i, 300) } });
      c.on("error", () => {});
      clients.push(c);
      await c.connect();
      return c;
    }

    before(async () => {
      srv = await startRedis();
      direct = await srv.client();
    });

    after(async () => {
      for (const p of proxies) p.clear();
      for (const c of clients) {
        await waitFor(() => !c.isOpen || c.isReady).catch(() => {});
        if (c.isOpen) await within(c.disconnect(), 2_000).catch(() => {});
      }
      for (const p of proxies) await p.close();
      await srv.stop();
    });

    test("passes commands through and counts connections, bytes and commands", async () => {
      const proxy = await newProxy();
      const client = await clientVia(proxy);
      const key = fresh();
      assert.equal(await client.set(key, "v"), "OK");
      assert.equal(await client.get(key), "v");
      assert.equal(await direct.get(key), "v");
      const conns = proxy.connections();
      assert.equal(conns.length, 1);
      assert.equal(conns[0].kind, "command");
      assert.deepEqual(conns[0].blackholed, []);
      const stats = proxy.stats();
      assert.equal(stats.accepted, 1);
      assert.ok(stats.commands.command >= 2, `commands: ${stats.commands.command}`);
      assert.ok(stats.bytes.command.up > 0 && stats.bytes.command.down > 0);
      assert.equal(stats.commands.subscriber, 0);
    });

    test("delay adds at least the latency per direction and keeps byte order under jitter", async () => {
      const proxy = await newProxy();
      const client = await clientVia(proxy);
      proxy.delay({ ms: 150, direction: "up" });
      let t0 = performance.now();
      assert.equal(await client.ping(), "PONG");
      assert.ok(performance.now() - t0 >= 145, `one-way: ${performance.now() - t0} ms`);
      proxy.delay({ ms: 100 }); // both directions
      t0 = performance.now();
      await client.ping();
      assert.ok(performance.now() - t0 >= 195, `round trip: ${performance.now() - t0} ms`);
      proxy.delay({ ms: 5, jitterMs: 60 });
      const key = fresh();
      const appends: Promise<number>[] = [];
      for (let i = 0; i < 20; i++) {
        appends.push(client.append(key, `${i},`));
        await sleep(3); // each in its own chunk, so jitter could reorder them
      }
      await Promise.all(appends);
      assert.equal(await client.get(key), Array.from({ length: 20 }, (_, i) => `${i},`).join(""));
      proxy.delay({ ms: 0 });
      t0 = performance.now();
      await client.ping();
      assert.ok(performance.now() - t0 < 1_000);
    });

    test("a held blackhole on command connections makes a GET hang, and heal() delivers it late", async () => {
      const proxy = await newProxy();
      const client = await clientVia(proxy);
      const key = fresh();
      await direct.set(key, "late");
      proxy.blackhole({ kind: "command", hold: true });
      const get = client.get(key);
      assert.equal(await within(get, 700), TIMEOUT);
      assert.equal(proxy.connections().length, 1, "the connection stays open");
      assert.deepEqual(proxy.connections()[0].blackholed, ["up", "down"]);
      assert.equal(client.isReady, true, "the client sees a live connection");
      proxy.heal();
      assert.equal(await within(get, 5_000), "late");
      assert.equal(await client.get(key), "late");
    });

    test("a dropping blackhole swallows the reply of a command that ran; heal() then resets the connection", async () => {
      const proxy = await newProxy();
      const client = await clientVia(proxy);
      const key = fresh();
      proxy.blackhole({ kind: "command", direction: "down" });
      const set = client.set(key, "ran");
      set.catch(() => {});
      assert.equal(await within(set, 700), TIMEOUT);
      assert.equal(await direct.get(key), "ran", "the request went up");
      proxy.heal();
      await assert.rejects(within(set, 5_000));
      assert.equal(await within(client.get(key), 5_000), "ran", "the client reconnects");
    });

    test("SUBSCRIBE makes a subscriber; a subscriber blackhole leaves command connections alone", async () => {
      const proxy = await newProxy();
      const cmd = await clientVia(proxy);
      const sub = await clientVia(proxy);
      const channel = fresh();
      const got: string[] = [];
      await sub.subscribe(channel, (m) => got.push(m));
      assert.deepEqual(proxy.connections().map((c) => c.kind).sort(), ["command", "subscriber"]);
      proxy.blackhole({ kind: "subscriber", hold: true });
      assert.equal(await within(cmd.publish(channel, "late"), 2_000), 1, "commands still run");
      const key = fresh();
      assert.equal(await within(cmd.set(key, "v"), 2_000), "OK");
      await sleep(300);
      assert.deepEqual(got, [], "the subscriber hears nothing");
      proxy.heal();
      await waitFor(() => got.length === 1);
      assert.deepEqual(got, ["late"]);
      assert.ok(proxy.stats().commands.subscriber >= 1);
    });

    test("loseNextReply: the command runs on Redis while the client sees a connection error", async () => {
      const proxy = await newProxy();
      const client = await clientVia(proxy);
      const key = fresh();
      const fired = proxy.loseNextReply({ kind: "command" });
      await assert.rejects(within(client.set(key, "ran"), 5_000));
      assert.equal(typeof await fired, "number");
      assert.equal(await direct.get(key), "ran");
      assert.equal(await within(client.get(key), 5_000), "ran", "the client reconnects");
    });

    test("loseNextRequest: the command never reaches Redis", async () => {
      const proxy = await newProxy();
      const client = await clientVia(proxy);
      const key = fresh();
      const fired = proxy.loseNextRequest({ kind: "command" });
      await assert.rejects(within(client.set(key, "never"), 5_000));
      await fired;
      await sleep(100);
      assert.equal(await direct.get(key), null);
      assert.equal(await within(client.set(key, "now"), 5_000), "OK");
    });

    test("partitionOn: the matching message is not delivered, the subscriber is cut off until heal()", async () => {
      const proxy = await newProxy();
      const sub = await clientVia(proxy);
      const channel = fresh();
      const got: string[] = [];
      await sub.subscribe(channel, (m) => got.push(m));
      const fired = proxy.partitionOn({ kind: "subscriber", pattern: /grant:\d+/, hold: true });
      await direct.publish(channel, "hello");
      await waitFor(() => got.length === 1);
      assert.equal(await direct.publish(channel, "grant:42"), 1, "Redis sent it to the subscriber");
      const id = await within(fired, 5_000);
      assert.equal(id, proxy.connections().find((c) => c.kind === "subscriber")?.id);
      await direct.publish(channel, "after");
      await sleep(400);
      assert.deepEqual(got, ["hello"]);
      assert.deepEqual(proxy.connections()[0].blackholed, ["up", "down"]);
      proxy.heal();
      await waitFor(() => got.length === 3);
      assert.deepEqual(got, ["hello", "grant:42", "after"]);
    });

    test("reset kills open connections with an error; resetNext resets right after forwarding", async () => {
      const proxy = await newProxy();
      const client = await clientVia(proxy);
      const key = fresh();
      const blocked = client.blPop(key, 10);
      blocked.catch(() => {});
      await sleep(200);
      assert.equal(proxy.reset({ kind: "command" }), 1);
      await assert.rejects(within(blocked, 3_000));
      assert.equal(await within(client.ping(), 5_000), "PONG", "the client reconnects");
      const fired = proxy.resetNext();
      await assert.rejects(within(client.set(key, "maybe"), 5_000));
      await fired;
      assert.equal(await within(client.ping(), 5_000), "PONG");
      const raw = await rawSocket(proxy.port);
      await waitFor(() => proxy.connections().length >= 2); // the proxy has taken it, beside the client's
      const rawClosed = closed(raw);
      proxy.reset({ kind: "all" });
      assert.equal(await within(rawClosed, 5_000), true, "an RST, not a FIN");
    });

    test("pause() refuses new connections until resume(); a blackhole leaves new ones silent", async () => {
      const proxy = await newProxy();
      proxy.pause();
      const refused = connect(proxy.port, "127.0.0.1").on("error", () => {});
      assert.equal(await within(closed(refused), 5_000), true, "reset at once");
      const failing = createClient({ url: proxy.url, socket: { reconnectStrategy: false } });
      failing.on("error", () => {});
      await assert.rejects(within(failing.connect(), 5_000));
      proxy.resume();
      const client = await clientVia(proxy);
      assert.equal(await client.ping(), "PONG");
      proxy.blackhole({ hold: true });
      const raw = await rawSocket(proxy.port);
      raw.write(PING);
      const reply = once(raw, "data");
      assert.equal(await within(reply, 500), TIMEOUT);
      assert.equal(raw.destroyed, false);
      proxy.heal();
      assert.match(String((await within(reply, 5_000) as Buffer[])[0]), /PONG/);
      raw.destroy();
      assert.equal(proxy.stats().accepted, 4);
    });

    test("close() destroys every socket and the listener, and the process exits by itself", async () => {
      const proxy = await startProxy({ port: srv.port });
      const raw = await rawSocket(proxy.port);
      const rawClosed = closed(raw);
      await proxy.close();
      assert.notEqual(await within(rawClosed, 5_000), TIMEOUT);
      assert.equal(raw.destroyed, true);
      const refused = connect(proxy.port, "127.0.0.1");
      const [err] = await once(refused, "error");
      assert.equal((err as NodeJS.ErrnoException).code, "ECONNREFUSED");

      const here = dirname(fileURLToPath(import.meta.url));
      const [cmd, args] = runtimeArgs(join(here, "proxy.test.ts"));
      const r = await runProcess(cmd, args, {
        cwd: join(here, ".."),
        timeoutMs: 20_000,
        env: { ...process.env, PROXY_EXIT_CHECK: String(srv.port) },
      });
      assert.equal(r.killed, false, `still running after 20 s; stderr: ${r.stderr}`);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /closed/);
    });
  });
}
