// Model-based property test (fast-check): random interleavings of acquire (waitMs 0), reentrant acquire, extend,
// release, forceUnlock and expiry by 3 owner strings on 2 clients, checked after every step against a reference
// model of the lease (holder, hold count, grant, fence record, TTL bound), with fences that only ever increase. An
// owner string counts on its client only (the same string on the other client is another owner); a Lease passed as
// `owner` is its owner exactly, on either client.
//
// Expiry is forced deterministically with `PEXPIRE <key> 1` (leases are long, so nothing expires by itself during
// a run). A grant made with a lock delay (`lockDelayMs`) expires into its delay instead (`PEXPIRE <key> <delay>`:
// the hold is dead, and the lease granted to nobody), and its delay ends at the next expiry or forceUnlock. Reproduce a failure with the seed (and path) fast-check prints:
//   MODEL_SEED=<seed> [MODEL_PATH=<path>] [MODEL_RUNS=<n>] node --import tsx --test tests/model.test.ts
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import {
  acquire,
  type AcquireOptions,
  extend,
  forceUnlock,
  inspect,
  type Lease,
  LeaseLostError,
  LockTimeoutError,
  release,
} from "../mod.ts";
import { type Client, holdsOf, type RedisServer, runtimeName, sleep, startRedis } from "./_redis.ts";

const OWNERS = ["owner-0", "owner-1", "owner-2"];
/** Longest TTL any command asks for: an upper bound on the TTL while held. */
const MAX_TTL = 60_000;
const RUNS = Number(process.env.MODEL_RUNS ?? 100);
const SEED = process.env.MODEL_SEED === undefined ? undefined : Number(process.env.MODEL_SEED);
const PATH = process.env.MODEL_PATH;

/** The lock delay of the modes that have one. */
const DELAY_MS = 40_000;
type Mode = ({ leaseMs: number } | { watchdogMs: number } | Record<never, never>) & { lockDelayMs?: number };
const MODES: Mode[] = [
  {},
  { leaseMs: 20_000 },
  { leaseMs: MAX_TTL },
  { watchdogMs: 45_000 },
  { leaseMs: 20_000, lockDelayMs: DELAY_MS },
  { watchdogMs: 45_000, lockDelayMs: DELAY_MS },
];
const ttlOf = (mode: Mode) => "leaseMs" in mode ? mode.leaseMs : "watchdogMs" in mode ? mode.watchdogMs : 30_000;
const showMode = (mode: Mode) => JSON.stringify(mode);

/** An owner as the model knows it: an owner string on the client that used it ("<client>/<owner index>"). */
type Owner = string;
const ownerAt = (client: number, owner: number): Owner => `${client}/${owner}`;

/** What the model knows about one Lease handle. The handle itself is at the same index in Real.leases. */
interface HandleModel {
  owner: Owner;
  /** The index in OWNERS of its owner string. */
  string: number;
  client: number;
  /** The grant it belongs to. */
  grant: number;
  released: boolean;
}

interface Model {
  /** The owner holding the lease, or null. */
  holder: Owner | null;
  /** Reentrant hold count of the holder. */
  count: number;
  /** Grants so far: a new one each time the lease goes from free to held. */
  grant: number;
  /** The fence Redis keeps for the name (0 once the record is gone: expired). */
  fence: number;
  /** Highest fence ever handed out: every new grant must be above it. */
  maxFence: number;
  /** Upper bound on the remaining TTL while held. */
  ttlUpper: number;
  /** Longest watchdogMs among the grant's watchdog-mode holds (0: none). Their renewals reset the TTL to it. */
  watchdogTtl: number;
  handles: HandleModel[];
  /** The lock delay of the current grant (its first hold's; 0: none). */
  delay: number;
  /** The owner and hold count of a grant that expired into its lock delay (holder null meanwhile), or null. */
  delayed: { owner: Owner; count: number } | null;
  /** The owner string Redis knows each model owner by (learned from its first lease: `<client id>:<owner>`). */
  redisOwner: Record<Owner, string>;
}

interface Real {
  clients: Client[];
  admin: Client;
  name: string;
  leases: Lease[];
}

const keyOf = (name: string) => `redlease:{${name}}`;
const validHandle = (m: Model, h: HandleModel) => !h.released && m.holder === h.owner && h.grant === m.grant;
/** A handle from an earlier grant of the owner that holds the lease now (through a newer grant). */
const supersededHandle = (m: Model, h: HandleModel) => m.holder === h.owner && h.grant !== m.grant;

