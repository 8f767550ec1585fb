/**
 * A chaos worker: contends for one lease name and, inside each critical section, does a non-atomic
 * read–sleep–write of a counter and a fenced write on a separate "resource" redis-server. Runs unchanged on
 * Node (`node --import tsx`), Bun and Deno (`deno run -A`); started by chaos/_scenario.ts, not by hand.
 *
 *   <runtime> chaos/worker.ts '<WorkerConfig as JSON>'
 *
 * Protocol (lines on stdout / stdin):
 *   → `READY <pid> <id>`   connected and warmed up (scripts loaded); <id> is the redlease client id of the lock
 *                          client (its waiters' queue entries start with `<id>|`, their channel ends with `:w:<id>`)
 *   ← `GO <endWall>`       loop until this wall time (performance.timeOrigin + performance.now(), ms)
 *   → `PAUSEME <seq>`      a "pause" fault: inside section <seq>, now sleeping; the parent SIGSTOPs us
 *   → `PARTITIONME <seq>`  a "partition" fault: inside section <seq>, now sleeping; the parent cuts our route to the
 *                          lock server (the resource servers stay reachable)
 *   → `RESULT <json>`      the WorkerResult, then the process exits
 *
 * The worker is deliberately naive: it does not check `lease.signal` before writing, so that a holder whose
 * lease was lost (SIGSTOP, a blocked event loop, a key removed under it) performs its late writes and the
 * checker can see the fenced register reject them. It records what the signal said instead.
 *
 * With `resource` (the resource scenarios, chaos/_resource.ts) each section also sells one item at a Redis and/or
 * PostgreSQL resource through the fence helpers (or plain writes), after the counter write, with its fence.
 *
 * With `noLock` (the checker's self-test) it does not acquire at all: every section takes a fresh fence from an
 * INCR on the lock server and runs unprotected, so real overlaps and lost updates happen and must be reported.
 */
import { createClient } from "redis";
import { acquire, type AcquireOptions, campaign, type Lease, type RedisLike, release } from "../mod.ts";
// Internal, read only to report the client id (so the parent can tell this worker's queue entries and channel).
import { stateOf } from "../src/_client.ts";
import {
  combineClock,
  errorClass,
  type FaultRecord,
  type HungAcquire,
  RESOURCE,
  resourceKeys,
  type Section,
  syncClock,
  wall,
  type WorkerConfig,
  type WorkerFault,
  type WorkerResult,
} from "./_protocol.ts";
import { connectWriters } from "./_resource.ts";

const cfg = JSON.parse(process.argv[2] ?? "null") as WorkerConfig | null;
if (!cfg || !(cfg.lockUrl || cfg.lock) || !cfg.resUrl || !cfg.name) {
  console.error("usage: worker.ts '<WorkerConfig JSON>' (see chaos/_protocol.ts)");
  process.exit(2);
}
if (cfg.noLock && (cfg.faults ?? []).length > 0) {
  console.error("worker.ts: a noLock worker takes no faults");
  process.exit(2);
}

const g = globalThis as { Deno?: unknown; Bun?: unknown };
const runtime = g.Deno ? "deno" : g.Bun ? "bun" : "node";
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const errors: Record<string, number> = {};
const bump = (k: string) => void (errors[k] = (errors[k] ?? 0) + 1);

function readGo(): Promise<number> {
  return new Promise((resolve, reject) => {
    let buf = "";
    const onData = (chunk: Uint8Array | string) => {
      buf += typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk);
      const nl = buf.indexOf("\n");
      if (nl < 0) return;
      process.stdin.off("data", onData);
      process.stdin.pause();
      const m = /^GO (\S+)$/.exec(buf.slice(0, nl).trim());
      if (!m) return reject(new Error(`bad GO line: ${JSON.stringify(buf.slice(0, nl))}`));
      resolve(Number(m[1]));
    };
    process.stdin.on("data", onData);
    process.stdin.once("end", () => reject(new Error("stdin closed before GO")));
  });
}

/** The lock client: what acquire() takes, plus INCR (the self-test's fences) and a way to close it. */
type LockClient = RedisLike & { incr(key: string): Promise<number> };
const socket = { reconnectStrategy: (n: number) => Math.min(n * 20, 200), connectTimeout: 2_000 };
const onLockError = (e: unknown) => bump(`client-event:${errorClass(e)}`);

