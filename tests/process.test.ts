import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { type Client, type RedisServer, runProcess, runtimeArgs, runtimeName, startRedis } from "./_redis.ts";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");

function run(file: string, args: string[], timeoutMs: number) {
  const [cmd, pre] = runtimeArgs(join(here, "fixtures", file));
  return runProcess(cmd, [...pre, ...args], { cwd: root, timeoutMs });
}

describe(`processes (${runtimeName()})`, () => {
  let srv: RedisServer;
  let admin: Client;
  before(async () => {
    srv = await startRedis();
    admin = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test("a script that acquires, forgets to release and closes its clients exits by itself", async () => {
    const r = await run("exit_check.ts", [srv.url], 20_000);
    assert.equal(r.killed, false, `still running after 20 s; stderr: ${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /closed/);
    // The leases it forgot are still held (nothing released them); they expire by TTL.
    assert.equal(await admin.exists("redlease:{exit-check:fixed}"), 1);
  });

  test("mutual exclusion holds across 4 processes doing read-sleep-write under withLock()", async () => {
    const name = `mutex-${Date.now()}`;
    const results = await Promise.all(
      Array.from({ length: 4 }, () => run("counter_worker.ts", [srv.url, name, "25"], 60_000)),
    );
    for (const r of results) assert.equal(r.code, 0, r.stderr);
    assert.equal(await admin.get(`${name}:counter`), "100");
    assert.equal(await admin.get(`${name}:overlaps`), null);
  });
});