/** inspect() must agree with the model. */
async function verify(m: Model, r: Real, step: string): Promise<void> {
  const info = await inspect(r.clients[0], r.name);
  const ctx = `after ${step}: model ${JSON.stringify({ ...m, handles: m.handles.length })}, inspect ${
    JSON.stringify(info)
  }`;
  assert.equal(info.held, m.holder !== null, ctx);
  assert.deepEqual(holdsOf(info), m.holder === null ? [] : [{ owner: m.redisOwner[m.holder], holds: m.count }], ctx);
  assert.equal(info.fence, m.fence, ctx);
  assert.equal(info.waiters, 0, ctx);
  const d = m.delayed;
  assert.deepEqual(
    info.delayed.map((h) => [h.owner, h.holds, h.lockDelayMs]),
    d === null ? [] : [[m.redisOwner[d.owner], d.count, m.delay]],
    ctx,
  );
  if (d !== null) assert.ok(info.delayMs > 0 && info.delayMs <= m.delay, ctx);
  if (m.holder !== null) assert.deepEqual(info.owners.map((h) => h.lockDelayMs), [m.delay], ctx);
  if (m.holder !== null) assert.ok(info.remainingMs > 0 && info.remainingMs <= m.ttlUpper, ctx);
  else assert.equal(info.remainingMs, 0, ctx);
}

type Cmd = fc.AsyncCommand<Model, Real, false>;

/** acquire(client, name, { owner, waitMs: 0, ...mode }); `viaLease` passes one of the owner's Lease handles instead. */
class AcquireCmd implements Cmd {
  constructor(readonly owner: number, readonly client: number, readonly mode: Mode, readonly via: number | null) {}
  check(m: Readonly<Model>): boolean {
    return this.via === null || m.handles.some((h) => h.string === this.owner);
  }
  async run(m: Model, r: Real): Promise<void> {
    const step = this.toString();
    let owner: string | Lease = OWNERS[this.owner];
    let who = ownerAt(this.client, this.owner);
    if (this.via !== null) {
      const mine = m.handles.flatMap((h, i) => h.string === this.owner ? [i] : []);
      const i = mine[this.via % mine.length];
      owner = r.leases[i];
      who = m.handles[i].owner; // a Lease's owner exactly, whichever client this is
    }
    const options: AcquireOptions = { ...this.mode, owner, waitMs: 0 };
    const got = await acquire(r.clients[this.client], r.name, options).then((l) => l, (e: unknown) => e);
    if ((m.holder !== null && m.holder !== who) || m.delayed !== null) {
      // (Busy for the holder's time and then its delay, if any: when the lease is granted if nobody releases it.)
      assert.ok(got instanceof LockTimeoutError, `${step}: expected LockTimeoutError, got ${String(got)}`);
      const upper = m.delayed !== null ? m.delay : m.ttlUpper + m.delay;
      assert.ok(got.remainingMs > 0 && got.remainingMs <= upper, `${step}: remainingMs ${got.remainingMs}`);
    } else {
      assert.ok(!(got instanceof Error), `${step}: expected a lease, got ${String(got)}`);
      const lease = got as Lease;
      m.redisOwner[who] ??= lease.owner;
      assert.equal(lease.owner, m.redisOwner[who], step);
      assert.ok(lease.owner.endsWith(`:${OWNERS[this.owner]}`), `${step}: ${lease.owner} is the string, scoped`);
      assert.equal(lease.name, r.name, step);
      assert.equal(lease.signal.aborted, false, step);
      if (m.holder === null) {
        assert.ok(lease.fence > m.maxFence, `${step}: fence ${lease.fence} not above ${m.maxFence}`);
        m.holder = who;
        m.count = 1;
        m.grant++;
        m.fence = m.maxFence = lease.fence;
        m.ttlUpper = ttlOf(this.mode);
        m.watchdogTtl = "leaseMs" in this.mode ? 0 : ttlOf(this.mode);
        m.delay = this.mode.lockDelayMs ?? 0;
      } else {
        assert.equal(lease.fence, m.fence, `${step}: a reentrant hold shares the grant's fence`);
        m.count++;
        m.ttlUpper = Math.max(m.ttlUpper, ttlOf(this.mode)); // PEXPIRE … GT: only ever lengthened
        if (!("leaseMs" in this.mode)) m.watchdogTtl = Math.max(m.watchdogTtl, ttlOf(this.mode));
      }
      m.handles.push({ owner: who, string: this.owner, client: this.client, grant: m.grant, released: false });
      r.leases.push(lease);
    }
    await verify(m, r, step);
  }
  toString(): string {
    const by = this.via === null ? `"${OWNERS[this.owner]}"` : `lease #${this.via} of ${OWNERS[this.owner]}`;
    return `acquire(client ${this.client}, owner ${by}, ${showMode(this.mode)})`;
  }
}

