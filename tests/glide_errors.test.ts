// The GLIDE adapter (redlease/glide) and ACL denials: GLIDE words a NOPERM reply its own way
// (`An error was signalled by the server: - PermissionDenied: …`); it must reach the caller as Redis's `NOPERM …`
// (Redis answered, and refused: no outage), and the reconnection probe (CLIENT ID, see src/adapters/glide.ts) must
// stop for a user without `client|id` instead of asking every second while waiters wait.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { GlideClient } from "@valkey/valkey-glide";
import { acquire, RedisUnavailableError, release } from "../mod.ts";
import { glide, redisWording } from "../src/adapters/glide.ts";
import { type Client, type RedisServer, sleep, startRedis } from "./_redis.ts";
import { glideClient } from "./_glide.ts";

describe("glide: ACL denials", () => {
  let srv: RedisServer;
  let admin: Client;
  let user: GlideClient;

  before(async () => {
    srv = await startRedis();
    admin = await srv.client();
    // Everything GLIDE and redlease need on redlease's keys, but no `client|id` and no other keys.
    await admin.sendCommand(["ACL", "SETUSER", "limited", "on", ">pw", "~redlease:*", "&*", "+@all", "-client|id"]);
    user = await glideClient(srv.url.replace("redis://", "redis://limited:pw@"));
  });

  after(async () => {
    user?.close();
    await srv?.stop();
  });

  test("NOPERM keeps Redis's wording and is no outage", async () => {
    assert.equal(
      redisWording("An error was signalled by the server: - PermissionDenied: this user has no permissions"),
      "NOPERM this user has no permissions",
    );
    const e = await acquire(glide(user), "denied", { prefix: "elsewhere" }).then(() => null, (e: unknown) => e);
    assert.ok(e instanceof Error && /^NOPERM /.test(e.message), String(e));
    assert.ok(!(e instanceof RedisUnavailableError), String(e));
  });

  test("without client|id the reconnection probe stops: one denied CLIENT ID, not one a second", async () => {
    const holder = await acquire(glide(user), "probe");
    const before = await deniedClientIds(admin);
    const waiting = acquire(glide(user), "probe", { waitMs: 10_000 });
    await sleep(3_500);
    const denied = (await deniedClientIds(admin)) - before;
    await release(holder);
    await release(await waiting);
    assert.ok(denied <= 1, `${denied} CLIENT ID denied in 3.5 s`);
  });
});

/** How many CLIENT ID calls the server refused by ACL so far. */
async function deniedClientIds(admin: Client): Promise<number> {
  const info = String(await admin.sendCommand(["INFO", "commandstats"]));
  return Number(/cmdstat_client\|id:.*rejected_calls=(\d+)/.exec(info)?.[1] ?? 0);
}
