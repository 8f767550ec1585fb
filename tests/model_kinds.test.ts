// Model-based property tests (fast-check) of the two set kinds: random sequences of acquire (waitMs 0), reentrant
// acquire, release, expiry and forceUnlock by 3 owner strings on 2 clients (6 owners), checked after every step
// against a reference model and inspect():
// - shared + exclusive on one name (a read-write lock): never an exclusive holder together with another owner's hold;
//   a downgrade shares the exclusive fence; an upgrade is refused with LeaseKindError;
// - permits (n = 1…3): never more than n live holders; a re-entry takes no second permit.
// - weighted permits (n = 4, weights 1…3): a hold of weight k granted iff k more are free, never more than n taken
//   (the weights of the live and delayed holds summed, as inspect()'s permitsTaken says); a re-entry must ask its
//   hold's weight (else LeaseKindError "weight") and takes nothing more; an expired hold frees exactly its weight.
// - several names (one lease over 1–3 of 4 names): all or nothing — after every acquire, the owner holds either
//   every name it asked for (a new lease) or none it did not hold before, and no name has two holders;
// - leader election: never two leaders with live terms (see the last describe block).
// Every new hold's fence is above every fence handed out before. Expiry is forced deterministically (a set hold's
// expiry moved to the past, an exclusive key's TTL to 1 ms). A hold acquired with a lock delay expires into its
// delay instead (its expiry, or its key's TTL, moved to now + the delay: dead for its owner, its place kept from
// everyone), which ends at a later "delay ends" step (moved to the past) or forceUnlock. Reproduce a failure with the seed fast-check prints:
//   MODEL_SEED=<seed> [MODEL_RUNS=<n>] node --import tsx --test tests/model_kinds.test.ts
// and an election counterexample by itself with MODEL_EXAMPLE='<its JSON array of steps>'.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import {
  acquire,
  campaign,
  forceUnlock,
  inspect,
  type LeaderState,
  type Lease,
  LeaseKindError,
  LeaseLostError,
  LockTimeoutError,
  observe,
  proclaim,
  release,
} from "../mod.ts";
import { abortedWithin, type Client, type RedisServer, runtimeName, sleep, startRedis } from "./_redis.ts";

const RUNS = Number(process.env.MODEL_RUNS ?? 60);
const SEED = process.env.MODEL_SEED === undefined ? undefined : Number(process.env.MODEL_SEED);
const OWNERS = ["owner-0", "owner-1", "owner-2"];
// The election model waits for elections, expiries and claim windows: half the runs, to keep the suite's time.
const ELECTION_RUNS = Number(process.env.MODEL_RUNS ?? 30);

/** The lock delay of the holds acquired with one. */
const DELAY_MS = 60_000;

/** A hold in the model: one per (owner, kind). */
interface HoldModel {
  count: number;
  fence: number;
  /** The permits it takes (1 but for weighted permits). */
  weight?: number;
  /** Acquired with a lock delay (a re-entry keeps its hold's). */
  delay: boolean;
}

interface Handle {
  lease: Lease;
  owner: string; // model owner "<client>/<owner index>"
  kind: "x" | "s";
  released: boolean;
}

type Op =
  | {
    op: "acquire";
    client: number;
    owner: number;
    kind: "x" | "s" | "p";
    via: boolean;
    delay: boolean;
    /** The permits asked for (used with weighted permits only). */
    weight: number;
  }
  | { op: "release"; pick: number }
  | { op: "expire"; pick: number }
  | { op: "delayEnds" }
  | { op: "forceUnlock" };

const opArb = (kinds: Array<"x" | "s" | "p">, maxWeight = 1): fc.Arbitrary<Op> =>
  fc.oneof(
    {
      weight: 5,
      arbitrary: fc.record({
        op: fc.constant("acquire" as const),
        client: fc.nat(1),
        owner: fc.nat(2),
        kind: fc.constantFrom(...kinds),
        via: fc.boolean(),
        delay: fc.boolean(),
        weight: fc.integer({ min: 1, max: maxWeight }),
      }),
    },
    { weight: 4, arbitrary: fc.record({ op: fc.constant("release" as const), pick: fc.nat(20) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("expire" as const), pick: fc.nat(20) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("delayEnds" as const) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("forceUnlock" as const) }) },
  );