class ExtendCmd implements Cmd {
  constructor(readonly pick: number, readonly ms: number | undefined, readonly superseded: boolean) {}
  check(m: Readonly<Model>): boolean {
    return m.handles.length > 0 && (this.superseded || !supersededHandle(m, m.handles[this.pick % m.handles.length]));
  }
  async run(m: Model, r: Real): Promise<void> {
    const i = this.pick % m.handles.length;
    const step = `${this.toString()} on handle ${i} ${JSON.stringify(m.handles[i])}`;
    const h = m.handles[i];
    const lease = r.leases[i];
    const ok = await extend(lease, this.ms);
    if (validHandle(m, h)) {
      assert.equal(ok, true, `${step}: the handle's grant is held`);
      // A watchdog renewal (the next one may be due at once) sets the TTL back to its watchdogMs.
      m.ttlUpper = Math.max(this.ms ?? MAX_TTL, m.watchdogTtl);
    } else {
      assert.equal(ok, false, `${step}: the handle's grant is gone`);
      assert.equal(lease.signal.aborted, true, step);
      if (!h.released) {
        assert.ok(lease.signal.reason instanceof LeaseLostError, `${step}: ${String(lease.signal.reason)}`);
      }
    }
    await verify(m, r, step);
  }
  toString(): string {
    return `extend(#${this.pick}, ${this.ms ?? "default"})`;
  }
}

class ReleaseCmd implements Cmd {
  constructor(readonly pick: number, readonly superseded: boolean) {}
  check(m: Readonly<Model>): boolean {
    return m.handles.length > 0 && (this.superseded || !supersededHandle(m, m.handles[this.pick % m.handles.length]));
  }
  async run(m: Model, r: Real): Promise<void> {
    const i = this.pick % m.handles.length;
    const h = m.handles[i];
    const step = `${this.toString()} on handle ${i} ${JSON.stringify(h)}`;
    const ok = await release(r.leases[i]);
    if (validHandle(m, h)) {
      assert.equal(ok, true, `${step}: the handle's grant is held`);
      if (--m.count === 0) m.holder = null; // the fence record stays behind
    } else {
      assert.equal(ok, false, `${step}: released already, or its grant is gone (expired, force-unlocked)`);
    }
    h.released = true;
    assert.equal(r.leases[i].signal.aborted, true, step);
    await verify(m, r, step);
  }
  toString(): string {
    return `release(#${this.pick})`;
  }
}

class ForceUnlockCmd implements Cmd {
  constructor(readonly client: number) {}
  check(): boolean {
    return true;
  }
  async run(m: Model, r: Real): Promise<void> {
    const ok = await forceUnlock(r.clients[this.client], r.name);
    assert.equal(ok, m.holder !== null || m.delayed !== null, this.toString());
    m.holder = null;
    m.count = 0;
    m.delayed = null; // an operator's word ends a delay
    await verify(m, r, this.toString());
  }
  toString(): string {
    return `forceUnlock(client ${this.client})`;
  }
}

/** "Time passes until the lease expires": PEXPIRE key 1, then wait until Redis has dropped it. */
class ExpireCmd implements Cmd {
  check(m: Readonly<Model>): boolean {
    return m.holder !== null || m.fence !== 0;
  }
  async run(m: Model, r: Real): Promise<void> {
    if (m.holder !== null && m.delay > 0) {
      // Into its delay: the hold's time is up (its key lives the delay longer), not released.
      await r.admin.pExpire(keyOf(r.name), m.delay);
      m.delayed = { owner: m.holder, count: m.count };
      m.holder = null;
      m.count = 0;
      await verify(m, r, `${this.toString()} (into its lock delay)`);
      return;
    }
    // A watchdog renewal already on its way (extend() to a TTL below watchdogMs schedules one at once) may land
    // within the 1 ms and legitimately renew the key: then expire it again, until it stays gone.
    for (let attempt = 0;; attempt++) {
      await r.admin.pExpire(keyOf(r.name), 1);
      for (let i = 0; i < 200 && await r.admin.exists(keyOf(r.name)) === 1; i++) await sleep(2);
      await sleep(5);
      if (await r.admin.exists(keyOf(r.name)) === 0) break;
      assert.ok(attempt < 5, "the lease key keeps coming back after PEXPIRE 1");
    }
    m.holder = null;
    m.count = 0;
    m.fence = 0;
    m.delayed = null;
    await verify(m, r, this.toString());
  }
  toString(): string {
    return "expire";
  }
}

