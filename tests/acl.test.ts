// Least privilege, tested: the ACL of docs/security.md (read from its acl block, so the two cannot drift) is given
// to a user of a throwaway redis-server, and the whole contract suite runs as that user with every client this
// runtime supports; a permission missing from the doc fails here, not in a production deploy. Also: every command
// redlease's scripts call is granted, `replicas` (WAIT) works, the CLI's inspect, observe, unlock and elect work as
// the user, and the user really is restricted (a key outside the prefix, an admin command: NOPERM).
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { createClient } from "redis";
import { acquire, campaign, inspect, release, ReplicationError } from "../mod.ts";
import * as scripts from "../src/_scripts.ts";
import { watch } from "../src/watch.ts";
import { aclOfDoc, exampleRules, grantedBy } from "./_acl.ts";
import { adapters, contract } from "./_contract.ts";
import { type Client, type RedisServer, runProcess, runtimeArgs, runtimeName, sleep, startRedis } from "./_redis.ts";
import { waitUntil } from "../harness/wait.ts";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const PASSWORD = `pw-${crypto.randomUUID()}`;
/** The keys the contract's fenced writes guard: `{contract-…}:stock` and the like (see fresh() in _contract.ts). */
const RESOURCES = "{contract-*}:*";
/** What the contract's fencedEval script calls besides GET (`DECRBY`, `INCRBY`). */
const SCRIPT_COMMANDS = "+decrby";

const acl = aclOfDoc("acl", { password: PASSWORD, resources: RESOURCES, scriptCommands: SCRIPT_COMMANDS });
const user = acl[0][2];
const granted = grantedBy(acl);

/** Creates the doc's user on `admin`'s server; returns `srv`'s URL with the user's credentials. */
async function asUser(srv: RedisServer, admin: Client): Promise<string> {
  for (const words of acl) await admin.sendCommand(words);
  const url = new URL(srv.url);
  url.username = user;
  url.password = PASSWORD;
  return url.href;
}

/** The same, with the GLIDE block of docs/security.md too. */
async function asGlideUser(srv: RedisServer, admin: Client): Promise<string> {
  const url = await asUser(srv, admin);
  for (const words of aclOfDoc("acl-glide", { password: PASSWORD, resources: RESOURCES, scriptCommands: "" })) {
    await admin.sendCommand(words);
  }
  return url;
}

for (const adapter of adapters) {
  const url = adapter.name === "glide" ? asGlideUser : asUser;
  contract(adapter, { label: "as the ACL user of docs/security.md", url });
}