let srv: RedisServer;
let clients: Client[];
let admin: Client;

describe(`model of shared leases and permits (${runtimeName()})`, () => {
  before(async () => {
    srv = await startRedis();
    clients = [await srv.client(), await srv.client()];
    admin = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  /** Runs `ops` on a fresh name; `n` permits for "p" acquires, each of its op's weight when `weighted`. */
  async function runOps(ops: Op[], n: number, weighted = false): Promise<void> {
    const name = `model-kinds-${runtimeName()}-${Math.random().toString(36).slice(2, 10)}`;
    const key = `redlease:{${name}}`;
    let exclusive = null as (HoldModel & { owner: string }) | null;
    const set = new Map<string, HoldModel>(); // shared holds or permits, by model owner
    // Holds in their lock delay: dead for their owners, their places kept from everyone.
    let delayedX = null as (HoldModel & { owner: string }) | null;
    const delayedSet = new Map<string, HoldModel>();
    const redisOwner = new Map<string, string>();
    let maxFence = 0;
    const handles: Handle[] = [];
    const live = (h: Handle) =>
      !h.released &&
      (h.kind === "x"
        ? exclusive?.owner === h.owner && exclusive.fence === h.lease.fence
        : set.get(h.owner)?.fence === h.lease.fence);
    try {
      for (const [i, o] of ops.entries()) {
        const step: string = `step ${i} ${JSON.stringify(o)}; model ${
          JSON.stringify({ exclusive, set: [...set], delayedX, delayedSet: [...delayedSet] })
        }`;
        if (o.op === "acquire") {
          let who = `${o.client}/${o.owner}`;
          let owner: string | Lease = OWNERS[o.owner];
          const mine = handles.filter((h) => h.owner.endsWith(`/${o.owner}`));
          if (o.via && mine.length > 0) {
            const h = mine[mine.length - 1];
            owner = h.lease;
            who = h.owner;
          }
          const kind = o.kind === "p" ? "s" : o.kind; // permits live in the set, like shared holds
          const k = weighted ? o.weight : 1;
          const options = o.kind === "x"
            ? {}
            : o.kind === "s"
            ? { shared: true }
            : weighted
            ? { permits: n, weight: k }
            : { permits: n };
          const lockDelayMs = o.delay ? DELAY_MS : 0;
          const got = await acquire(clients[o.client], name, {
            ...options,
            owner,
            waitMs: 0,
            leaseMs: 60_000,
            lockDelayMs,
          }).then((l) => l, (e: unknown) => e);
          // The model's prediction.
          let expect: "grant" | "timeout" | "upgrade" | "weight", fence: number | undefined;
          // (An exclusive hold in its delay keeps the lease from every kind; an owner's own hold in its delay is not
          // its own: it waits like anyone.)
          if (delayedX || (kind !== "x" && delayedSet.has(who))) expect = "timeout";
          else if (kind === "x") {
            if (exclusive) {
              [expect, fence] = exclusive.owner === who ? ["grant", exclusive.fence] : ["timeout", undefined];
            } else if (set.size > 0) expect = set.has(who) ? "upgrade" : "timeout";
            else expect = delayedSet.size > 0 ? "timeout" : "grant";
          } else if (o.kind === "s") {
            if (exclusive && exclusive.owner !== who) expect = "timeout";
            else if (set.has(who)) [expect, fence] = ["grant", set.get(who)!.fence];
            else if (exclusive) [expect, fence] = ["grant", exclusive.fence];
            else expect = "grant";
          } else {
            const taken = [...set.values(), ...delayedSet.values()].reduce((sum, hm) => sum + (hm.weight ?? 1), 0);
            if (set.has(who)) {
              [expect, fence] = (set.get(who)!.weight ?? 1) === k
                ? ["grant", set.get(who)!.fence]
                : ["weight", undefined];
            } else expect = taken + k <= n ? "grant" : "timeout";
          }
          if (expect === "timeout") {
            assert.ok(got instanceof LockTimeoutError, `${step}: expected busy, got ${String(got)}`);
          } else if (expect === "weight") {
            assert.ok(
              got instanceof LeaseKindError && got.why === "weight",
              `${step}: expected a refusal of another weight, got ${String(got)}`,
            );
          } else if (expect === "upgrade") {
            assert.ok(
              got instanceof LeaseKindError && got.why === "upgrade",
              `${step}: expected upgrade, got ${String(got)}`,
            );
          } else {
            assert.ok(!(got instanceof Error), `${step}: expected a lease, got ${String(got)}`);
            const lease = got as Lease;
            if (fence !== undefined) assert.equal(lease.fence, fence, `${step}: re-entry keeps the fence`);
            else {
              assert.ok(lease.fence > maxFence, `${step}: a new hold's fence ${lease.fence} is above ${maxFence}`);
              maxFence = lease.fence;
            }
            redisOwner.set(who, lease.owner);
            handles.push({ lease, owner: who, kind, released: false });
            if (kind === "x") {
              const delay = exclusive?.delay ?? o.delay;
              exclusive = { owner: who, count: (exclusive?.count ?? 0) + 1, fence: lease.fence, delay };
            } else {
              const had = set.get(who);
              set.set(who, {
                count: (had?.count ?? 0) + 1,
                fence: lease.fence,
                delay: had?.delay ?? o.delay,
                weight: had?.weight ?? k,
              });
            }
          }
        } else if (o.op === "release") {
          if (handles.length === 0) continue;
          const h = handles[o.pick % handles.length];
          const wasLive = live(h);
          const r = await release(h.lease);
          assert.equal(r, wasLive, `${step}: release() of ${h.owner}'s ${h.kind} hold`);
          if (wasLive) {
            const hold = h.kind === "x" ? exclusive! : set.get(h.owner)!;
            if (--hold.count === 0) h.kind === "x" ? (exclusive = null) : set.delete(h.owner);
          }
          h.released = true;
        } else if (o.op === "expire") {
          // Expire one live hold behind its holder's back (an exclusive one only when nobody holds the set).
          const owners = [...set.keys()];
          if (owners.length > 0) {
            const who = owners[o.pick % owners.length];
            const hold = set.get(who)!;
            if (hold.delay) {
              // Its time is up now; its place stays for the delay.
              const [sec, us] = await admin.sendCommand(["TIME"]) as string[];
              const at = String(Number(sec) * 1e6 + Number(us) + DELAY_MS * 1000);
              await admin.sendCommand(["ZADD", `${key}:s`, "XX", at, redisOwner.get(who)!]);
              delayedSet.set(who, hold);
            } else await admin.sendCommand(["ZADD", `${key}:s`, "XX", "1", redisOwner.get(who)!]);
            set.delete(who);
          } else if (exclusive) {
            if (exclusive.delay) {
              await admin.pExpire(key, DELAY_MS);
              delayedX = exclusive;
            } else {
              await admin.pExpire(key, 1);
              await sleep(5);
            }
            exclusive = null;
          }
        } else if (o.op === "delayEnds") {
          for (const who of delayedSet.keys()) {
            await admin.sendCommand(["ZADD", `${key}:s`, "XX", "1", redisOwner.get(who)!]);
          }
          delayedSet.clear();
          if (delayedX) {
            await admin.pExpire(key, 1);
            await sleep(5);
            delayedX = null;
          }
        } else {
          const held: boolean = exclusive !== null || set.size > 0 || delayedX !== null || delayedSet.size > 0;
          assert.equal(await forceUnlock(admin, name), held, step);
          exclusive = null;
          set.clear();
          delayedX = null; // an operator's word ends a delay
          delayedSet.clear();
        }
        // inspect() agrees, and the safety properties hold.
        const info = await inspect(admin, name);
        const seen = info.owners.map((x) => `${x.owner}|${x.holds}|${x.kind}`).sort();
        const want: string[] = [
          ...(exclusive ? [`${redisOwner.get(exclusive.owner)}|${exclusive.count}|exclusive`] : []),
          ...[...set].map(([w, hm]) => `${redisOwner.get(w)}|${hm.count}|${n > 0 ? "permit" : "shared"}`),
        ].sort();
        assert.deepEqual(seen, want, `${step}: inspect ${JSON.stringify(info)}`);
        const seenDelayed = info.delayed.map((x) => `${x.owner}|${x.holds}|${x.kind}|${x.lockDelayMs}`).sort();
        const wantDelayed: string[] = [
          ...(delayedX ? [`${redisOwner.get(delayedX.owner)}|${delayedX.count}|exclusive|${DELAY_MS}`] : []),
          ...[...delayedSet].map(([w, hm]) =>
            `${redisOwner.get(w)}|${hm.count}|${n > 0 ? "permit" : "shared"}|${DELAY_MS}`
          ),
        ].sort();
        assert.deepEqual(seenDelayed, wantDelayed, `${step}: inspect's delayed ${JSON.stringify(info)}`);
        const exclusiveHolders = info.owners.filter((x) => x.kind === "exclusive");
        if (exclusiveHolders.length > 0) {
          assert.ok(
            info.owners.every((x) => x.owner === exclusiveHolders[0].owner),
            `${step}: an exclusive holder with others`,
          );
        }
        if (n > 0) assert.ok(info.owners.length + info.delayed.length <= n, `${step}: more than ${n} permits taken`);
        if (weighted) {
          const weights = (xs: Iterable<[string, HoldModel]>) =>
            [...xs].map(([w, hm]) => `${redisOwner.get(w)}|${hm.weight}`);
          const heldBy = (xs: ReadonlyArray<{ owner: string; weight: number }>) =>
            xs.map((x) => `${x.owner}|${x.weight}`);
          assert.deepEqual(heldBy(info.owners).sort(), weights(set).sort(), `${step}: weights ${JSON.stringify(info)}`);
          assert.deepEqual(heldBy(info.delayed).sort(), weights(delayedSet).sort(), `${step}: delayed weights`);
          const taken = [...set.values(), ...delayedSet.values()].reduce((sum, hm) => sum + (hm.weight ?? 1), 0);
          if (info.permits !== undefined) assert.equal(info.permitsTaken, taken, `${step}: permitsTaken`);
          assert.ok(taken <= n, `${step}: ${taken} of ${n} permits taken`);
        }
      }
    } finally {
      await Promise.allSettled(handles.map((h) => release(h.lease)));
      await admin.del([key, `${key}:q`, `${key}:s`, `${key}:d`]);
    }
  }

  async function check(kinds: Array<"x" | "s" | "p">, n: number, maxWeight = 1): Promise<void> {
    const property = fc.asyncProperty(
      fc.array(opArb(kinds, maxWeight), { minLength: 1, maxLength: 30 }),
      (ops) => runOps(ops, n, maxWeight > 1),
    );
    try {
      await fc.assert(property, { numRuns: RUNS, seed: SEED });
    } catch (e) {
      const cause = (e as { cause?: unknown }).cause;
      throw new Error(
        `${(e as Error).message}\n\nFailed with: ${cause instanceof Error ? cause.message : String(cause)}`,
      );
    }
  }

  test(`shared and exclusive holds by 6 owners match the model; never an exclusive holder with another (${RUNS} runs)`, async () => {
    await check(["x", "s"], 0);
  });

  test(`leases over several names by 6 owners: all or nothing, never two holders of a name (${RUNS} runs)`, async () => {
    const NAMES = 4;
    type NOp = { op: "acquire"; client: number; owner: number; names: number[] } | { op: "release"; pick: number };
    const nop: fc.Arbitrary<NOp> = fc.oneof(
      {
        weight: 3,
        arbitrary: fc.record({
          op: fc.constant("acquire" as const),
          client: fc.nat(1),
          owner: fc.nat(2),
          names: fc.uniqueArray(fc.nat(NAMES - 1), { minLength: 1, maxLength: 3 }),
        }),
      },
      { weight: 2, arbitrary: fc.record({ op: fc.constant("release" as const), pick: fc.nat(20) }) },
    );
    const property = fc.asyncProperty(fc.array(nop, { minLength: 1, maxLength: 25 }), async (ops) => {
      const base = `model-names-${runtimeName()}-${Math.random().toString(36).slice(2, 10)}`;
      const names = Array.from({ length: NAMES }, (_, i) => `${base}-${i}`);
      const holder = new Map<string, { owner: string; count: number }>(); // name -> model owner, holds
      const leases: Array<{ lease: Lease; owner: string; names: string[]; released: boolean }> = [];
      try {
        for (const [i, o] of ops.entries()) {
          const step = `step ${i} ${JSON.stringify(o)}; model ${JSON.stringify([...holder])}`;
          if (o.op === "acquire") {
            const who = `${o.client}/${o.owner}`;
            const want = o.names.map((k) => names[k]);
            const free = want.every((x) => !holder.has(x) || holder.get(x)!.owner === who);
            const got = await acquire(clients[o.client], want, { owner: OWNERS[o.owner], waitMs: 0, leaseMs: 60_000 })
              .then((l) => l, (e: unknown) => e);
            if (free) {
              assert.ok(!(got instanceof Error), `${step}: expected a lease, got ${String(got)}`);
              leases.push({ lease: got as Lease, owner: who, names: want, released: false });
              for (const x of want) holder.set(x, { owner: who, count: (holder.get(x)?.count ?? 0) + 1 });
            } else {
              assert.ok(got instanceof LockTimeoutError, `${step}: expected busy, got ${String(got)}`);
            }
          } else if (leases.length > 0) {
            const l = leases[o.pick % leases.length];
            assert.equal(await release(l.lease), !l.released, `${step}: release`);
            if (!l.released) {
              for (const x of l.names) {
                const h = holder.get(x)!;
                if (--h.count === 0) holder.delete(x);
              }
            }
            l.released = true;
          }
          for (const x of names) {
            const info = await inspect(admin, x);
            const m = holder.get(x);
            assert.equal(info.owners.length, m ? 1 : 0, `${step}: ${x} holders ${JSON.stringify(info.owners)}`);
            if (m) assert.equal(info.owners[0].holds, m.count, `${step}: ${x}`);
            assert.equal(info.waiters, 0, `${step}: nothing queued for ${x}`);
          }
        }
      } finally {
        await Promise.allSettled(leases.map((l) => release(l.lease)));
        await admin.del(names.flatMap((x) => [`redlease:{${x}}`, `redlease:{${x}}:q`]));
      }
    });
    try {
      await fc.assert(property, { numRuns: RUNS, seed: SEED });
    } catch (e) {
      const cause = (e as { cause?: unknown }).cause;
      throw new Error(
        `${(e as Error).message}\n\nFailed with: ${cause instanceof Error ? cause.message : String(cause)}`,
      );
    }
  });

  for (const n of [1, 3]) {
    test(`${n} permits by 6 owners match the model; never more than ${n} live (${RUNS} runs)`, async () => {
      await check(["p"], n);
    });
  }

  test(`4 permits taken with weights 1 to 3 by 6 owners match the model; never more than 4 taken (${RUNS} runs)`, async () => {
    await check(["p"], 4, 3);
  });
});

// Leader election (campaign / proclaim / observe / resign / forceUnlock) against a model: random sequences of
// campaigns by fresh candidates on 2 clients (each waiting first come, first served), resignations, a leader's lease
// expiring behind its back, proclamations by the leader and by former leaders, and forceUnlock. After every step the
// election settles to the model's state: the model's leader (the head of the candidates' queue once the last one
// left) is the only campaign that resolved, with a term above every earlier term, inspect() shows it alone, and an
// observer opened at the start reports it with its value. Throughout, the observed terms never go back and
// consecutive states differ; a former leader's proclamation returns false and changes nothing; every lost leadership's
// signal aborts (never silent).
describe(`model of leader election (${runtimeName()})`, () => {
  let srv: RedisServer;
  let clients: Client[];
  let admin: Client;
  before(async () => {
    srv = await startRedis();
    clients = [await srv.client(), await srv.client()];
    admin = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  type EOp =
    | { op: "campaign"; client: number; value: string | null }
    | { op: "resign" }
    | { op: "expire" }
    | { op: "proclaim"; value: string }
    | { op: "stale"; pick: number }
    | { op: "forceUnlock" };
  const eop: fc.Arbitrary<EOp> = fc.oneof(
    {
      weight: 4,
      arbitrary: fc.record({
        op: fc.constant("campaign" as const),
        client: fc.nat(1),
        value: fc.option(fc.string({ maxLength: 8 })),
      }),
    },
    { weight: 3, arbitrary: fc.record({ op: fc.constant("resign" as const) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("expire" as const) }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant("proclaim" as const), value: fc.string({ maxLength: 8 }) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("stale" as const), pick: fc.nat(20) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("forceUnlock" as const) }) },
  );

  interface Candidate {
    readonly id: number;
    readonly value: string | undefined;
    readonly elected: Promise<Lease | Error>;
    readonly stop: AbortController;
    lease?: Lease;
  }

  /** Resolves with `p`'s value, or rejects naming `what` after `ms`. */
  function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
    let t: ReturnType<typeof setTimeout>;
    const late = new Promise<never>((
      _,
      reject,
    ) => (t = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
    return Promise.race([p, late]).finally(() => clearTimeout(t));
  }

  async function runElection(ops: EOp[]): Promise<void> {
    const name = `model-elect-${runtimeName()}-${Math.random().toString(36).slice(2, 10)}`;
    const key = `redlease:{${name}}`;
    const stopObserving = new AbortController();
    const seen: LeaderState[] = [];
    const observing = (async () => {
      for await (const s of observe(admin, name, { signal: stopObserving.signal })) seen.push(s);
    })();
    const candidates: Candidate[] = [];
    const queue: Candidate[] = []; // campaigning, first come first served
    const formers: Lease[] = []; // leaderships that ended (resigned, expired, force-unlocked)
    let leader: Candidate | undefined;
    let value: string | undefined;
    let maxTerm = 0;
    const failure = (step: string, what: string) =>
      new Error(`${step}: ${what}; observed ${JSON.stringify(seen.slice(-3))}`);
    try {
      while (seen.length === 0) await sleep(2);
      for (const [i, o] of ops.entries()) {
        const step = `step ${i} ${JSON.stringify(o)}; leader ${leader?.id} queue ${queue.map((c) => c.id)}`;
        const next = () => {
          if (leader?.lease) formers.push(leader.lease);
          leader = queue.shift();
          value = leader?.value;
        };
        if (o.op === "campaign") {
          if (queue.length >= 3) continue;
          const stop = new AbortController();
          const id = candidates.length;
          const c: Candidate = {
            id,
            value: o.value ?? undefined,
            stop,
            elected: campaign(clients[o.client], name, {
              owner: `candidate-${id}`,
              value: o.value ?? undefined,
              watchdogMs: 3_000,
              claimMs: 200,
              signal: stop.signal,
            }).then((l) => l, (e: Error) => e),
          };
          candidates.push(c);
          if (leader) {
            // Its place in the queue is where its entry lands (its first call may be overtaken by a later
            // candidate's on the other client): wait until it is queued before the next step.
            const end = performance.now() + 5_000;
            while (!(await admin.zRange(`${key}:q`, 0, -1)).some((e) => e.endsWith(`:candidate-${id}`))) {
              if (performance.now() > end) throw failure(step, `candidate ${id} never queued`);
              await sleep(2);
            }
            queue.push(c);
          } else [leader, value] = [c, c.value];
        } else if (o.op === "resign") {
          if (!leader) continue;
          assert.equal(await release(leader.lease!), true, `${step}: resignation`);
          next();
        } else if (o.op === "expire") {
          if (!leader) continue;
          await admin.pExpire(key, 1);
          await sleep(5);
          next();
        } else if (o.op === "proclaim") {
          if (!leader) continue;
          assert.equal(await proclaim(leader.lease!, o.value), true, `${step}: the leader proclaims`);
          value = o.value;
        } else if (o.op === "stale") {
          if (formers.length === 0) continue;
          assert.equal(await proclaim(formers[o.pick % formers.length], "stale"), false, `${step}: a former leader`);
        } else {
          assert.equal(await forceUnlock(admin, name), leader !== undefined, `${step}: forceUnlock`);
          if (leader) next();
        }
        // Settle: the model's leader is elected (with a new term), nobody else is, and the observer agrees.
        if (leader && !leader.lease) {
          const got = await within(leader.elected, 5_000, `${step}: candidate ${leader.id} elected`).catch(
            async (e) => {
              const diag = {
                info: await inspect(admin, name),
                q: await admin.sendCommand(["ZRANGE", `${key}:q`, "0", "-1", "WITHSCORES"]),
                ch: await admin.sendCommand(["PUBSUB", "CHANNELS"]),
                cands: await Promise.all(candidates.map(async (c) => [
                  c.id,
                  await Promise.race([
                    c.elected.then((l) => l instanceof Error ? String(l) : l.owner + "@" + l.fence),
                    sleep(0).then(() => "pending"),
                  ]),
                ])),
              };
              throw new Error(`${e.message} DIAG ${JSON.stringify(diag)}`);
            },
          );
          if (got instanceof Error) throw failure(step, `candidate ${leader.id} failed: ${got}`);
          assert.ok(got.fence > maxTerm, `${step}: term ${got.fence} above ${maxTerm}`);
          maxTerm = got.fence;
          leader.lease = got;
        }
        for (const c of queue) {
          const early = await Promise.race([c.elected, sleep(0).then(() => undefined)]);
          assert.equal(early, undefined, `${step}: candidate ${c.id} elected out of turn: ${String(early)}`);
        }
        const want = leader ? `${leader.lease!.owner}|${leader.lease!.fence}|${value}` : "vacant";
        const show = (s: LeaderState | undefined) =>
          s && (s.leader === undefined ? "vacant" : `${s.leader}|${s.term}|${s.value}`);
        const end = performance.now() + 5_000;
        while (show(seen[seen.length - 1]) !== want) {
          if (performance.now() > end) throw failure(step, `the observer never showed ${want}`);
          await sleep(2);
        }
        const info = await inspect(admin, name);
        assert.deepEqual(info.owners.map((x) => x.owner), leader ? [leader.lease!.owner] : [], `${step}: inspect`);
      }
      for (const [k, s] of seen.entries()) {
        if (k === 0) continue;
        assert.ok(s.term >= seen[k - 1].term, `observed term went back: ${JSON.stringify(seen.slice(k - 1, k + 1))}`);
        assert.notDeepEqual(s, seen[k - 1], "consecutive observed states differ");
      }
      // A leadership that ended behind its holder's back is never silent: its signal aborts.
      for (const l of formers) {
        const reason = await abortedWithin(l.signal, 5_000);
        assert.ok(
          reason instanceof LeaseLostError || (reason as Error)?.name === "AbortError",
          `a former leader's signal: ${String(reason)}`,
        );
      }
    } finally {
      for (const c of candidates) c.stop.abort();
      await Promise.allSettled(candidates.map((c) => c.elected.then((l) => l instanceof Error ? false : release(l))));
      stopObserving.abort();
      await observing.catch(() => {});
      await admin.del([key, `${key}:q`, `${key}:v`]);
    }
  }

  test(`campaigns, resignations, expiry, proclamations and forceUnlock match the model; one leader, terms only grow (${ELECTION_RUNS} runs)`, async () => {
    const property = fc.asyncProperty(fc.array(eop, { minLength: 1, maxLength: 20 }), (ops) => runElection(ops));
    try {
      const example = process.env.MODEL_EXAMPLE ? [[JSON.parse(process.env.MODEL_EXAMPLE)] as [EOp[]]] : undefined;
      await fc.assert(property, { numRuns: example ? 0 : ELECTION_RUNS, seed: SEED, examples: example });
    } catch (e) {
      const cause = (e as { cause?: unknown }).cause;
      throw new Error(
        `${(e as Error).message}\n\nFailed with: ${cause instanceof Error ? cause.message : String(cause)}`,
      );
    }
  });
});
