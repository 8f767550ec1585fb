// Every kind of lease through a Sentinel failover (shared holds, permits, several names, a leadership with its
// observer and waiters). On a failure it prints what every server and sentinel of the setup says (s.diagnose(): roles,
// replication, clients, logs with every sentinel event) and the timeline of the clients' lease events.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import {
  acquire,
  campaign,
  configure,
  inspect,
  type LeaderState,
  type Lease,
  type LeaseEvent,
  observe,
  proclaim,
  release,
} from "../mod.ts";
import { parseInfo, pollFor as until, type StartedSentinel, startSentinel } from "../harness/topology.ts";

describe("primary + 2 replicas + 3 sentinels: every kind of lease", () => {
  const setups: StartedSentinel[] = [];
  after(async () => {
    await Promise.all(setups.map((s) => s.stop()));
  });

  test("with replicas: 1 shared holds, permits, several names and a leadership survive a failover; waiters and an observer carry on", async () => {
    // Two replicas: the promoted one gets the other as its own replica, so renewals with replicas: 1 are acknowledged
    // there too (with none left, each renewal's WAIT would fail, and the leases would end at their local deadline).
    const s = await startSentinel({ replicas: 2 });
    setups.push(s);
    const [a, b, c] = [await s.sentinelClient(), await s.sentinelClient(), await s.sentinelClient()];
    // For a failure message: every client's lease events (renewals, their failures, losses), timestamped like the
    // servers' logs.
    const timeline: string[] = [];
    const note = (line: string) => timeline.push(`${new Date().toISOString()} ${line}`);
    for (const [id, client] of [["a", a], ["b", b], ["c", c]] as const) {
      configure(client, {
        onEvent: (e: LeaseEvent) => {
          const error = "error" in e ? ` ${String((e.error as Error)?.message ?? e.error)}` : "";
          note(`client ${id}: ${e.type} ${e.name}${"owner" in e ? ` ${e.owner.slice(0, 8)}` : ""}${error}`);
        },
      });
    }
    // A 30 s watchdog: renewals fail with ReplicationError until Sentinel has the other replica follow the promoted
    // one, and each hold must outlast that (seconds, more on a loaded machine) to be renewed there.
    const o = { replicas: 1, watchdogMs: 30_000 };
    const [el, rw, pn, names] = ["leader", "report", "upstream", ["account:1", "account:2"]];
    // An observer of the election, opened through a Sentinel client before it all.
    const stop = new AbortController();
    const seen: LeaderState[] = [];
    const watching = (async () => {
      for await (const st of observe(b, el, { signal: stop.signal })) seen.push(st);
    })();
    watching.catch(() => {}); // (awaited below)
    // A failure midway must not leave the file hanging: the observer, the waiters and the holds end in `finally`.
    const cancel = new AbortController();
    const held: Lease[] = [];
    try {
      const leader = await campaign(a, el, o);
      assert.equal(await proclaim(leader, "http://a:8080"), true);
      const readers = [await acquire(a, rw, { ...o, shared: true }), await acquire(b, rw, { ...o, shared: true })];
      const permits = [await acquire(a, pn, { ...o, permits: 2 }), await acquire(b, pn, { ...o, permits: 2 })];
      const both = await acquire(a, names, o);
      held.push(leader, ...readers, ...permits, both);
      // Queued before the failover: a writer behind the readers, and a third permit.
      const writer = acquire(c, rw, { ...o, waitMs: 120_000, signal: cancel.signal });
      const third = acquire(c, pn, { ...o, permits: 2, waitMs: 120_000, signal: cancel.signal });
      writer.catch(() => {}); // (awaited below)
      third.catch(() => {});
      await until("the waiters queued", async () => {
        const [x, y] = [await inspect(a, rw), await inspect(a, pn)];
        return x.waiters === 1 && y.waiters === 1 ? true : undefined;
      });
      const proclaimed = (st: LeaderState) =>
        st.leader === leader.owner && st.term === leader.fence && st.value === "http://a:8080";
      await until("the observer to see the value", () => Promise.resolve(seen.some(proclaimed) || undefined));
      // The queue entries are not WAITed for: let both replicas catch up, so the promoted one has them as well.
      await until("the replicas to catch up", async () => {
        const r = parseInfo(String(await s.command(s.master.port, "INFO", "replication")));
        const offsets = [0, 1].map((i) => /offset=(\d+)/.exec(r[`slave${i}`] ?? "")?.[1]);
        return offsets.every((x) => x === r.master_repl_offset) || undefined;
      });

      const observed = seen.length;
      note(`killing the primary ${(await s.currentMaster()).port}`);
      const killedAt = await s.killMaster();
      const newPort = await s.waitForFailover(s.master.port);
      console.log(`failover: primary killed -> replica promoted in ${(performance.now() - killedAt).toFixed(0)} ms`);
      note(`failover to ${newPort}`);
      const promoted = await s.nodeClient(newPort);
      // What follows reads the promoted replica. Should Sentinel fail over once more (see harness/sentinel.ts:
      // its down-after only makes that unlikely), say so instead of timing out on a primary nobody uses any more.
      const sameFailover = async () => {
        const now = (await s.currentMaster()).port;
        assert.equal(now, newPort, `Sentinel failed over again (${newPort} -> ${now}): see the log tails below`);
      };

      // Every hold is on the promoted replica, as it was granted: owners, kinds, fences, queued waiters.
      const owners = async (name: string) =>
        (await inspect(promoted, name)).owners.map((h) => `${h.kind} ${h.owner}`).sort();
      const info = {
        el: await inspect(promoted, el),
        rw: await inspect(promoted, rw),
        pn: await inspect(promoted, pn),
      };
      assert.deepEqual(await owners(el), [`exclusive ${leader.owner}`]);
      assert.equal(info.el.fence, leader.fence);
      assert.deepEqual(await owners(rw), readers.map((l) => `shared ${l.owner}`).sort());
      assert.equal(info.rw.kind, "shared");
      assert.equal(info.rw.fence, Math.max(...readers.map((l) => l.fence)));
      assert.equal(info.rw.waiters, 1, "the writer is still queued");
      assert.deepEqual(await owners(pn), permits.map((l) => `permit ${l.owner}`).sort());
      assert.equal(info.pn.kind, "permits");
      assert.equal(info.pn.permits, 2);
      assert.equal(info.pn.fence, Math.max(...permits.map((l) => l.fence)));
      assert.equal(info.pn.waiters, 1, "the third permit is still queued");
      for (const [i, name] of names.entries()) {
        assert.deepEqual(await owners(name), [`exclusive ${both.owner}`]);
        assert.equal((await inspect(promoted, name)).fence, both.fences[i]);
      }
      // The leadership's proclaimed value came along too.
      for await (const st of observe(promoted, el)) {
        assert.deepEqual([st.leader, st.term, st.value], [leader.owner, leader.fence, "http://a:8080"]);
        break;
      }

      // Every hold is renewed there by its watchdog (each owner's TTL goes back up), once the promoted replica has a
      // replica of its own to acknowledge the renewals.
      await until("the other replica to follow the new primary", async () => {
        const r = parseInfo(String(await s.command(newPort, "INFO", "replication")));
        return /state=online/.test(r.slave0 ?? "") || undefined;
      }, 30_000);
      const ttl = async (name: string, owner: string) =>
        (await inspect(promoted, name)).owners.find((h) => h.owner === owner)?.remainingMs ?? -1;
      const pairs: Array<[string, string]> = [
        [el, leader.owner],
        ...readers.map((l): [string, string] => [rw, l.owner]),
        ...permits.map((l): [string, string] => [pn, l.owner]),
        ...names.map((name): [string, string] => [name, both.owner]),
      ];
      // A renewal shows as the TTL going up between two reads (it only goes down in between). Not "above the first
      // read plus a margin": a renewal (or a retried one) just before that read would leave no room above it.
      await Promise.all(pairs.map(async ([name, owner]) => {
        let last = await ttl(name, owner);
        assert.ok(last > 0, `${name} held by ${owner}`);
        await until(
          `a renewal of ${name} by ${owner} on the new primary`,
          async () => {
            const now = await ttl(name, owner);
            const renewed = last > 0 && now > last + 500;
            last = now;
            return renewed || undefined;
          },
          45_000,
        ).catch(async (e: Error) => {
          await sameFailover();
          const state = held.map((l) => `${l.name}: ${l.signal.aborted ? String(l.signal.reason) : "held"}`);
          throw new Error(`${e.message} (${state.join("; ")})`);
        });
      }));
      for (const l of held) assert.equal(l.signal.aborted, false, `${l.name}: ${String(l.signal.reason)}`);
      await sameFailover();

      // The observer's and the waiters' subscriptions moved to the new primary with their clients; the observer saw no
      // change across the failover.
      const channels = async (pattern: string) =>
        (await s.command(newPort, "PUBSUB", "CHANNELS", pattern) as string[]).length;
      const subscribers = async (channel: string) =>
        Number((await s.command(newPort, "PUBSUB", "NUMSUB", channel) as string[])[1]);
      await until(
        "the subscriptions on the new primary",
        async () =>
          (await subscribers(`redlease:{${el}}:o`)) === 1 && (await channels(`redlease:{${rw}}:w:*`)) === 1 &&
            (await channels(`redlease:{${pn}}:w:*`)) === 1 || undefined,
      ).catch(async (e: Error) => {
        await sameFailover();
        throw e;
      });
      assert.equal(seen.length, observed, JSON.stringify(seen));

      // Release on the new primary: the resignation is observed, and the waiters queued before the failover are
      // granted (fences beyond the holds they waited for).
      assert.equal(await release(leader), true);
      const resignedAt = performance.now();
      await until(
        "the observer to see the vacancy",
        () => Promise.resolve(seen.at(-1)?.leader === undefined || undefined),
      );
      const tookMs = (performance.now() - resignedAt).toFixed(0);
      console.log(`after the failover the observer saw the resignation in ${tookMs} ms`);
      assert.deepEqual(seen.at(-1), {
        leader: undefined,
        label: undefined,
        term: leader.fence,
        value: undefined,
        remainingMs: 0,
      });
      assert.equal(await release(permits[0]), true);
      const p3 = await third;
      assert.ok(p3.fence > Math.max(...permits.map((l) => l.fence)));
      assert.deepEqual(await owners(pn), [`permit ${permits[1].owner}`, `permit ${p3.owner}`].sort());
      assert.equal(await release(p3), true);
      assert.equal(await release(permits[1]), true);
      assert.equal(await release(readers[0]), true);
      assert.equal(await release(readers[1]), true);
      const w = await writer;
      assert.ok(w.fence > Math.max(...readers.map((l) => l.fence)));
      assert.deepEqual(await owners(rw), [`exclusive ${w.owner}`]);
      assert.equal(await release(w), true);
      assert.equal(await release(both), true);
      stop.abort();
      await watching;

      // Nothing is held or queued: all that is left is the last fence of each name and the election's proclaimed value,
      // which the library keeps on purpose, and both expire.
      for (const name of [el, rw, pn, ...names]) {
        const i = await inspect(promoted, name);
        assert.deepEqual([i.held, i.waiters], [false, 0], name);
        const hash = `redlease:{${name}}`;
        const keys = (await s.command(newPort, "KEYS", `${hash}*`) as string[]).sort();
        assert.deepEqual(keys, name === el ? [hash, `${hash}:v`] : [hash], name);
        assert.match(String(await s.command(newPort, "GET", hash)), /^\d+$/, `${hash} keeps only the last fence`);
        for (const key of keys) assert.ok(Number(await s.command(newPort, "PTTL", key)) > 0, `${key} has a TTL`);
      }
    } catch (e) {
      console.error(`${(e as Error).message}\n=== lease events ===\n${timeline.join("\n")}\n${await s.diagnose()}`);
      throw e;
    } finally {
      stop.abort();
      cancel.abort();
      await Promise.allSettled(held.map((l) => release(l)));
    }
  });
});
