// Issue 27: after a cluster master is killed and its replica promoted, leases on its slots are granted again
// within seconds, on every cluster client (node-redis v4 and v5 createCluster, ioredis Cluster and Valkey GLIDE's
// GlideClusterClient through their adapters):
// the client is asked to rediscover the slots when commands to the dead master fail or hang, and a waiter queued
// on a name of those slots gets the lease once the old holder's lease has expired. Node only: each case starts its
// own cluster (3 masters + 3 replicas, cluster-node-timeout 1000) and kills a master.
//
//   node --import tsx --test tests/cluster_failover.node.test.ts
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Cluster as IORedisCluster } from "ioredis";
import { createCluster as createCluster4 } from "redis";
import { createCluster as createCluster5 } from "redis5";
import { acquire, inspect, type Lease, type RedisLike, release } from "../mod.ts";
import { ioredis } from "../src/adapters/ioredis.ts";
import { glide } from "../src/adapters/glide.ts";
import { keysOf } from "../src/_protocol.ts";
import { sleep, startCluster, type StartedCluster } from "../harness/topology.ts";
import { glideCluster } from "./_glide.ts";

interface Made {
  client: RedisLike;
  close(): Promise<unknown>;
}

const makers: Record<string, (c: StartedCluster) => Promise<Made>> = {
  "node-redis v4": async (c) => {
    const x = createCluster4({ rootNodes: c.rootNodes });
    x.on("error", () => {});
    await x.connect();
    return { client: x, close: () => x.disconnect() };
  },
  "node-redis v5": async (c) => {
    const x = createCluster5({ rootNodes: c.rootNodes });
    x.on("error", () => {});
    await x.connect();
    return { client: x, close: () => Promise.resolve(x.destroy()) };
  },
  "ioredis": async (c) => {
    const x = new IORedisCluster(c.rootNodes.map((n) => ({ host: "127.0.0.1", port: Number(new URL(n.url).port) })), {
      shardedSubscribers: true,
    });
    x.on("error", () => {});
    if (x.status !== "ready") await new Promise((r) => x.once("ready", r));
    return { client: ioredis(x), close: () => Promise.resolve(x.disconnect()) };
  },
  "glide": async (c) => {
    const x = await glideCluster(c.masters().map((m) => m.port));
    return { client: glide(x), close: () => Promise.resolve(x.close()) };
  },
};

let n = 0;
const fresh = () => `failover-${++n}-${Math.random().toString(36).slice(2)}`;

/** A fresh name whose keys live on the master at `port`. */
function nameOn(c: StartedCluster, port: number): string {
  for (;;) {
    const name = fresh();
    if (c.ownerOf(c.slotOf(keysOf("redlease", name).hash)).port === port) return name;
  }
}

/** The holder's watchdog: its lease lapses about 4 s after the kill, typically 1.5 s after the promotion. */
const HOLDER_MS = 4_000;

/**
 * Hold a name of master M's slots (watchdog 4 s) on one client, queue a waiter for it on another, SIGKILL M and
 * its holder's client together (the holder dies with the master), wait until M's replica reports role master,
 * and measure from that promotion to the first successful acquire of a fresh name on M's slots (a third client
 * trying every 50 ms from the kill on, waitMs 0), and to the waiter's grant.
 */