const owner = fc.integer({ min: 0, max: 2 });
const client = fc.integer({ min: 0, max: 1 });
/**
 * `superseded`: whether extend() and release() may be called on a handle from an earlier grant of an owner that
 * holds the lease again through a newer grant (after its first grant expired or was force-unlocked).
 */
const commandsOf = (superseded: boolean) => [
  fc.tuple(owner, client, fc.constantFrom(...MODES)).map(([o, c, mode]) => new AcquireCmd(o, c, mode, null)),
  fc.tuple(owner, client, fc.constantFrom(...MODES), fc.nat(7)).map(([o, c, mode, via]) =>
    new AcquireCmd(o, c, mode, via)
  ),
  fc.tuple(fc.nat(15), fc.constantFrom(undefined, 15_000, 25_000)).map(([p, ms]) => new ExtendCmd(p, ms, superseded)),
  fc.nat(15).map((p) => new ReleaseCmd(p, superseded)),
  fc.nat(15).map((p) => new ReleaseCmd(p, superseded)),
  client.map((c) => new ForceUnlockCmd(c)),
  fc.constant(new ExpireCmd()),
];

describe(`model-based interleavings (${runtimeName()})`, () => {
  let srv: RedisServer;
  let clients: Client[];
  let admin: Client;
  let runs = 0;
  before(async () => {
    srv = await startRedis();
    clients = [await srv.client(), await srv.client()];
    admin = await srv.client();
  });
  after(async () => {
    await srv.stop();
  });

  async function check(superseded: boolean): Promise<void> {
    const property = fc.asyncProperty(
      fc.commands(commandsOf(superseded), { maxCommands: 40, size: "max" }),
      async (cmds) => {
        const name = `model-${runtimeName()}-${++runs}-${Math.random().toString(36).slice(2, 8)}`;
        const real: Real = { clients, admin, name, leases: [] };
        const model: Model = {
          holder: null,
          count: 0,
          grant: 0,
          fence: 0,
          maxFence: 0,
          ttlUpper: 0,
          watchdogTtl: 0,
          handles: [],
          delay: 0,
          delayed: null,
          redisOwner: {},
        };
        try {
          await fc.asyncModelRun(() => ({ model, real }), cmds);
        } finally {
          // Stop every hold's timer, then drop whatever is left in Redis.
          await Promise.allSettled(real.leases.map((l) => release(l)));
          await admin.del([keyOf(name), `${keyOf(name)}:q`]);
        }
      },
    );
    try {
      await fc.assert(property, { numRuns: RUNS, seed: SEED, path: PATH });
    } catch (e) {
      // fast-check reports the seed, path and shrunk counterexample; the assertion that failed is its cause.
      const cause = (e as { cause?: unknown }).cause;
      throw new Error(
        `${(e as Error).message}\n\nFailed with: ${cause instanceof Error ? cause.message : String(cause)}`,
      );
    }
  }

  test(`acquire / reentrant acquire / extend / release / forceUnlock / expiry by 3 owners on 2 clients match the model (${RUNS} runs)`, async () => {
    await check(false);
  });

  test(`…and so do release() and extend() of a handle from an owner's earlier grant once it holds a newer one (${RUNS} runs)`, async () => {
    await check(true);
  });

  test("release() of a handle whose lease expired does not release the same owner's newer lease", async () => {
    const name = `model-stale-${runtimeName()}-${Math.random().toString(36).slice(2, 8)}`;
    const old = await acquire(clients[0], name, { owner: OWNERS[0], leaseMs: 20_000 });
    await admin.pExpire(keyOf(name), 1);
    await sleep(10);
    const current = await acquire(clients[0], name, { owner: OWNERS[0], leaseMs: 20_000, waitMs: 0 });
    assert.ok(current.fence > old.fence);
    try {
      assert.equal(old.signal.aborted, true, "the old handle knows its lease is gone");
      assert.equal(await release(old), false, "release() of the expired handle");
      const info = await inspect(clients[1], name);
      assert.deepEqual(
        holdsOf(info),
        [{ owner: current.owner, holds: 1 }],
        `the newer lease is still held: ${JSON.stringify(info)}`,
      );
      assert.equal(current.signal.aborted, false);
    } finally {
      await release(current);
      await admin.del(keyOf(name));
    }
  });
});
