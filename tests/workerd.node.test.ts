// The HTTP driver in an edge runtime: a worker (tests/fixtures/workerd_worker.ts), bundled from source with esbuild,
// runs in workerd (Cloudflare's Workers runtime, from npm) through Miniflare, with no Node compatibility flags. It
// reaches a throwaway redis-server through the REST bridge (harness/http_bridge.ts) on 127.0.0.1 (Miniflare's outbound
// network allows private addresses, loopback included), whose URL and token it gets as worker bindings (`env`).
// Every request goes through the worker's fetch handler; the assertions read its replies. Node only: Miniflare drives
// workerd from Node. workerd runs from its platform package (@cloudflare/workerd-*): no install script is needed.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { build } from "esbuild";
import { Log, LogLevel, Miniflare } from "miniflare";
import { inspect } from "../mod.ts";
import { nodeRedis } from "../src/adapters/node_redis.ts";
import { type HttpBridge, startHttpBridge } from "../harness/http_bridge.ts";
import { type RedisServer, sleep, startRedis } from "./_redis.ts";

const fixture = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "workerd_worker.ts");

interface Held {
  fence: number;
  startedAt: number;
  acquiredAt: number;
  releasingAt: number;
  released: boolean;
  aborted: boolean;
}

let srv: RedisServer;
let bridge: HttpBridge;
let mf: Miniflare | undefined;

/** GET `path` from the worker; the reply's status and JSON body. */
async function call<T = Record<string, unknown>>(path: string): Promise<{ status: number; body: T }> {
  const res = await mf!.dispatchFetch(`http://worker${path}`);
  const text = await res.text();
  try {
    return { status: res.status, body: JSON.parse(text) as T };
  } catch {
    throw new Error(`worker answered ${res.status} with non-JSON: ${text.slice(0, 500)}`);
  }
}

/** The workerd processes that this process started (Linux: /proc; elsewhere none are found). */
function workerdChildren(): number[] {
  if (process.platform !== "linux") return [];
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // "<pid> (<comm>) <state> <ppid> …"
      const m = /^\d+ \((.*)\) (\S) (\d+)/.exec(readFileSync(`/proc/${entry}/stat`, "utf8"));
      if (m && m[1] === "workerd" && m[2] !== "Z" && Number(m[3]) === process.pid) out.push(Number(entry));
    } catch { /* gone meanwhile */ }
  }
  return out;
}

