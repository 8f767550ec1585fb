// watch() polling over HTTP (no pub/sub: no message names a release) with a poll period longer than the 10 s a
// release keeps the lease's fence: a hold released early and read after its fence is gone is still a release (its TTL
// had not run out), not an expiry. Node only: it waits a poll period of 10.5 s.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { acquire, release } from "../mod.ts";
import { upstash } from "../src/adapters/http.ts";
import { type LeaseChange, watch } from "../src/watch.ts";
import { type HttpBridge, startHttpBridge } from "../harness/http_bridge.ts";
import { type RedisServer, sleep, startRedis } from "./_redis.ts";

let srv: RedisServer, bridge: HttpBridge;
before(async () => {
  srv = await startRedis();
  bridge = await startHttpBridge(srv.url);
});
after(async () => {
  await bridge.stop();
  await srv.stop();
});

test("watch over HTTP, polled every 10.5 s: a release read after its kept fence is gone is reported released", async () => {
  const client = upstash({ url: bridge.url, token: bridge.token });
  const name = "watch-poll-long", stop = new AbortController();
  const lease = await acquire(client, name, { leaseMs: 60_000 });
  const seen: LeaseChange[] = [];
  const done = (async () => {
    for await (const c of watch(client, name, { signal: stop.signal, pollMs: 10_500 })) seen.push(c);
  })();
  try {
    while (seen.length === 0) await sleep(10);
    assert.ok(seen[0].info.held);
    // Released just after the first read: the next one, 10.5 s later, finds no record left (kept 10 s).
    await release(lease);
    const end = performance.now() + 15_000;
    while (seen.length < 2 && performance.now() < end) await sleep(50);
    assert.equal(seen[1]?.type, "released", JSON.stringify(seen[1]));
    assert.equal(seen[1].info.fence, 0, "the fence was still kept: the test did not test the case");
  } finally {
    stop.abort();
    await done;
  }
});