async function failover(kind: string, make: (c: StartedCluster) => Promise<Made>) {
  const c = await startCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1_000 });
  const made: Made[] = [];
  try {
    const [h, w, p] = [await make(c), await make(c), await make(c)];
    made.push(h, w, p);
    const m = c.masters()[0]!;
    const replica = c.replicas().find((r) => r.masterId === m.id)!;
    const held = nameOn(c, m.port);
    // Warm every client on M's shard (scripts cached, waiter channel known).
    await release(await acquire(p.client, nameOn(c, m.port)));
    const holder = await acquire(h.client, held, { watchdogMs: HOLDER_MS });
    // A second name of M's slots whose holder lives through the failover (its renewals go to the new master once
    // its client has rediscovered), with a waiter that subscribed on M before the kill.
    const kept = nameOn(c, m.port);
    const keeper = await acquire(p.client, kept, { watchdogMs: 10_000 });
    // (Its heartbeat, at most a claim window, made long: a grant within a second after the release below is the
    // message's, not a re-check's, four times in five even if the message were lost.)
    const waiter2 = acquire(w.client, kept, { waitMs: 30_000, claimMs: 5_000 });
    let waitedAt = NaN;
    const waiter = acquire(w.client, held, { waitMs: 30_000 }).then(
      (l: Lease) => (waitedAt = performance.now(), l),
      (e: unknown) => (waitedAt = performance.now(), e as Error),
    );
    const queued = async () => (await inspect(p.client, held)).waiters + (await inspect(p.client, kept)).waiters;
    for (let i = 0; i < 100 && await queued() !== 2; i++) await sleep(20);
    assert.equal(await queued(), 2, "the waiters are queued");

    await sleep(HOLDER_MS / 3 + 50); // just renewed: the lease now lasts up to 4 s after the kill
    const killed = performance.now();
    await c.kill(m.port);
    h.close().catch(() => {});
    void holder;
    // A free name acquired with a long wait during the outage: its call waits for the dead master (or is refused
    // with CLUSTERDOWN) and is sent again, to the new master, once the client has rediscovered the slots. (Started
    // once the clients have seen the connection close: a call written at the moment of the kill fails with the
    // connection's error, its outcome unknown, as on a single node.)
    let patientAt = NaN;
    const patient = sleep(300).then(() => acquire(w.client, nameOn(c, m.port), { waitMs: 15_000 })).then(
      (l: Lease) => (patientAt = performance.now(), l),
      (e: unknown) => (patientAt = performance.now(), e as Error),
    );

    let promoted = NaN;
    const promotion = (async () => {
      for (const end = killed + 20_000; performance.now() < end;) {
        const role = await c.command(replica.port, "ROLE").catch(() => undefined) as unknown[] | undefined;
        if (role?.[0] === "master") return promoted = performance.now();
        await sleep(20);
      }
    })();
    let firstGrant = NaN;
    let tries = 0;
    const lastError: string[] = [];
    for (const end = killed + 20_000; performance.now() < end;) {
      tries++;
      try {
        const l = await acquire(p.client, nameOn(c, m.port), { waitMs: 0 });
        firstGrant = performance.now();
        await release(l).catch(() => {});
        break;
      } catch (e) {
        lastError[0] = String((e as Error)?.message ?? e).slice(0, 120);
      }
      await sleep(50);
    }
    await promotion;
    const got = await Promise.race([waiter, sleep(Math.max(0, killed + 20_000 - performance.now()))]);
    const late = await patient;
    const patientMs = patientAt - promoted;
    console.log(
      `${kind}: an acquire started 300 ms after the kill (waitMs 15 s) was ${
        late instanceof Error ? `rejected (${late.message.slice(0, 100)})` : "granted"
      } ${patientMs.toFixed(0)} ms after the promotion`,
    );
    assert.ok(!(late instanceof Error), `${kind}: the acquire started after the kill got the lease (${String(late)})`);
    assert.ok(
      patientMs <= 2_000,
      `${kind}: the acquire started after the kill got it ${patientMs.toFixed(0)} ms after the promotion`,
    );
    await release(late);
    const promotedMs = promoted - killed;
    const firstMs = firstGrant - promoted;
    const waiterMs = waitedAt - promoted;
    const holderEnd = killed + HOLDER_MS - promoted; // the holder's lease has lapsed by then (after the promotion)
    console.log(
      `${kind}: promoted ${promotedMs.toFixed(0)} ms after the kill; first grant on its slots ` +
        `${firstMs.toFixed(0)} ms after the promotion (${tries} tries${
          Number.isNaN(firstGrant) ? `, last error: ${lastError[0]}` : ""
        }); waiter ${
          got instanceof Error ? `failed (${got.message.slice(0, 100)})` : got ? "granted" : "still waiting"
        } ${waiterMs.toFixed(0)} ms after the promotion (the holder's lease lapsed by ${holderEnd.toFixed(0)} ms)`,
    );
    assert.ok(!Number.isNaN(promoted), "the replica was promoted");
    assert.ok(firstMs <= 2_000, `${kind}: first grant ${firstMs.toFixed(0)} ms after the promotion (want <= 2000)`);
    assert.ok(got && !(got instanceof Error), `${kind}: the waiter was granted the lease (${String(got)})`);
    assert.ok(
      waiterMs <= Math.max(0, holderEnd) + 1_000,
      `${kind}: waiter granted ${waiterMs.toFixed(0)} ms after the promotion (the holder's lease lapsed by ${
        holderEnd.toFixed(0)
      })`,
    );
    await release(got as Lease);
    // The keeper's lease lived through the failover; its release hands the lease to the waiter that subscribed
    // before it, by a message on the new master (a waiter that missed it would re-check only on its heartbeat).
    assert.equal(keeper.signal.aborted, false, `${kind}: the keeper's lease was kept across the failover`);
    // Released once the waiter's subscription is on the promoted master: a client moves it there when it learns the
    // new slot map, which GLIDE did seconds late in two loaded CI runs (27 Nov), and a release before that reaches
    // nobody. (10 s at most; the bound below then tells.)
    const channel = `${keysOf("redlease", kept).hash}*`;
    for (const end = performance.now() + 10_000; performance.now() < end;) {
      const on = await c.command(replica.port, "PUBSUB", "SHARDCHANNELS", channel).catch(() => []) as unknown[];
      if (on.length > 0) break;
      await sleep(20);
    }
    const t0 = performance.now();
    assert.equal(await release(keeper), true);
    const next = await waiter2;
    const handoff = performance.now() - t0;
    console.log(
      `${kind}: after the failover, a release handed the lease to a waiter from before it in ${handoff.toFixed(0)} ms`,
    );
    // (27-123 ms on a quiet machine; 312 and 389 ms were seen on loaded CI runs.)
    assert.ok(handoff < 1_000, `${kind}: handoff took ${handoff.toFixed(0)} ms`);
    await release(next);
  } finally {
    await Promise.all(made.map((x) => x.close().catch(() => {})));
    await c.stop();
  }
}

describe("cluster failover (issue 27): leases on a failed-over master's slots are granted again within seconds", () => {
  for (const [kind, make] of Object.entries(makers)) test(kind, () => failover(kind, make));
});