describe(`the ACL of docs/security.md (${runtimeName()})`, () => {
  let srv: RedisServer;
  let admin: Client;
  let url: string;
  let client: Client;
  before(async () => {
    srv = await startRedis();
    admin = await srv.client();
    url = await asUser(srv, admin);
    client = createClient({ url }) as Client;
    client.on("error", () => {});
    await client.connect();
  });
  after(async () => {
    await client.disconnect().catch(() => {});
    await srv.stop();
  });

  test("grants every command redlease's scripts call, and the client-side ones", () => {
    const called = new Set(["evalsha", "eval", "script|load", "publish", "subscribe", "unsubscribe", "wait"]);
    for (const s of Object.values(scripts)) {
      if (typeof s !== "object") continue;
      for (const m of s.source.matchAll(/redis\.p?call\('([A-Za-z]+)'/g)) called.add(m[1].toLowerCase());
      // (PUBSUB is called for its NUMSUB only, granted alone; SHARDNUMSUB on a cluster, see acl_cluster.)
      if (called.delete("pubsub")) called.add("pubsub|numsub");
    }
    const missing = [...called].filter((c) => !granted.has(c));
    assert.deepEqual(missing, [], `called but not in docs/security.md's ACL: ${missing.join(" ")}`);
  });

  test("the doc's runnable example sets up the same rules as its acl block", () => {
    const { example, block } = exampleRules();
    assert.deepEqual(example, block);
  });

  test("the user is restricted: a key outside the prefix and an admin command are refused", async () => {
    await assert.rejects(client.set("outside", "1"), /NOPERM/);
    await assert.rejects(client.get("redlease-other"), /NOPERM/);
    await assert.rejects(client.sendCommand(["CONFIG", "GET", "maxmemory"]), /NOPERM/);
    await assert.rejects(client.sendCommand(["PUBLISH", "other", "x"]), /NOPERM/);
    await assert.rejects(client.sendCommand(["FLUSHALL"]), /NOPERM/);
  });

  test("a waiter's channel is subscribed while it waits and unsubscribed after", async () => {
    const name = `acl-sub-${Date.now()}`;
    const other = createClient({ url }) as Client;
    other.on("error", () => {});
    await other.connect();
    try {
      const holder = await acquire(client, name);
      const waiting = acquire(other, name, { waitMs: 10_000 });
      const channels = async () => (await admin.sendCommand(["PUBSUB", "CHANNELS", "redlease:*"]) as string[]).length;
      await waitUntil("the waiter subscribed", 5_000, async () => (await channels()) === 1 || "not yet");
      await release(holder);
      await release(await waiting);
      await waitUntil("the waiter unsubscribed", 5_000, async () => (await channels()) === 0 || "still subscribed");
    } finally {
      await other.disconnect().catch(() => {});
    }
  });

  test("watch(): the user watches a lease it takes and releases (the watch key, its channel, the scripts' PUBLISH)", async () => {
    const name = `acl-watch-${Date.now()}`;
    const other = createClient({ url }) as Client;
    other.on("error", () => {});
    await other.connect();
    const stop = new AbortController();
    const seen: string[] = [];
    const watching = (async () => {
      for await (const c of watch(other, name, { signal: stop.signal, pollMs: 60_000 })) seen.push(c.type);
    })();
    try {
      await waitUntil("the state", 5_000, () => Promise.resolve(seen.length > 0 || "not yet"));
      const lease = await acquire(client, name, { leaseMs: 30_000 });
      await waitUntil("the grant", 5_000, () => Promise.resolve(seen.includes("granted") || seen.join()));
      await release(lease);
      await waitUntil("the release", 5_000, () => Promise.resolve(seen.includes("released") || seen.join()));
      assert.deepEqual(seen, ["state", "granted", "released"]);
    } finally {
      stop.abort();
      await watching;
      await other.disconnect().catch(() => {});
    }
  });

  test("replicas: WAIT is allowed (no replica here: ReplicationError, not NOPERM)", async () => {
    const name = `acl-wait-${Date.now()}`;
    await assert.rejects(
      acquire(client, name, { replicas: 1, replicaTimeoutMs: 50 }),
      (e) => e instanceof ReplicationError,
    );
    assert.equal((await inspect(client, name)).held, false, "the unacknowledged acquire was undone");
  });

  test("the CLI's inspect, observe, elect (with its status line) and unlock work as the user", async () => {
    const cli = (args: string[], env?: Record<string, string>) => {
      const [cmd, pre] = runtimeArgs(join(root, "cli", "redlease.ts"));
      return runProcess(cmd, [...pre, args[0], "--url", url, ...args.slice(1)], {
        cwd: root,
        timeoutMs: 30_000,
        env: { ...process.env, ...env },
      });
    };
    const name = `acl-cli-${Date.now()}`;
    const lease = await campaign(client, name, { label: "acl test" });
    const listed = await cli(["inspect", "--json"]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, new RegExp(name));
    assert.doesNotMatch(listed.stdout + listed.stderr, new RegExp(PASSWORD), "never prints the password");
    // observe: the leader script and the election channel (SUBSCRIBE on `&redlease:*`).
    const observed = await cli(["observe", name, "--count", "1", "--json"]);
    assert.equal(observed.code, 0, observed.stderr);
    assert.equal(JSON.parse(observed.stdout).leader, lease.owner);
    // A candidate that waits, showing its place in the queue (ZSCAN, ZRANK), until the leader resigns.
    const electing = cli(["elect", name, "--wait", "20s", "--", process.execPath, "-e", ""], { REDLEASE_STATUS: "1" });
    await waitUntil("the candidate is queued", 20_000, async () => (await inspect(client, name)).waiters === 1 || "no");
    await sleep(1_500); // the status line is refreshed every 0.5 s
    await release(lease);
    const elected = await electing;
    assert.equal(elected.code, 0, elected.stderr);
    assert.match(elected.stderr, /1st of 1 in queue/, "the status line read its place in the queue");
    const held = await acquire(client, name);
    const unlocked = await cli(["unlock", "--force", name]);
    assert.equal(unlocked.code, 0, unlocked.stderr);
    assert.equal(held.signal.aborted || !(await inspect(client, name)).held, true);
    await release(held);
  });
});
