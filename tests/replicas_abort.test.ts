// An acquire with `replicas` whose WAIT is still blocked (too few replicas, a long replicaTimeoutMs) settles when its
// signal aborts or its wait runs out, as every acquire does (docs/exclusive.md: "at once when signal aborts, whatever
// the connection does"). Redis runs a connection's commands in order, so the undo of the unconfirmed grant queues
// behind the WAIT on that connection: it is sent, and runs once the WAIT ends, but the caller does not wait for it.
// Run with node-redis and with GLIDE (whose own request timeout would otherwise cut the undo's wait short).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { GlideClient } from "@valkey/valkey-glide";
import { acquire, inspect, type RedisLike, RedisTimeoutError } from "../mod.ts";
import { glide } from "../src/adapters/glide.ts";
import { type Client, type RedisServer, startRedis } from "./_redis.ts";
import { waitUntil } from "../harness/wait.ts";
import { glideClient } from "./_glide.ts";

describe("replicas: an acquire whose WAIT blocks settles by its signal and its waitMs", () => {
  let srv: RedisServer;
  let admin: Client;
  let nodeClient: Client;
  let glideC: GlideClient;
  let n = 0;
  const fresh = () => `replicas-abort-${++n}-${Math.random().toString(36).slice(2)}`;

  before(async () => {
    srv = await startRedis(); // no replica: WAIT 1 blocks for its whole timeout
    admin = await srv.client();
    nodeClient = await srv.client();
    glideC = await glideClient(srv.url);
  });

  after(async () => {
    glideC?.close();
    await srv?.stop();
  });

  const clients = (): Array<[string, RedisLike]> => [["node-redis", nodeClient], ["GLIDE", glide(glideC)]];

  test("signal aborts at 200 ms during a 2.5 s WAIT: settles with its reason well before the WAIT ends", async () => {
    await Promise.all(
      clients().map(async ([label, client]) => {
        const name = fresh();
        const reason = new Error("stop");
        const ac = new AbortController();
        setTimeout(() => ac.abort(reason), 200);
        const t0 = performance.now();
        const e = await acquire(client, name, { replicas: 1, replicaTimeoutMs: 2_500, signal: ac.signal })
          .then(() => null, (e: unknown) => e);
        const took = performance.now() - t0;
        assert.equal(e, reason, `${label}: ${e}`);
        assert.ok(took < 1_500, `${label}: settled ${Math.round(took)} ms after the call, the abort came at 200 ms`);
        // The unconfirmed grant is undone once the WAIT ends: nothing is left behind.
        await waitUntil(
          `${label}: ${name} released`,
          10_000,
          async () => !(await inspect(admin, name)).held || "held",
          50,
        );
      }),
    );
  });

  test("waitMs 300 during a 2.5 s WAIT: settles by waitMs + grace", async () => {
    await Promise.all(
      clients().map(async ([label, client]) => {
        const name = fresh();
        const t0 = performance.now();
        const e = await acquire(client, name, { replicas: 1, replicaTimeoutMs: 2_500, waitMs: 300 })
          .then(() => null, (e: unknown) => e);
        const took = performance.now() - t0;
        assert.ok(e instanceof RedisTimeoutError, `${label}: ${e}`);
        assert.ok(took < 1_500, `${label}: settled ${Math.round(took)} ms after the call, waitMs was 300`);
        await waitUntil(
          `${label}: ${name} released`,
          10_000,
          async () => !(await inspect(admin, name)).held || "held",
          50,
        );
      }),
    );
  });
});