/**
 * One plain node-redis v4 client through the worker's proxy; or, for the topology scenarios (chaos/_topology.ts),
 * the driver's cluster or sentinel client, connected directly. The topology drivers are imported only when used.
 */
async function connectLock(): Promise<{ lock: LockClient; close: () => Promise<unknown> }> {
  const t = cfg!.lock;
  if (!t) {
    const c = createClient({ url: cfg!.lockUrl, socket });
    c.on("error", onLockError);
    await c.connect();
    return { lock: c as unknown as LockClient, close: () => c.quit() };
  }
  if (t.kind === "cluster") {
    const rootNodes = t.rootNodes.map((url) => ({ url }));
    if (t.driver === "redis5") {
      const c = (await import("redis5")).createCluster({ rootNodes, defaults: { socket } });
      c.on("error", onLockError);
      await c.connect();
      return { lock: c as unknown as LockClient, close: () => c.close() };
    }
    const c = (await import("redis")).createCluster({ rootNodes, defaults: { socket } });
    c.on("error", onLockError);
    await c.connect();
    return { lock: c as unknown as LockClient, close: () => c.quit() };
  }
  if (t.driver === "ioredis") {
    const { Redis } = await import("ioredis");
    const { ioredis } = await import("../src/adapters/ioredis.ts");
    const c = new Redis({ sentinels: t.sentinels, name: t.name, maxRetriesPerRequest: null, lazyConnect: true });
    c.on("error", onLockError);
    await c.connect();
    const driver = ioredis(c);
    const lock = Object.assign(driver, { incr: (key: string) => c.incr(key) });
    return { lock: lock as unknown as LockClient, close: () => c.quit() };
  }
  const { createSentinel } = await import("redis5");
  const c = createSentinel({ name: t.name, sentinelRootNodes: t.sentinels, nodeClientOptions: { socket } });
  c.on("error", onLockError);
  c.on("client-error", (e: unknown) => bump(`client-error-event:${errorClass((e as { error?: unknown }).error ?? e)}`));
  await c.connect();
  return { lock: c as unknown as LockClient, close: () => c.close() };
}

const { lock, close: closeLock } = await connectLock();
const res = createClient({ url: cfg.resUrl });
res.on("error", (e: unknown) => bump(`resource-event:${errorClass(e)}`));
await res.connect();
const keys = resourceKeys(cfg.resPrefix);
const options: AcquireOptions = {
  ...(cfg.leaseMs !== undefined ? { leaseMs: cfg.leaseMs } : { watchdogMs: cfg.watchdogMs }),
  waitMs: cfg.waitMs,
  ...(cfg.claimMs !== undefined ? { claimMs: cfg.claimMs } : {}),
  ...(cfg.owner !== undefined ? { owner: cfg.owner } : {}),
  ...(cfg.replicas !== undefined ? { replicas: cfg.replicas } : {}),
  ...(cfg.acquireOptions as Partial<AcquireOptions> | undefined),
};
// The resource scenarios: the sale each section makes through the fence helpers (chaos/_resource.ts).
const writers = cfg.resource ? await connectWriters(cfg.resource, res) : [];

// Warm-up: loads the library's scripts, so the timed phase sees only steady-state traffic.
await release(await acquire(lock, `${cfg.name}:warm:${cfg.id}`, { waitMs: 0 }));
const resKeys = (...ks: string[]) => [...ks, keys.ops];
await res.eval(RESOURCE.read, { keys: resKeys(keys.counter, keys.writes) });
const time = () => res.sendCommand(["TIME"]);
const clockBefore = await syncClock(time);
console.log(`READY ${process.pid} ${stateOf(lock).id}`);

const endWall = await readGo();
const goWall = wall();
const faults: WorkerFault[] = [...(cfg.faults ?? [])].sort((a, b) => a.atMs - b.atMs);
const sections: Section[] = [];
const failedWaits: Array<[number, number]> = [];
const hung: HungAcquire[] = [];
const hangAfterMs = cfg.waitMs + (cfg.hangMarginMs ?? 5_000);

