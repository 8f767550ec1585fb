// The GLIDE adapter's subscriber connection (src/adapters/glide.ts, subscriberOf()): waiters subscribe on a second
// client of the client's class and settings. These tests check what happens where that second connection cannot be
// made while the client's own works.
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import type { GlideClient } from "@valkey/valkey-glide";
import { acquire, release } from "../mod.ts";
import { glide } from "../src/adapters/glide.ts";
import { type Client, type RedisServer, runProcess, runtimeArgs, startRedis } from "./_redis.ts";
import { glideClient } from "./_glide.ts";

const here = dirname(fileURLToPath(import.meta.url));

let srv: RedisServer;
let admin: Client;
const clients: GlideClient[] = [];

describe("GLIDE: the waiters' subscriber connection", () => {
  before(async () => {
    srv = await startRedis();
    admin = await srv.client();
  });
  after(async () => {
    for (const c of clients) c.close();
    await srv.stop();
  });

  test("a server that refuses a second connection (maxclients reached): the waiter still gets the lease", async () => {
    const client = await glideClient(srv.url);
    clients.push(client);
    const driver = glide(client);
    const holder = await acquire(driver, "maxclients");
    const info = String(await admin.sendCommand(["INFO", "clients"]));
    const connected = Number(/connected_clients:(\d+)/.exec(info)![1]);
    await admin.sendCommand(["CONFIG", "SET", "maxclients", String(connected)]);
    try {
      const t = setTimeout(() => void release(holder), 500);
      // (The client's own connection answers every call; before the subscriber connection, this wait succeeded.)
      const lease = await acquire(driver, "maxclients", { waitMs: 10_000 }).finally(() => clearTimeout(t));
      assert.equal(lease.name, "maxclients");
      assert.equal(await release(lease), true);
    } finally {
      await admin.sendCommand(["CONFIG", "SET", "maxclients", "10000"]);
    }
  });

  for (const how of ["before", "prototype"]) {
    test(`a client closed without the wrapped close() (${how}), then watched: the process exits by itself`, async () => {
      const [cmd, pre] = runtimeArgs(join(here, "fixtures", "glide_closed_exit.ts"));
      const r = await runProcess(cmd, [...pre, srv.url, how], { cwd: join(here, ".."), timeoutMs: 20_000 });
      assert.equal(r.killed, false, `still running after 20 s: a connection left open; stdout: ${r.stdout}`);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /done/);
    });
  }
});
