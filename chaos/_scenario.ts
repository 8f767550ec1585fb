// Runs one chaos scenario: a lock redis-server and a separate resource redis-server, worker processes on the
// chosen runtimes contending for one lease name, a fault injector acting on the lock server, on a worker's
// network route or on a worker process while they run, then the analysis of what the workers and the resource
// recorded, and of what the lock server still holds once the workers have exited.
//
// Every worker reaches the lock server through its own FaultProxy (chaos/_proxy.ts), started here: its "route",
// on which the network scenarios inject their faults. The resource server is reached directly (never faulted).
//
// The lock side is decided in one place, runScenario: one plain lock server behind the proxies; or, for a spec with
// `topology` (the topo-* scenarios), a Redis Cluster or Sentinel group (chaos/_topology.ts) that the workers reach
// directly with the driver's cluster or sentinel client, and whose injector changes the topology.
import { type ChildProcess, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { type Analysis, analyze, type LeakReport } from "./_analyze.ts";
import {
  type LeaseMode,
  resourceKeys,
  wall,
  type WorkerConfig,
  type WorkerFault,
  type WorkerResult,
} from "./_protocol.ts";
import { type FaultProxy, startProxy } from "./_proxy.ts";
import { analyzeResource, readResource, type ResourceSpec, setupResource, sinksOf } from "./_resource.ts";
import { type ChaosRedis, type Client, startChaosRedis } from "./_redis.ts";
import { startTopology, type Topology, type TopologySpec } from "./_topology.ts";
import { createClient } from "redis";
import { hasPostgres, type PostgresServer, startPostgres } from "../harness/postgres.ts";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const WORKER = join(root, "chaos", "worker.ts");
const bin = (name: string) => join(root, "node_modules", ".bin", name);

export type Runtime = "node" | "bun" | "deno";

export function commandFor(runtime: Runtime, file: string, args: string[]): [string, string[]] {
  if (runtime === "bun") return [bin("bun"), [file, ...args]];
  if (runtime === "deno") return [bin("deno"), ["run", "-A", file, ...args]];
  return [process.execPath, ["--import", "tsx", file, ...args]];
}

/** One worker as an injector sees it: its id, its route to the lock server, and its redlease client id. */
export interface WorkerRoute {
  index: number;
  id: string;
  proxy: FaultProxy;
  /** The worker's lock client's redlease id: its queue entries start with `<clientId>|`. */
  clientId: string;
  /** The worker's fixed owner (ScenarioSpec.fixedOwners): the lease hash has this field while it holds. */
  owner?: string;
}

/** Everything a fault injector may act on; it runs from GO until `until` (wall ms). */
export interface FaultContext {
  lock: ChaosRedis;
  /** A connection to the lock server for the injector (not killed by CLIENT KILL: SKIPME yes). */
  admin: Client;
  startWall: number;
  until: number;
  /** Every worker's route. */
  routes: WorkerRoute[];
  /** The routes of the workers the scenario faults (ScenarioSpec.faulted), in order. */
  victims: WorkerRoute[];
  /** The lease's keys on the lock server (the default "redlease" prefix). */
  keys: { hash: string; queue: string };
  /** Record one fault event (kept in the results). */
  note(event: string, detail?: Record<string, unknown>): void;
}

export type Injector = (ctx: FaultContext) => Promise<void>;

export interface Victim {
  /** Index into `workers`. */
  worker: number;
  fault: WorkerFault;
  /**
   * For a "pause" fault: how long the parent keeps the process SIGSTOPped; for a "partition" fault: how long it
   * keeps the worker's route to the lock server cut.
   */
  stopMs?: number;
}

export interface ScenarioSpec {
  name: string;
  /** One line: what the fault is. */
  fault: string;
  workers: Runtime[];
  durationMs: number;
  watchdogMs?: number;
  leaseMs?: number;
  waitMs?: number;
  csSleepMs?: number;
  /** Extra redis-server arguments for the lock server. */
  lockArgs?: string[];
  victims?: Victim[];
  inject?: Injector;
  /** The checker's self-test: workers skip acquiring (see WorkerConfig.noLock); the analysis must fail. */
  noLock?: boolean;
  /** The acquire option `claimMs` of every worker (default: the library's, 1000 ms). */
  claimMs?: number;
  /** The kind of lease every worker takes (see WorkerConfig.kind), and the number of permits. */
  kind?: LeaseMode;
  permits?: number;
  /** Indexes of the workers that acquire with a fixed owner (`fixed-<worker id>`) instead of a random one. */
  fixedOwners?: number[];
  /** csSleepMs of the `faulted` workers, if other than csSleepMs. */
  faultedCsSleepMs?: number;
  /**
   * Indexes of the workers whose network route the injector faults (FaultContext.victims). Every other worker is
   * "non-faulted": the idle check counts only the time such a worker was waiting.
   */
  faulted?: number[];
  /**
   * The fault makes the lock server lose lease data (restarted empty, keys evicted): a holder whose lease was
   * deleted under it cannot know before its next renewal, so its being unaware at the re-grant is expected.
   */
  losesLeaseData?: boolean;
  /**
   * The longest a free lease may sit idle while a non-faulted worker waits, ms. Default: 2 × claimMs + 500 (see
   * `idleBound` in chaos/_analyze.ts).
   */
  idleBoundMs?: number;
  /**
   * The lock side is a Redis Cluster or a Sentinel group instead of one plain server (chaos/_topology.ts): no
   * proxies, no `inject` / `victims` / `lockArgs`; the topology's own injector changes it.
   */
  topology?: TopologySpec;
  /** The acquire option `replicas` of every worker. */
  replicas?: number;
  /** WorkerConfig.hangMarginMs: an acquire not settled within waitMs + this is reported as hung (default 5000). */
  hangMarginMs?: number;
  /**
   * One worker whose first critical section takes `csSleepMs` (e.g. longer than a failover; its later ones are
   * like everyone's): it still holds when the topology changes and makes its late writes after the lease was
   * granted again, which fencing must reject.
   */
  longHolder?: { worker: number; csSleepMs: number };
  /**
   * The resource scenarios (chaos/_resource.ts): every section also sells one item at a Redis resource (on the
   * resource server) or a PostgreSQL one (a throwaway server started for the run), through the fence helpers or,
   * with `check: false`, plain writes; the resource's own log decides how many stale writes it accepted.
   */
  resource?: ResourceSpec;
  /** More acquire options for every worker (WorkerConfig.acquireOptions: plain JSON values). */
  acquireOptions?: Record<string, unknown>;
}

export interface FaultEvent {
  at: number;
  event: string;
  [k: string]: unknown;
}

export interface ScenarioRun {
  spec: ScenarioSpec;
  workers: WorkerResult[];
  /** Workers that failed (no RESULT): id and their stderr. */
  failed: Array<{ id: string; code: number | null; stderr: string }>;
  faults: FaultEvent[];
  startWall: number;
  endWall: number;
  counter: number;
  writes: string[];
  accepted: string[];
  /** The lock server's INFO commandstats calls (`cmdstat_<name>`) and errorstats counts (`errorstat_<code>`). */
  lockStats: Record<string, number>;
  /** What the lock server still held once every worker had exited. */
  leaks: LeakReport | undefined;
  analysis: Analysis;
}

interface Child {
  id: string;
  proc: ChildProcess;
  ready: Promise<number>;
  clientId: string;
  exited: Promise<void>;
  result: Promise<WorkerResult | undefined>;
  stderr: () => string;
  onPause?: (seq: number) => void;
  onPartition?: (seq: number) => void;
}

function startWorker(runtime: Runtime, cfg: WorkerConfig): Child {
  const [cmd, args] = commandFor(runtime, WORKER, [JSON.stringify(cfg)]);
  const proc = spawn(cmd, args, { cwd: root, stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1" } });
  let err = "";
  proc.stderr!.on("data", (d) => (err = (err + d).slice(-20_000)));
  const child: Child = { id: cfg.id, proc, stderr: () => err } as Child;
  let onReady: (pid: number) => void;
  let onResult: (r: WorkerResult | undefined) => void;
  child.ready = new Promise((resolve) => (onReady = resolve));
  child.result = new Promise((resolve) => (onResult = resolve));
  child.exited = new Promise((resolve) => proc.once("exit", () => resolve()));
  const lines = createInterface({ input: proc.stdout! });
  lines.on("line", (line) => {
    if (line.startsWith("READY ")) {
      const [pid, clientId] = line.slice(6).split(" ");
      child.clientId = clientId ?? "";
      onReady(Number(pid));
    } else if (line.startsWith("PAUSEME ")) child.onPause?.(Number(line.slice(8)));
    else if (line.startsWith("PARTITIONME ")) child.onPartition?.(Number(line.slice(12)));
    else if (line.startsWith("RESULT ")) {
      try {
        onResult(JSON.parse(line.slice(7)) as WorkerResult);
      } catch {
        onResult(undefined); // a cut line: the worker is reported as having produced no result
      }
    }
  });
  proc.on("exit", () => {
    onReady(-1);
    // Let readline deliver the last lines first.
    setTimeout(() => onResult(undefined), 50);
  });
  return child;
}

/** SIGKILL a worker we started, if it is still running (SIGCONT first, in case it is stopped). */
function killHard(c: Child): void {
  if (c.proc.exitCode !== null || c.proc.signalCode !== null) return;
  c.proc.kill("SIGCONT");
  c.proc.kill("SIGKILL");
}

let runs = 0;

/** The fixed owner string of a worker that acquires with one (ScenarioSpec.fixedOwners). */
export const fixedOwner = (workerId: string) => `fixed-${workerId}`;

export async function runScenario(spec: ScenarioSpec, log: (line: string) => void = () => {}): Promise<ScenarioRun> {
  if (spec.topology && (spec.inject || spec.victims?.length || spec.lockArgs || spec.faulted?.length)) {
    throw new Error(`${spec.name}: a topology scenario takes no inject, victims, lockArgs or faulted routes`);
  }
  // The lock side: one plain server behind per-worker proxies, or a topology (cluster / sentinel).
  let lock: ChaosRedis | undefined;
  let topo: Topology | undefined;
  const children: Child[] = [];
  const pids: number[] = [];
  const proxies: FaultProxy[] = [];
  let resource: ChaosRedis | undefined;
  let pgServer: PostgresServer | undefined;
  if (!canRun(spec)) throw new Error(`${spec.name}: ${PG_MISSING}`);
  // A PostgreSQL resource starts while the redis-servers do (stopped in `finally` whatever happens meanwhile).
  const pgStarting = spec.resource?.targets.includes("pg") ? startPostgres({ label: "chaos-pg" }) : undefined;
  pgStarting?.catch(() => {}); // (its error is thrown where it is awaited)
  try {
    if (spec.topology) {
      topo = await startTopology(spec.topology);
      log(`  [${spec.name}] lock side: ${topo.describe}`);
    } else lock = await startChaosRedis(spec.lockArgs ?? []);
    const resourceServer = resource = await startChaosRedis();
    const admin = lock ? await lock.client() : undefined;
    const res = await resourceServer.client();
    const name = `chaos-${spec.name}-${process.pid}-${++runs}`;
    const resPrefix = `res:${name}`;
    // The sales' resources: a stock on the resource server, and/or a throwaway PostgreSQL server with its schema.
    if (spec.resource?.targets.includes("pg")) {
      pgServer = await pgStarting!;
      log(`  [${spec.name}] resource: PostgreSQL ${pgServer.version} on port ${pgServer.port}`);
    }
    for (const target of spec.resource?.targets ?? []) await setupResource(target, res, resPrefix, pgServer?.url);
    const counts: Partial<Record<Runtime, number>> = {};
    // One route (proxy) per worker, in front of the lock server's port (which a restart keeps).
    if (lock) { for (const _ of spec.workers) proxies.push(await startProxy({ port: lock.port })); }
    spec.workers.forEach((rt, i) => {
      const n = counts[rt] = (counts[rt] ?? -1) + 1;
      const id = `${rt}-${n}`;
      const cfg: WorkerConfig = {
        id,
        lockUrl: lock ? proxies[i].url : "",
        lock: topo?.target,
        replicas: spec.replicas,
        hangMarginMs: spec.hangMarginMs,
        resUrl: resourceServer.url,
        name,
        resPrefix,
        watchdogMs: spec.leaseMs === undefined ? spec.watchdogMs ?? 300 : undefined,
        leaseMs: spec.leaseMs,
        waitMs: spec.waitMs ?? 5_000,
        csSleepMs: (spec.faulted?.includes(i) ? spec.faultedCsSleepMs : undefined) ?? spec.csSleepMs ?? 3,
        firstCsSleepMs: spec.longHolder?.worker === i ? spec.longHolder.csSleepMs : undefined,
        faults: (spec.victims ?? []).filter((v) => v.worker === i).map((v) => v.fault),
        noLock: spec.noLock || undefined,
        claimMs: spec.claimMs,
        owner: spec.fixedOwners?.includes(i) ? fixedOwner(id) : undefined,
        kind: spec.kind,
        permits: spec.permits,
        // Weighted permits: every other worker takes 2 at once, the others 1.
        weight: spec.kind === "weighted" ? 1 + (i % 2) : undefined,
        resource: spec.resource && { ...spec.resource, prefix: resPrefix, pgUrl: pgServer?.url },
        acquireOptions: spec.acquireOptions,
      };
      children.push(startWorker(rt, cfg));
    });
    const readyBy = setTimeout(() => children.forEach((c) => killHard(c)), 60_000);
    pids.push(...await Promise.all(children.map((c) => c.ready)));
    clearTimeout(readyBy);
    const notReady = children.filter((_, i) => pids[i] <= 0);
    if (notReady.length > 0) {
      throw new Error(
        `workers did not start: ${notReady.map((c) => `${c.id}: ${c.stderr().slice(-2000)}`).join("\n")}`,
      );
    }

    const faults: FaultEvent[] = [];
    const note = (event: string, detail: Record<string, unknown> = {}) => {
      faults.push({ at: wall(), event, ...detail });
      log(`  [${spec.name}] ${event} ${Object.keys(detail).length ? JSON.stringify(detail) : ""}`);
    };
    // SIGSTOP / SIGCONT for pause victims, driven by their PAUSEME line.
    const stops: Promise<void>[] = [];
    for (const v of spec.victims ?? []) {
      if (v.fault.kind !== "pause") continue;
      const c = children[v.worker];
      if (pids[v.worker] !== c.proc.pid) {
        throw new Error(`${c.id} reports pid ${pids[v.worker]}, spawned ${c.proc.pid}`);
      }
      c.onPause = (seq) => {
        c.proc.kill("SIGSTOP");
        note("SIGSTOP", { worker: c.id, seq, stopMs: v.stopMs });
        stops.push(
          new Promise<void>((r) =>
            setTimeout(() => {
              if (c.proc.exitCode === null && c.proc.signalCode === null) {
                c.proc.kill("SIGCONT");
                note("SIGCONT", { worker: c.id, seq });
              }
              r();
            }, v.stopMs ?? 1_000)
          ),
        );
      };
    }

    // Partition victims, driven by their PARTITIONME line: their route to the lock server cut both ways (commands
    // and subscriber, no RST) for stopMs, then healed. The resource servers are reached directly: not cut.
    for (const v of spec.victims ?? []) {
      if (v.fault.kind !== "partition") continue;
      if (!lock) throw new Error(`${spec.name}: a partition fault needs the proxied lock server`);
      const c = children[v.worker];
      const route = proxies[v.worker];
      c.onPartition = (seq) => {
        route.blackhole({ kind: "all", direction: "both" });
        note("partitioned from the lock server", { worker: c.id, seq, stopMs: v.stopMs });
        stops.push(
          new Promise<void>((r) =>
            setTimeout(() => {
              route.heal();
              note("healed", { worker: c.id, seq });
              r();
            }, v.stopMs ?? 1_000)
          ),
        );
      };
    }

    const routes: WorkerRoute[] = !lock ? [] : children.map((c, index) => ({
      index,
      id: c.id,
      proxy: proxies[index],
      clientId: c.clientId,
      owner: spec.fixedOwners?.includes(index) ? fixedOwner(c.id) : undefined,
    }));
    const hash = `redlease:{${name}}`;

    const startWall = wall() + 50;
    const endWall = startWall + spec.durationMs;
    const ctx: FaultContext | undefined = lock && admin && {
      lock,
      admin,
      startWall,
      until: endWall,
      routes,
      victims: (spec.faulted ?? []).map((i) => routes[i]),
      keys: { hash, queue: `${hash}:q` },
      note,
    };
    for (const c of children) c.proc.stdin!.write(`GO ${endWall}\n`);
    // Every route is cleared when the injector is done, and at the end of the run whatever it did: the workers
    // finish their last acquire/release calls (and exit) on healthy routes.
    const clearRoutes = () => proxies.forEach((p) => p.clear());
    const clearAtEnd = setTimeout(clearRoutes, endWall - wall() + 100);
    const injector = topo ? topo.inject({ startWall, until: endWall, hash, note }) : ctx && spec.inject?.(ctx);
    const injected = injector?.catch((e) => {
      note("injector failed", { error: String(e) });
    }).finally(clearRoutes);
    const deadline = setTimeout(() => children.forEach((c) => killHard(c)), spec.durationMs + 45_000);
    const results = await Promise.all(children.map((c) => c.result));
    clearTimeout(deadline);
    await injected;
    clearTimeout(clearAtEnd);
    clearRoutes();
    await Promise.all(stops);
    // Leaks are checked once the worker processes have exited (they quit their clients, then exit).
    const exitBy = setTimeout(() => children.forEach((c) => killHard(c)), 10_000);
    await Promise.all(children.map((c) => c.exited));
    clearTimeout(exitBy);
    const leaks = spec.noLock ? undefined : admin ? await leftovers(admin, proxies) : await topologyLeftovers(topo!);

    const keys = resourceKeys(resPrefix);
    const counter = Number(await res.get(keys.counter) ?? 0);
    const writes = await res.lRange(keys.writes, 0, -1);
    const accepted = await res.lRange(keys.accepted, 0, -1);
    const workers = results.filter((r): r is WorkerResult => r !== undefined);
    const failed = children.flatMap((c, i) =>
      results[i] ? [] : [{ id: c.id, code: c.proc.exitCode, stderr: c.stderr().slice(-4000) }]
    );
    // Anything a worker (or the library inside it) printed as a warning, e.g. about the eviction policy.
    const warnings = children.flatMap((c) =>
      c.stderr().split("\n").filter((l) => /warn|evict|maxmemory/i.test(l)).map((l) => `${c.id}: ${l.slice(0, 300)}`)
    );
    const analysis = analyze({
      spec,
      workers,
      failed,
      faults,
      startWall,
      endWall,
      counter,
      writes,
      accepted,
      warnings,
      leaks,
    });
    if (spec.resource) {
      // What each resource itself recorded: the sale log (redis) or the orders table (pg), in its own order.
      const faultedIds = [...(spec.faulted ?? []), ...(spec.victims ?? []).map((v) => v.worker)].map((i) =>
        children[i].id
      );
      analysis.resource = [];
      for (const sink of sinksOf(spec.resource)) {
        const { log: logged, stock } = await readResource(sink, res, resPrefix, pgServer?.url);
        const r = analyzeResource(sink, logged, stock, workers, faultedIds, spec.resource.lockDelayCovers);
        analysis.resource.push(r);
        for (const p of r.problems) analysis.problems.push(`resource ${sink.id}: ${p}`);
        analysis.ok &&= r.ok;
      }
    }
    const lockStats: Record<string, number> = {};
    try {
      // (A topology's stats are spread over its nodes: not collected.)
      const info = await admin!.sendCommand(["INFO", "all"]) as string;
      for (const m of info.matchAll(/^(cmdstat_[^:]+):calls=(\d+)/gm)) lockStats[m[1]] = Number(m[2]);
      for (const m of info.matchAll(/^(errorstat_[^:]+):count=(\d+)/gm)) lockStats[m[1]] = Number(m[2]);
    } catch { /* the lock server is not answering: no stats */ }
    return { spec, workers, failed, faults, startWall, endWall, counter, writes, accepted, lockStats, leaks, analysis };
  } finally {
    children.forEach((c) => killHard(c));
    for (const p of proxies) await p.close();
    await lock?.stop();
    await topo?.stop();
    await resource?.stop();
    await pgStarting?.then((pg) => pg.stop(), () => {});
  }
}

/** What a pg scenario says where PostgreSQL is not installed (it is then reported as not run). */
export const PG_MISSING = "PostgreSQL is not installed: not run (Debian/Ubuntu: apt-get install postgresql; " +
  "harness/postgres.ts starts a throwaway server from its binaries)";

/** Whether a spec can run here (a pg resource needs PostgreSQL's binaries). */
export const canRun = (spec: ScenarioSpec) => !spec.resource?.targets.includes("pg") || hasPostgres();

/**
 * `leftovers` on every master of a topology (live cluster masters, or the current Sentinel primary), merged: each
 * reports what it holds of the lease (the lease name's slot is on one of them), its queues and its channels (but
 * `__sentinel__:hello`, the sentinels' own). Each polls the full 3 s: replicas and sentinels stay connected.
 */
async function topologyLeftovers(topo: Topology): Promise<LeakReport> {
  const ports = await topo.masterPorts();
  const reports = await Promise.all(ports.map(async (port) => {
    const c = createClient({ url: `redis://127.0.0.1:${port}` });
    c.on("error", () => {});
    await c.connect();
    try {
      const r = await leftovers(c as unknown as Client, []);
      return {
        ...r,
        holds: r.holds.map((h) => `${port}: ${h}`),
        queues: r.queues.map((q) => `${port}: ${q}`),
        // The sentinels' own hello channel on the primary is theirs, not a leftover of the workers.
        channels: r.channels.filter((ch) => ch !== "__sentinel__:hello").map((ch) => `${port}: ${ch}`),
      };
    } finally {
      await c.disconnect().catch(() => {});
    }
  }));
  return {
    holds: reports.flatMap((r) => r.holds),
    queues: reports.flatMap((r) => r.queues),
    channels: reports.flatMap((r) => r.channels),
    clients: reports.reduce((n, r) => n + r.clients, 0),
    proxyConnections: 0,
    waitedMs: Math.max(0, ...reports.map((r) => r.waitedMs)),
  };
}

/**
 * What the lock server still holds after every worker exited: lease hashes with an owner field (a hash holding
 * only the grant record "" is the fence record a release leaves behind, by design, for 10 s), wait queues, and
 * subscribed channels (plain and sharded); plus the connections still open (the admin's excepted) and the
 * proxies' open connections. Polled for up to 3 s, since a closed connection's subscriptions go when Redis (and
 * the proxy in between) has seen the close.
 */
export async function leftovers(admin: Client, proxies: FaultProxy[]): Promise<LeakReport> {
  const t0 = wall();
  for (;;) {
    const holds: string[] = [];
    const queues: string[] = [];
    const nowUs = Date.now() * 1000;
    for (const key of await scanAll(admin, "redlease:*")) {
      if (key.endsWith(":q")) queues.push(`${key} (${await admin.zCard(key)} entries)`);
      else if (key.endsWith(":s")) {
        // Shared holds and permits (lua/_holders.lua): owner -> expiry µs; live ones are holds left behind.
        const live = Number(await admin.sendCommand(["ZCOUNT", key, `(${nowUs}`, "+inf"]));
        if (live > 0) holds.push(`${key} ${live} shared holds or permits`);
      } else if ((await admin.type(key)) === "string") {
        // The grant record (lua/_record.lua): "<fence>:<attempt>:<holds>:<claim by>:<owner>" while held.
        const held = /^\d+:[^:]*:(\d+):\d*:(.*)$/s.exec(String(await admin.get(key)));
        if (held) holds.push(`${key} held by ${held[2]}×${held[1]}`);
      }
    }
    const channels = await admin.sendCommand(["PUBSUB", "CHANNELS"]) as string[];
    const shardChannels = await admin.sendCommand(["PUBSUB", "SHARDCHANNELS"]) as string[];
    const clientList = String(await admin.sendCommand(["CLIENT", "LIST"]));
    const clients = clientList.split("\n").filter((l) => l.trim() && !/ cmd=client\|list /.test(l)).length;
    const proxyConns = proxies.reduce((n, p) => n + p.connections().length, 0);
    const report: LeakReport = {
      holds,
      queues,
      channels: [...channels, ...shardChannels.map((c) => `(shard) ${c}`)],
      clients,
      proxyConnections: proxyConns,
      waitedMs: Math.round(wall() - t0),
    };
    const clean = holds.length + queues.length + report.channels.length === 0 && clients === 0 && proxyConns === 0;
    if (clean || wall() - t0 > 3_000) return report;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function scanAll(c: Client, match: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await c.sendCommand(["SCAN", cursor, "MATCH", match, "COUNT", "1000"]) as [string, string[]];
    keys.push(...batch);
    cursor = next;
  } while (cursor !== "0");
  return keys;
}

// ---------------------------------------------------------------------------------------------------------------
// Fault injectors

const sleepUntil = (t: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, t - wall())));

/** Run `fn` every `everyMs` from `firstMs` after the start until the end. */
export function every(
  everyMs: number,
  fn: (ctx: FaultContext, i: number) => Promise<void>,
  firstMs = everyMs,
): Injector {
  return async (ctx) => {
    for (let i = 0, t = ctx.startWall + firstMs; t < ctx.until - 100; i++, t += everyMs) {
      await sleepUntil(t);
      await fn(ctx, i);
    }
  };
}

/** Run `fn` once at each of `atMs` after the start. */
export function at(atMs: number[], fn: (ctx: FaultContext, i: number) => Promise<void>): Injector {
  return async (ctx) => {
    for (const [i, ms] of atMs.entries()) {
      await sleepUntil(ctx.startWall + ms);
      await fn(ctx, i);
    }
  };
}

export const scriptFlush = (everyMs = 300): Injector =>
  every(everyMs, async (ctx) => {
    await ctx.admin.sendCommand(["SCRIPT", "FLUSH"]);
    ctx.note("SCRIPT FLUSH");
  });

export const clientKill = (everyMs = 400): Injector =>
  every(everyMs, async (ctx, i) => {
    const type = i % 2 === 0 ? "normal" : "pubsub";
    const killed = await ctx.admin.sendCommand(["CLIENT", "KILL", "TYPE", type, "SKIPME", "yes"]);
    ctx.note("CLIENT KILL", { type, killed });
  });

export const restart = (atMs: number[], downMs = 150): Injector =>
  at(atMs, async (ctx) => {
    const t0 = wall();
    await ctx.lock.restart(downMs);
    ctx.note("redis restarted", { downMs: Math.round(wall() - t0) });
  });

export const clientPause = (atMs: number[], pauseMs = 800): Injector =>
  at(atMs, async (ctx) => {
    await ctx.admin.sendCommand(["CLIENT", "PAUSE", String(pauseMs), "ALL"]);
    ctx.note("CLIENT PAUSE ALL", { pauseMs });
  });

export const debugSleep = (atMs: number[], sleepMs = 800): Injector =>
  at(atMs, async (ctx) => {
    const t0 = wall();
    ctx.note("DEBUG SLEEP", { sleepMs });
    await ctx.admin.sendCommand(["DEBUG", "SLEEP", String(sleepMs / 1000)]);
    ctx.note("DEBUG SLEEP returned", { tookMs: Math.round(wall() - t0) });
  });

async function infoField(c: Client, section: string, field: string): Promise<number> {
  const info = await c.sendCommand(["INFO", section]) as string;
  return Number(new RegExp(`^${field}:(\\d+)`, "m").exec(info)?.[1] ?? NaN);
}

/**
 * Memory pressure under `maxmemory-policy volatile-lru` (the lock server must be started with it): maxmemory
 * is set a little above current use, and each pulse writes a large key without a TTL and deletes it again. The
 * command after the write finds memory over the limit and evicts volatile keys; the lease keys (which always
 * have a TTL) are the only volatile keys there, so all of them go.
 */
export const evictionPulses = (everyMs = 600, headroomBytes = 2 << 20): Injector => async (ctx) => {
  const used = await infoField(ctx.admin, "memory", "used_memory");
  await ctx.admin.sendCommand(["CONFIG", "SET", "maxmemory", String(used + headroomBytes)]);
  ctx.note("maxmemory set", { maxmemory: used + headroomBytes, policy: "volatile-lru" });
  await every(everyMs, async (c) => {
    const before = await infoField(c.admin, "stats", "evicted_keys");
    const t0 = wall();
    // SETRANGE allocates the big value from a tiny command (a big SET would sit in the query buffer and count
    // against maxmemory itself). Both go out in one write, so Redis runs them back to back: the DEL finds
    // memory over the limit and evicts the volatile keys first (DEL itself is allowed under OOM).
    await Promise.all([
      c.admin.setRange("chaos:filler", 2 * headroomBytes, "x"),
      c.admin.del("chaos:filler"),
    ]);
    const t1 = wall();
    const after = await infoField(c.admin, "stats", "evicted_keys");
    c.note("eviction pulse", { from: t0, to: t1, evicted: after - before });
  }, 500)(ctx);
};