async function bundle(): Promise<string> {
  const out = await build({
    entryPoints: [fixture],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  return out.outputFiles[0].text;
}

describe("workerd (Miniflare): the HTTP driver in a worker", { timeout: 120_000 }, () => {
  before(async () => {
    srv = await startRedis();
    bridge = await startHttpBridge(srv.url);
    mf = new Miniflare({
      modules: true,
      script: await bundle(),
      // A date this workerd supports; no compatibility flags: no nodejs_compat, only the Workers web APIs.
      compatibilityDate: "2026-04-01",
      bindings: { REDIS_REST_URL: bridge.url, REDIS_REST_TOKEN: bridge.token },
      log: new Log(LogLevel.WARN),
      // The fallback `request.cf`: Miniflare would otherwise try to download one (this machine has no internet).
      cf: false,
    });
    await mf.ready;
  });

  after(async () => {
    const started = workerdChildren();
    await mf?.dispose();
    await bridge?.stop();
    await srv?.stop();
    // dispose() stops workerd: none of its processes may outlive the test.
    const t0 = Date.now();
    let left = started;
    while ((left = workerdChildren()).length > 0 && Date.now() - t0 < 10_000) await sleep(50);
    for (const pid of left) process.kill(pid, "SIGKILL");
    assert.deepEqual(left, [], "workerd still running after dispose()");
    // (And the check above saw workerd while it ran, so it would have seen one left behind.)
    if (mf && process.platform === "linux") assert.ok(started.length > 0, "no workerd process found while running");
  });

  const fences: number[] = [];

  test("acquire + release: a fresh driver's first lease takes 2 requests, later ones 1", async () => {
    const first = await call<Record<string, number | boolean>>("/acquire-release?name=job");
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.deepEqual(
      { ...first.body, fence: undefined },
      { fence: undefined, held: true, released: true, heldAfter: false, acquireRequests: 2, releaseRequests: 2 },
    );
    const second = await call<Record<string, number | boolean>>("/acquire-release?name=job");
    assert.equal(second.status, 200, JSON.stringify(second.body));
    assert.deepEqual(
      { ...second.body, fence: undefined },
      { fence: undefined, held: true, released: true, heldAfter: false, acquireRequests: 1, releaseRequests: 1 },
    );
    fences.push(first.body.fence as number, second.body.fence as number);
    assert.ok(fences[1] > fences[0], `fences ${fences}`);
  });

  test("contention: waitMs 0 gets LockTimeoutError; a waiter gets the lease once the holder releases", async () => {
    const admin = nodeRedis(await srv.client());
    const holding = call<Held>("/hold?name=job&ms=1500&waitMs=0");
    // Until Redis shows the first request holding the lease (it is sent first, but requests run concurrently).
    const t0 = Date.now();
    while (!(await inspect(admin, "job")).held) {
      assert.ok(Date.now() - t0 < 30_000, "the first request never held the lease");
      await sleep(20);
    }
    const waiting = call<Held>("/hold?name=job&ms=0&waitMs=30000");
    const busy = await call<{ error: string; waitedMs: number; remainingMs: number }>("/hold?name=job&waitMs=0");
    assert.equal(busy.status, 409, JSON.stringify(busy.body));
    assert.equal(busy.body.error, "LockTimeoutError");
    assert.ok(busy.body.remainingMs > 0, `remainingMs ${busy.body.remainingMs}`);

    const [a, b] = await Promise.all([holding, waiting]);
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.equal(b.status, 200, JSON.stringify(b.body));
    assert.equal(a.body.released, true);
    assert.equal(b.body.released, true);
    assert.equal(a.body.aborted, false);
    assert.equal(b.body.aborted, false);
    // The waiter got the lease after the holder let it go, and with a greater fence.
    assert.ok(b.body.acquiredAt >= a.body.releasingAt, JSON.stringify({ a: a.body, b: b.body }));
    assert.ok(b.body.fence > a.body.fence, JSON.stringify({ a: a.body, b: b.body }));
    assert.ok(a.body.fence > fences.at(-1)!, `fence ${a.body.fence} after ${fences}`);
    fences.push(a.body.fence, b.body.fence);
    assert.equal((await inspect(admin, "job")).held, false);
  });

  test("several concurrent requests take a short lease in turn: no overlap, fences in order", async () => {
    const replies = await Promise.all(
      Array.from({ length: 4 }, () => call<Held>("/hold?name=job&ms=100&waitMs=30000&leaseMs=2000")),
    );
    for (const r of replies) assert.equal(r.status, 200, JSON.stringify(r.body));
    const held = replies.map((r) => r.body).sort((x, y) => x.fence - y.fence);
    assert.equal(new Set(held.map((h) => h.fence)).size, 4);
    assert.ok(held[0].fence > fences.at(-1)!, `fence ${held[0].fence} after ${fences}`);
    for (let i = 1; i < held.length; i++) {
      // Each got the lease only after the one before it (by fence) had let it go.
      assert.ok(held[i].acquiredAt >= held[i - 1].releasingAt, JSON.stringify(held));
    }
    for (const h of held) assert.deepEqual([h.released, h.aborted], [true, false]);
    fences.push(...held.map((h) => h.fence));
  });

  test("watchdog mode within a request: the lease is renewed while held", async () => {
    // watchdogMs 1500: a renewal every 500 ms, so 3 or 4 in the 2 s it is held (2 allow for a slow machine).
    const r = await call<{ fence: number; renewals: number; aborted: boolean; released: boolean }>(
      "/watchdog?name=job&watchdogMs=1500&ms=2000",
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual([r.body.aborted, r.body.released], [false, true], JSON.stringify(r.body));
    assert.ok(r.body.renewals >= 2, JSON.stringify(r.body));
    assert.ok(r.body.fence > fences.at(-1)!, `fence ${r.body.fence} after ${fences}`);
    fences.push(r.body.fence);
  });

  test("withLock: runs under the lease, releases it, fences keep increasing", async () => {
    const r = await call<{ fence: number; heldInside: boolean; aborted: boolean; heldAfter: boolean }>(
      "/with-lock?name=job",
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual({ ...r.body, fence: undefined }, {
      fence: undefined,
      heldInside: true,
      aborted: false,
      heldAfter: false,
    });
    assert.ok(r.body.fence > fences.at(-1)!, `fence ${r.body.fence} after ${fences}`);
    // Every request went through the bridge: the worker has no other way to Redis.
    assert.ok(bridge.requests > 0);
  });
});
