import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { acquire, inspect, LeaseLostError, release, ReplicationError } from "../mod.ts";
import { pause, pollFor as until, resume, sleep, type StartedSentinel, startSentinel } from "../harness/topology.ts";
import { holdsOf } from "./_redis.ts";
import { nodeRedis } from "../src/adapters/node_redis.ts";

describe("primary + replica + 3 sentinels", () => {
  const setups: StartedSentinel[] = [];
  after(async () => {
    await Promise.all(setups.map((s) => s.stop()));
  });

  test("with replicas: 1 a lease survives a failover: held on the new primary, renewed there, released", async () => {
    const s = await startSentinel();
    setups.push(s);
    const client = await s.sentinelClient();
    const lease = await acquire(client, "payout", { replicas: 1, watchdogMs: 15_000 });
    const killedAt = await s.killMaster();
    const newPort = await s.waitForFailover(s.master.port);
    const failoverMs = performance.now() - killedAt;
    console.log(`failover: primary killed -> replica promoted in ${failoverMs.toFixed(0)} ms`);
    const promoted = await s.nodeClient(newPort);
    const info = await inspect(promoted, "payout");
    assert.deepEqual(holdsOf(info), [{ owner: lease.owner, holds: 1 }], "the promoted replica has the lease");
    assert.equal(info.fence, lease.fence);
    // The holder's next renewals reach the new primary: its TTL goes back up to the watchdog period.
    const before = info.remainingMs;
    await until("a renewal on the new primary", async () => {
      const now = await inspect(promoted, "payout");
      return now.remainingMs > before + 1_000 ? now : undefined;
    });
    assert.equal(lease.signal.aborted, false);
    assert.equal(await release(lease), true);
    assert.equal((await inspect(promoted, "payout")).held, false);
  });

  test("after a failover the driver tells of a resubscription once its channels are subscribed on the new primary", async () => {
    const s = await startSentinel();
    setups.push(s);
    const driver = nodeRedis(await s.sentinelClient());
    const channel = "redlease:{resubscribe}:w:test";
    const heard: string[] = [];
    const listener = (m: string) => void heard.push(m);
    await driver.subscribe!(channel, listener);
    let told!: (subscribers: number) => void;
    const resubscribed = new Promise<number>((r) => (told = r));
    // At the moment it tells, the channel has its subscriber on the new primary: nothing published from then is lost.
    driver.onResubscribed!(() =>
      void s.currentMaster().then((m) => s.command(m.port, "PUBSUB", "NUMSUB", channel)).then((r) =>
        told(Number((r as unknown[])[1]))
      )
    );
    await s.killMaster();
    const newPort = await s.waitForFailover(s.master.port);
    const subscribers = await Promise.race([resubscribed, sleep(20_000).then(() => "never told")]);
    assert.equal(subscribers, 1, "told once the channel is subscribed on the new primary");
    const promoted = await s.nodeClient(newPort);
    await promoted.publish(channel, "after");
    await until(
      "the message published on the new primary",
      () => Promise.resolve(heard.includes("after") || undefined),
      5_000,
    );
    await driver.unsubscribe!(channel, listener);
  });

  test("without replicas a failover can lose a just-granted lease; with replicas the same grant is refused", async () => {
    const s = await startSentinel();
    setups.push(s);
    const client = await s.sentinelClient();
    await release(await acquire(client, "warm-up")); // scripts loaded, connection up
    // Cut the replica off: stop it, and make the primary drop its link, so nothing written now reaches it.
    pause(s.replicas[0].pid);
    await s.command(s.master.port, "CLIENT", "KILL", "TYPE", "replica");
    const unsafe = await acquire(client, "ledger", { watchdogMs: 15_000 });
    const refused = await acquire(client, "ledger-safe", { replicas: 1, replicaTimeoutMs: 300 }).then(
      () => null,
      (e) => e,
    );
    assert.ok(refused instanceof ReplicationError, String(refused));
    assert.equal(refused.acknowledged, 0);
    const primary = await s.nodeClient(s.master.port);
    assert.equal((await inspect(primary, "ledger-safe")).held, false, "the unreplicated grant was undone");
    await s.killMaster();
    resume(s.replicas[0].pid);
    const newPort = await s.waitForFailover(s.master.port);
    const promoted = await s.nodeClient(newPort);
    assert.equal((await inspect(promoted, "ledger")).held, false, "the promoted replica never saw the lease");
    // So a second client is granted the same lease while the first still believes it holds it ...
    const other = await s.nodeClient(newPort);
    const second = await acquire(other, "ledger", { waitMs: 0 });
    assert.ok(second.fence > 0);
    // ... and the first holder learns of it at its next renewal (every 5 s here), never silently.
    const reason = await new Promise<unknown>((r) =>
      unsafe.signal.aborted
        ? r(unsafe.signal.reason)
        : unsafe.signal.addEventListener("abort", () => r(unsafe.signal.reason))
    );
    assert.ok(reason instanceof LeaseLostError);
    assert.equal(reason.why, "not-held");
    await release(second);
  });

  test("min-replicas-to-write refusal surfaces as Redis's NOREPLICAS error", async () => {
    const s = setups[setups.length - 1];
    const port = (await s.currentMaster()).port;
    const primary = await s.nodeClient(port);
    await primary.configSet("min-replicas-to-write", "3");
    await assert.rejects(acquire(primary, "guarded", { waitMs: 0 }), /NOREPLICAS/);
    await primary.configSet("min-replicas-to-write", "0");
  });
});