/**
 * `p` (an acquire), watched: if it has not settled hangAfterMs after `acqStart` it is recorded as hung, and then
 * waited for until the end of the run at most (a lease it returns later is used like any other). Returns undefined
 * if it never settled by then (the loop stops then: the call cannot be cancelled from here).
 */
async function watched(p: Promise<Lease>, acqStart: number): Promise<Lease | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), hangAfterMs - (wall() - acqStart))));
  const first = await Promise.race([p, late]).finally(() => clearTimeout(timer));
  if (first !== "late") return first;
  const h: HungAcquire = { acqStart, detectedAt: wall(), outcome: "never settled" };
  hung.push(h);
  const settled = p.then(
    (l) => {
      h.settledAt = wall();
      h.outcome = "lease";
      return l;
    },
    (e) => {
      h.settledAt = wall();
      h.outcome = errorClass(e);
      throw e;
    },
  );
  settled.catch(() => {});
  let endTimer: ReturnType<typeof setTimeout> | undefined;
  const end = new Promise<undefined>((r) => (endTimer = setTimeout(() => r(undefined), Math.max(0, endWall - wall()))));
  return await Promise.race([settled, end]).finally(() => clearTimeout(endTimer));
}

/** What the lease's signal says right after a pause, block or partition, then after one turn of the event loop. */
async function observe(kind: FaultRecord["kind"], lease: Lease, t0: number): Promise<FaultRecord> {
  const tookMs = performance.now() - t0;
  const abortedAtResume = lease.signal.aborted;
  const remainingAtResume = lease.remainingMs;
  await new Promise<void>((r) => setTimeout(r, 0));
  const reason = lease.signal.reason as { why?: string } | undefined;
  return {
    kind,
    tookMs,
    abortedAtResume,
    remainingAtResume,
    abortedAfterYield: lease.signal.aborted,
    why: lease.signal.aborted ? reason?.why : undefined,
  };
}

let seq = 0;
/** Ends a read-only section's body early (it writes nothing). */
const READ_ONLY = Symbol("read-only");
/** The server-clock interval of a section: the first resource command, then each later one moves the end. */
function stamp(s: Section, op: number, us: number): void {
  if (s.opStart === undefined) {
    s.opStart = op;
    s.srvStart = us;
  }
  s.opEnd = op;
  s.srvEnd = us;
}

