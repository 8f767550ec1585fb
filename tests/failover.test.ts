// Elections fail over in seconds with default options: a leader SIGKILLed in another process (it cannot resign) is
// replaced by a waiting candidate within 10 s, the bound docs/election.md states (the leadership's watchdog TTL is
// 8 s by default; a lock's 30 s would take up to 30 s and fail this test). And safety under that short lease: a
// leader that can no longer renew learns it lost the leadership before another candidate is elected.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { campaign, LeaseLostError, release } from "../mod.ts";
import { type Client, type RedisServer, runtimeArgs, runtimeName, startRedis } from "./_redis.ts";

const here = dirname(fileURLToPath(import.meta.url));
/** The failover bound with default options (docs/election.md). */
const BOUND_MS = 10_000;

/** Starts the leader fixture and resolves with it once it printed its election line. */
function startLeader(url: string, name: string): Promise<{ child: ChildProcess; term: number; ttlMs: number }> {
  const [cmd, pre] = runtimeArgs(join(here, "fixtures", "leader.ts"));
  const child = spawn(cmd, [...pre, url, name], { cwd: join(here, ".."), stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => (child.kill("SIGKILL"), reject(new Error(`no election in 30 s: ${err}`))), 30_000);
    child.stderr!.on("data", (d) => (err += d));
    child.stdout!.on("data", (d) => {
      out += d;
      const m = /elected (\d+) (\d+)\n/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve({ child, term: Number(m[1]), ttlMs: Number(m[2]) });
      }
    });
    child.on("exit", (code) => (clearTimeout(t), reject(new Error(`leader exited (${code}): ${err}`))));
  });
}

describe(`election failover with default options (${runtimeName()})`, () => {
  let srv: RedisServer;
  let a: Client;
  let b: Client;
  before(async () => {
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  test(`a SIGKILLed leader is replaced within ${BOUND_MS / 1000} s`, async () => {
    const name = `failover-${Date.now()}`;
    const leader = await startLeader(srv.url, name);
    const exited = new Promise((r) => leader.child.once("exit", r));
    // A standby, queued before the kill (as every replica campaigns from its start).
    const standby = campaign(a, name);
    leader.child.kill("SIGKILL");
    const t0 = performance.now();
    await exited;
    const next = await standby;
    const ms = performance.now() - t0;
    console.log(`# failover after SIGKILL: ${Math.round(ms)} ms (leader's TTL left at election: ${leader.ttlMs} ms)`);
    assert.ok(next.fence > leader.term, "a new term");
    assert.ok(ms <= BOUND_MS, `elected ${Math.round(ms)} ms after the leader was killed`);
    await release(next);
  });

  test("a leader that cannot renew loses the leadership before another candidate is elected", async () => {
    const name = `stepdown-${Date.now()}`;
    const leaderClient = await srv.client();
    const leadership = await campaign(leaderClient, name);
    let lostAt = Infinity;
    leadership.signal.addEventListener("abort", () => (lostAt = performance.now()));
    const standby = campaign(b, name);
    // The leader's connection goes away: its renewals fail from now on, its lease runs out in Redis.
    const t0 = performance.now();
    await leaderClient.disconnect();
    const next = await standby;
    const electedAt = performance.now();
    assert.ok(leadership.signal.reason instanceof LeaseLostError, String(leadership.signal.reason));
    assert.ok(lostAt < electedAt, `the old leader's signal aborted ${Math.round(lostAt - electedAt)} ms after`);
    assert.ok(electedAt - t0 <= BOUND_MS, `elected after ${Math.round(electedAt - t0)} ms`);
    console.log(`# old leader stepped down ${Math.round(electedAt - lostAt)} ms before the next was elected`);
    await release(next);
  });
});
