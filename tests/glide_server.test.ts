// The GLIDE adapter (src/adapters/glide.ts) and a server that restarts or stops answering.
//
// The reconnection probe after a server restart: GLIDE reconnects and
// subscribes again by itself, and the restarted server numbers clients from 1 again, so the new connection often
// gets the CLIENT ID the old one had. The probe must still tell the waiters (onResubscribed) that messages may have
// been lost while the server was down.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { GlideClient } from "@valkey/valkey-glide";
import { glide } from "../src/adapters/glide.ts";
import { type RedisServer, sleep, startRedis } from "./_redis.ts";
import { glideClient } from "./_glide.ts";
import { waitUntil } from "../harness/wait.ts";

describe("glide: the reconnection probe after a server restart", () => {
  let srv: RedisServer;
  let client: GlideClient;

  before(async () => {
    srv = await startRedis();
    client = await glideClient(srv.url);
  });

  after(async () => {
    client?.close();
    await srv?.stop();
  });

  test("the hook fires once the client is back on the restarted server, and the channel is subscribed again", async () => {
    const d = glide(client);
    let fired = 0;
    d.onResubscribed!(() => fired++);
    const got: string[] = [];
    const channel = `restart-${Math.random().toString(36).slice(2)}`;
    const listener = (m: string) => void got.push(m);
    await d.subscribe!(channel, listener);
    await sleep(1_500); // the probe has seen the first connection
    assert.equal(fired, 0, "the first connect is not a resubscription");
    await srv.restart(100);
    await waitUntil("the hook fired after the restart", 10_000, () => Promise.resolve(fired > 0 || "not yet"), 20);
    const admin = await srv.client();
    await waitUntil("a message reaches the resubscribed channel", 10_000, async () => {
      await admin.publish(channel, "m");
      return got.length > 0 || "not yet";
    }, 100);
    await d.unsubscribe!(channel, listener);
  });
});

describe("glide: a SUBSCRIBE that times out while the server is stopped", () => {
  let srv: RedisServer;
  let client: GlideClient;

  before(async () => {
    srv = await startRedis();
    client = await glideClient(srv.url, { requestTimeout: 20_000 });
  });

  after(async () => {
    client?.close();
    await srv?.stop();
  });

  // GLIDE keeps wanting a channel whose SUBSCRIBE timed out, and subscribes once the server answers again; the
  // adapter, which forgot the channel, must not leave that subscription behind for the client's lifetime.
  test("leaves no subscription behind once the server answers again", async () => {
    const d = glide(client);
    await client.customCommand(["PING"]);
    const channel = `timed-out-${Math.random().toString(36).slice(2)}`;
    srv.pause();
    try {
      await assert.rejects(d.subscribe!(channel, () => {})); // GLIDE's 5 s SUBSCRIBE timeout
    } finally {
      srv.resume();
    }
    const admin = await srv.client();
    await sleep(1_000); // GLIDE's subscription synchronizer runs meanwhile
    await waitUntil("no subscriber left on the channel", 10_000, async () => {
      const [, n] = await admin.sendCommand(["PUBSUB", "NUMSUB", channel]) as [string, number];
      return Number(n) === 0 || `${n} subscribed`;
    }, 50);
    await sleep(1_500);
    const [, n] = await admin.sendCommand(["PUBSUB", "NUMSUB", channel]) as [string, number];
    assert.equal(Number(n), 0, "not subscribed again later");
  });
});