while (wall() < endWall) {
  let lease: Lease | undefined;
  let fence: number;
  const acqStart = wall();
  try {
    if (cfg.noLock) fence = Number(await lock.incr(`${cfg.name}:nolock-fence`));
    else {
      lease = await watched(
        cfg.kind === "names"
          ? acquire(lock, [cfg.name, `${cfg.name}:b`], options)
          : cfg.kind === "elect"
          ? campaign(lock, cfg.name, options)
          : cfg.kind === "shared" && seq % 3 !== 0
          ? acquire(lock, cfg.name, { ...options, shared: true })
          : cfg.kind === "permits" || cfg.kind === "weighted"
          ? acquire(lock, cfg.name, { ...options, permits: cfg.permits ?? 2, weight: cfg.weight })
          : acquire(lock, cfg.name, options),
        acqStart,
      );
      if (!lease) break; // hung past the end of the run (recorded in `hung`)
      fence = lease.fence;
    }
  } catch (e) {
    failedWaits.push([acqStart, wall()]);
    bump(`acquire:${errorClass(e)}`);
    await sleep(5);
    continue;
  }
  const s: Section = { w: cfg.id, seq: seq++, fence, start: wall(), end: 0, acqStart };
  if (lease && lease.kind !== "exclusive") s.readOnly = true;
  if (cfg.weight !== undefined && lease) s.weight = cfg.weight;
  // No lease (self-test): a signal that never aborts.
  const signal = lease?.signal ?? new AbortController().signal;
  const onAbort = () => {
    // First thing: when this process stopped believing it holds the lease (release() aborts it synchronously).
    s.abortAt = wall();
    if (lease) s.deadlineAt = performance.timeOrigin + lease.expiresAt;
    const r = signal.reason as { name?: string; why?: string } | undefined;
    if (r?.name === "LeaseLostError") {
      s.lostAt = wall();
      s.why = r.why;
    }
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener("abort", onAbort, { once: true });
  try {
    const [v, len, op0, us0] = await res.eval(RESOURCE.read, { keys: resKeys(keys.counter, keys.writes) }) as number[];
    stamp(s, op0, us0);
    s.read = v;
    s.readLen = len;
    // (A noLock worker has no faults: checked at startup.)
    const fault = faults.length > 0 && s.start - goWall >= faults[0].atMs ? faults.shift() : undefined;
    if (fault?.kind === "pause") {
      // t0 first: the parent may stop us as soon as the line is written, before the timer is even set.
      const t0 = performance.now();
      console.log(`PAUSEME ${s.seq}`);
      await sleep(fault.sleepMs); // one timer: the parent stops the process while it is pending
      s.fault = await observe("pause", lease!, t0);
    } else if (fault?.kind === "partition") {
      const t0 = performance.now();
      console.log(`PARTITIONME ${s.seq}`);
      await sleep(fault.sleepMs); // the parent cuts our route to the lock server meanwhile; the process runs on
      s.fault = await observe("partition", lease!, t0);
    } else if (fault?.kind === "block") {
      const t0 = performance.now();
      while (performance.now() - t0 < fault.blockMs) { /* a synchronous event-loop block */ }
      s.fault = await observe("block", lease!, t0);
    } else {
      await sleep(s.seq === 0 && cfg.firstCsSleepMs !== undefined ? cfg.firstCsSleepMs : cfg.csSleepMs);
    }
    if (s.readOnly) {
      // A reader or a permit holder: read again (the end of its interval on the server's clock), write nothing.
      const [, , op1, us1] = await res.eval(RESOURCE.read, { keys: resKeys(keys.counter, keys.writes) }) as number[];
      stamp(s, op1, us1);
      throw READ_ONLY;
    }
    const [old, idx, op1, us1] = await res.eval(RESOURCE.write, {
      keys: resKeys(keys.counter, keys.writes),
      arguments: [String(v + 1), `${cfg.id}:${s.seq}`],
    }) as number[];
    stamp(s, op1, us1);
    s.old = old;
    s.writeIdx = idx;
    s.abortedAtWrite = signal.aborted;
    // The resource scenarios: the fence as a number, not the lease, so that the resource decides (a lease whose
    // signal aborted would be refused by the helper before any command). An error is recorded, and the section
    // goes on (to the next resource, then the register).
    for (const [sink, writer] of writers) {
      try {
        (s.sales ??= {})[sink] = await writer.sell(fence, `${cfg.id}:${s.seq}`);
      } catch (e) {
        const err = (s.saleErrs ??= {})[sink] = errorClass(e);
        bump(`sale-${sink}:${err}`);
      }
    }
    const [ok, op2, us2] = await res.eval(RESOURCE.fenced, {
      keys: resKeys(keys.register, keys.accepted),
      arguments: [String(fence), `${cfg.id}:${s.seq}`],
    }) as number[];
    stamp(s, op2, us2);
    s.fenced = ok === 1 ? 1 : 0;
  } catch (e) {
    if (e !== READ_ONLY) {
      s.err = errorClass(e);
      bump(`section:${s.err}`);
    }
  }
  s.end = wall();
  try {
    if (lease) s.released = await release(lease);
  } catch (e) {
    s.releaseErr = errorClass(e);
    bump(`release:${s.releaseErr}`);
  }
  if (lease) s.relEnd = wall();
  signal.removeEventListener("abort", onAbort);
  sections.push(s);
}

const clock = combineClock(clockBefore, await syncClock(time));
const result: WorkerResult = { id: cfg.id, runtime, pid: process.pid, sections, errors, clock, failedWaits, hung };
// Written with a callback: a line of some hundred KB to a pipe is not all out when write() returns, and exit() would
// cut it (runs with thousands of sections, as shared leases and permits give, lost their RESULT's tail).
await new Promise((resolve) => process.stdout.write(`RESULT ${JSON.stringify(result)}\n`, resolve));
await Promise.race([Promise.allSettled([closeLock(), res.quit(), ...writers.map(([, w]) => w.close())]), sleep(2_000)]);
process.exit(0);
