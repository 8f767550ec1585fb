// Test harness: throwaway Redis Cluster and Redis Sentinel topologies on free loopback ports.
//
// Every process is started with spawn() and stopped by pid (SIGKILL); nothing here ever touches port 6379. Processes
// still alive when the test process exits are SIGKILLed by an exit hook, so a crashed test leaves no orphans behind.
// Administrative commands go over a tiny one-shot RESP connection (see `command()`), independent of any client
// library, so the harness keeps working while a client under test is misbehaving.
//
//   const c = await startCluster();                 // 3 masters + 3 replicas
//   const cluster = await c.cluster();              // node-redis v4 cluster client, closed by c.stop()
//   await c.migrateSlot(c.slotOf("k"), otherPort);  // live slot migration (MIGRATING/IMPORTING + MIGRATE)
//   await c.stop();
//
//   const s = await startSentinel();                // master + 1 replica + 3 sentinels
//   const t = await s.killMaster();
//   const newPort = await s.waitForFailover(s.master.port);
//   await s.stop();
import { type ChildProcess, spawn } from "node:child_process";
import { Buffer } from "node:buffer";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { createClient, createCluster } from "redis";
import { createSentinel } from "redis5";
import { Redis as IORedis, type RedisOptions as IORedisOptions } from "ioredis";
import { type Client, freePort, type RedisServer, sleep, startRedis } from "./_redis.ts";
import { crc16, slotOf } from "../src/adapters/_slot.ts";

export { freePort, sleep };

// ---------------------------------------------------------------------------------------------------------------------
// Process bookkeeping

const READY_TIMEOUT_MS = 20_000;
const LOG_TAIL = 16_384;

interface Proc {
  readonly kind: string;
  readonly port: number;
  readonly busPort?: number;
  readonly pid: number;
  readonly child: ChildProcess;
  readonly argv: string[];
  exited: boolean;
  readonly exit: Promise<void>;
  log(): string;
}

const live = new Set<Proc>();
const liveDirs = new Set<string>();
const externalPids = new Set<number>();
const reservedPorts = new Set<number>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const p of live) if (!p.exited) tryKill(p.pid, "SIGKILL");
    for (const pid of externalPids) tryKill(pid, "SIGKILL");
    for (const d of liveDirs) {
      try {
        rmSync(d, { recursive: true, force: true });
      } catch { /* best effort */ }
    }
  });
}

function tryKill(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** SIGSTOP a process (e.g. a redis-server): it keeps its sockets open but answers nothing. */
export function pause(pid: number): void {
  process.kill(pid, "SIGSTOP");
}

/** SIGCONT a process stopped with pause(). */
export function resume(pid: number): void {
  process.kill(pid, "SIGCONT");
}

/** A free loopback port not handed out by this module to a process still running. */
async function uniquePort(): Promise<number> {
  for (let i = 0;; i++) {
    const p = await freePort();
    if (!reservedPorts.has(p)) {
      reservedPorts.add(p);
      return p;
    }
    if (i > 50) throw new Error("could not find a free port");
  }
}

function tmpDir(label: string): string {
  installExitHook();
  const dir = mkdtempSync(join(tmpdir(), `redlease-${label}-`));
  liveDirs.add(dir);
  return dir;
}

function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  liveDirs.delete(dir);
}

const PORT_CLASH =
  /already in use|Could not create server TCP listening socket|Failed listening on port|Could not bind/i;

/**
 * Spawn a redis-server (or sentinel) on fresh ports and wait until it answers INFO with its own pid. Retries with new
 * ports when the port turned out to be taken (by another process, or a server started by a concurrent test).
 */
async function spawnServer(opts: {
  kind: string;
  bus?: boolean;
  args: (port: number, busPort: number) => string[];
  readyTimeoutMs?: number;
}): Promise<Proc> {
  installExitHook();
  const timeout = opts.readyTimeoutMs ?? READY_TIMEOUT_MS;
  let lastError = "";
  for (let attempt = 1; attempt <= 6; attempt++) {
    const port = await uniquePort();
    const busPort = opts.bus ? await uniquePort() : 0;
    const argv = opts.args(port, busPort);
    const child = spawn("redis-server", argv, { stdio: ["ignore", "pipe", "pipe"] });
    let tail = "";
    const onData = (d: Buffer) => {
      tail += d.toString();
      if (tail.length > LOG_TAIL) tail = tail.slice(-LOG_TAIL);
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    let spawnError: Error | undefined;
    child.on("error", (e) => (spawnError = e));
    const proc: Proc = {
      kind: opts.kind,
      port,
      busPort: opts.bus ? busPort : undefined,
      pid: child.pid ?? -1,
      child,
      argv,
      exited: false,
      exit: new Promise<void>((resolve) => child.once("exit", () => resolve())),
      log: () => tail,
    };
    void proc.exit.then(() => {
      proc.exited = true;
      live.delete(proc);
      reservedPorts.delete(port);
      if (busPort) reservedPorts.delete(busPort);
    });
    if (child.pid === undefined) {
      await sleep(20);
      throw new Error(`could not spawn redis-server ${argv.join(" ")}: ${spawnError?.message ?? "no pid"}`);
    }
    live.add(proc);
    // Do not keep the test process alive just for these: the exit hook kills whatever is left.
    unrefChild(child);

    const deadline = performance.now() + timeout;
    let foreign = false;
    let lastProbe = "";
    while (!proc.exited && performance.now() < deadline) {
      try {
        const info = parseInfo(String(await command(port, ["INFO", "server"], { timeoutMs: 2000 })));
        if (Number(info.process_id) === proc.pid) return proc;
        foreign = true; // somebody else's server answered on "our" port
        break;
      } catch (e) {
        lastProbe = (e as Error).message;
        await sleep(50);
      }
    }
    if (!proc.exited) {
      await killProc(proc);
      if (foreign) {
        lastError = `port ${port} was answered by another process`;
        continue;
      }
      throw new Error(
        `${opts.kind} on port ${port} (pid ${proc.pid}) not ready after ${timeout} ms (last probe: ${lastProbe})\n` +
          `  redis-server ${argv.join(" ")}\n--- output ---\n${proc.log()}`,
      );
    }
    await sleep(20); // let the pipes drain
    lastError = `${opts.kind} exited during startup on port ${port}${busPort ? `/${busPort}` : ""} ` +
      `(code ${proc.child.exitCode}, signal ${proc.child.signalCode})\n  redis-server ${argv.join(" ")}\n` +
      `--- output ---\n${proc.log()}`;
    if (!PORT_CLASH.test(proc.log())) throw new Error(lastError);
  }
  throw new Error(`could not start ${opts.kind} after 6 attempts; last error: ${lastError}`);
}

function unrefChild(child: ChildProcess): void {
  try {
    child.unref();
    for (const s of [child.stdout, child.stderr] as Array<{ unref?: () => void } | null>) s?.unref?.();
  } catch { /* not supported on this runtime: fine, stop() still kills it */ }
}

async function killProc(p: Proc): Promise<void> {
  if (p.exited) return;
  tryKill(p.pid, "SIGKILL");
  await withTimeout(p.exit, 5000, `pid ${p.pid} did not exit after SIGKILL`).catch(() => {});
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`timeout after ${ms} ms: ${what}`)), ms))),
  ]).finally(() => clearTimeout(timer));
}

async function closeQuietly(close: () => Promise<unknown>): Promise<void> {
  await withTimeout(Promise.resolve().then(close), 3000, "client close").catch(() => {});
}

/** Run `check` until it returns true (or a value); on timeout throw with the last reason it gave. */
async function waitUntil(
  what: string,
  timeoutMs: number,
  check: () => Promise<true | string>,
  intervalMs = 100,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let reason = "";
  for (;;) {
    try {
      const r = await check();
      if (r === true) return;
      reason = r;
    } catch (e) {
      reason = (e as Error).message;
    }
    if (performance.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}: ${reason}`);
    }
    await sleep(intervalMs);
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Minimal RESP2 one-shot client for administrative commands

export class RespError extends Error {
  override name = "RespError";
}

export type Reply = string | number | null | Buffer | RespError | Reply[];
type Arg = string | number | Buffer;

function encode(args: Arg[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a));
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from("\r\n"));
  }
  return Buffer.concat(parts);
}

function parseReply(buf: Buffer, pos: number): { value: Reply; pos: number } | null {
  if (pos >= buf.length) return null;
  const eol = buf.indexOf("\r\n", pos);
  if (eol < 0) return null;
  const type = String.fromCharCode(buf[pos]!);
  const line = buf.toString("utf8", pos + 1, eol);
  let next = eol + 2;
  switch (type) {
    case "+":
      return { value: line, pos: next };
    case "-":
      return { value: new RespError(line), pos: next };
    case ":":
      return { value: Number(line), pos: next };
    case "$": {
      const n = Number(line);
      if (n < 0) return { value: null, pos: next };
      if (buf.length < next + n + 2) return null;
      return { value: buf.subarray(next, next + n), pos: next + n + 2 };
    }
    case "*": {
      const n = Number(line);
      if (n < 0) return { value: null, pos: next };
      const arr: Reply[] = [];
      for (let i = 0; i < n; i++) {
        const r = parseReply(buf, next);
        if (!r) return null;
        arr.push(r.value);
        next = r.pos;
      }
      return { value: arr, pos: next };
    }
    default:
      throw new Error(`unexpected RESP type byte ${JSON.stringify(type)}`);
  }
}

function decode(r: Reply): Reply {
  if (Buffer.isBuffer(r)) return r.toString("utf8");
  if (Array.isArray(r)) return r.map(decode);
  return r;
}

/**
 * Send one command to 127.0.0.1:port on a fresh connection and return the reply (bulk strings decoded as UTF-8
 * unless `raw`). Rejects with RespError on an error reply, with a plain Error on connection failure or timeout.
 */
export function command(port: number, args: Arg[], opts: { timeoutMs?: number; raw?: boolean } = {}): Promise<Reply> {
  const timeoutMs = opts.timeoutMs ?? 5000;
  return new Promise<Reply>((resolve, reject) => {
    const sock = connect({ host: "127.0.0.1", port });
    let buf: Buffer = Buffer.alloc(0);
    let done = false;
    const finish = (err: Error | null, value?: Reply) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(value as Reply);
    };
    const timer = setTimeout(
      () => finish(new Error(`127.0.0.1:${port} ${String(args[0])}: no reply within ${timeoutMs} ms`)),
      timeoutMs,
    );
    sock.on("connect", () => sock.write(encode(args)));
    sock.on("data", (d: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      let r: ReturnType<typeof parseReply>;
      try {
        r = parseReply(buf, 0);
      } catch (e) {
        return finish(e as Error);
      }
      if (!r) return;
      if (r.value instanceof RespError) {
        r.value.message = `127.0.0.1:${port} ${args.slice(0, 3).map(String).join(" ")}: ${r.value.message}`;
        return finish(r.value);
      }
      finish(null, opts.raw ? r.value : decode(r.value));
    });
    sock.on("error", (e) => finish(new Error(`127.0.0.1:${port} ${String(args[0])}: ${e.message}`)));
    sock.on("close", () => finish(new Error(`127.0.0.1:${port} ${String(args[0])}: connection closed`)));
  });
}

/** INFO text → { field: value }. */
export function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i > 0 && !line.startsWith("#")) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

async function info(port: number, section: string): Promise<Record<string, string>> {
  return parseInfo(String(await command(port, ["INFO", section], { timeoutMs: 3000 })));
}

/** [k1, v1, k2, v2, ...] → { k1: v1, ... } */
function pairs(r: Reply): Record<string, string> {
  const out: Record<string, string> = {};
  const a = r as Reply[];
  for (let i = 0; i + 1 < a.length; i += 2) out[String(a[i])] = String(a[i + 1]);
  return out;
}

async function nodeClientFor(port: number, track: Array<() => Promise<unknown>>): Promise<Client> {
  const c = createClient({ url: `redis://127.0.0.1:${port}` });
  c.on("error", () => {});
  await c.connect();
  track.push(() => c.disconnect());
  return c;
}

// ---------------------------------------------------------------------------------------------------------------------
// Hash slots

// The one CRC16 lives in src (the ioredis adapter ships it); src never imports from tests.
export { crc16, slotOf };

// ---------------------------------------------------------------------------------------------------------------------
// Cluster

export type ClusterClient = ReturnType<typeof createCluster>;
type ClusterOptions = Parameters<typeof createCluster>[0];

export interface ClusterNode {
  readonly port: number;
  /** The cluster bus port (passed as --cluster-port, so it need not be port + 10000). */
  readonly busPort: number;
  readonly pid: number;
  /** CLUSTER MYID */
  readonly id: string;
  /** As of startup or the last refresh() / migrateSlot(). */
  role: "master" | "replica";
  /** For a replica: the id of its master. */
  masterId?: string;
  /** Whether the process is still running. */
  readonly alive: boolean;
}

export interface MigrateOptions {
  /** Sleep this long between IMPORTING/MIGRATING and moving the keys: the ASK window. */
  pauseMs?: number;
  /** Called in the ASK window (after pauseMs): the slot is MIGRATING on the source, IMPORTING on the target. */
  during?: () => Promise<void> | void;
}

export interface StartedCluster {
  readonly nodes: ClusterNode[];
  /** Seed list for createCluster(): every node, masters first. */
  readonly rootNodes: Array<{ url: string }>;
  readonly dir: string;
  /** Nodes currently known as masters. */
  masters(): ClusterNode[];
  replicas(): ClusterNode[];
  node(port: number): ClusterNode;
  /** A connected node-redis v4 cluster client (options merged over { rootNodes }); disconnected by stop(). */
  cluster(options?: Partial<ClusterOptions>): Promise<ClusterClient>;
  /** A plain connected node-redis v4 client to one node; disconnected by stop(). */
  nodeClient(port: number): Promise<Client>;
  /** Send one raw command to one node. */
  command(port: number, ...args: Arg[]): Promise<Reply>;
  slotOf(key: string | Uint8Array): number;
  /** The master owning a slot, per the last known slot map. */
  ownerOf(slot: number): ClusterNode;
  /** Live slot migration to another master; resolves once every node agrees on the new owner. */
  migrateSlot(
    slot: number,
    toMasterPort: number,
    opts?: MigrateOptions,
  ): Promise<{ from: number; to: number; keys: number }>;
  /** Re-read roles and slot ownership from a live node (e.g. after a failover the test caused). */
  refresh(): Promise<void>;
  /** Wait until all live nodes report cluster_state:ok and agree on the slot map (after killing/pausing nodes). */
  waitForConsistency(timeoutMs?: number): Promise<void>;
  kill(port: number): Promise<void>;
  stop(): Promise<void>;
}

interface CNode extends ClusterNode {
  proc: Proc;
}

function clusterNodeArgs(dir: string, nodeTimeoutMs: number) {
  return (port: number, busPort: number) => [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--cluster-enabled",
    "yes",
    "--cluster-port",
    String(busPort),
    "--cluster-config-file",
    join(dir, `nodes-${port}.conf`),
    "--cluster-node-timeout",
    String(nodeTimeoutMs),
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    dir,
    "--dbfilename",
    `dump-${port}.rdb`,
    "--repl-diskless-sync-delay",
    "0",
    // CLUSTER SLOTS lists a replica only once its replication offset is non-zero; on an idle master that takes the
    // first replication PING, every repl-ping-replica-period seconds (default 10).
    "--repl-ping-replica-period",
    "1",
  ];
}

/** One parsed line of CLUSTER NODES. */
interface NodesLine {
  id: string;
  port: number;
  flags: string[];
  masterId: string;
  link: string;
  slots: string[];
}

function parseClusterNodes(text: string): NodesLine[] {
  return text.trim().split("\n").filter(Boolean).map((line) => {
    const f = line.trim().split(" ");
    const addr = f[1]!.split("@")[0]!;
    return {
      id: f[0]!,
      port: Number(addr.slice(addr.lastIndexOf(":") + 1)),
      flags: f[2]!.split(","),
      masterId: f[3]!,
      link: f[7]!,
      slots: f.slice(8),
    };
  });
}

/** CLUSTER SLOTS → sorted "start-end:masterPort[replicaPorts]" lines, plus slot → master port. */
function slotsSignature(r: Reply): { sig: string; owner: Int32Array; covered: number } {
  const owner = new Int32Array(16384);
  const lines: string[] = [];
  let covered = 0;
  for (const range of r as Reply[][]) {
    const start = Number(range[0]);
    const end = Number(range[1]);
    const master = Number((range[2] as Reply[])[1]);
    const replicas = range.slice(3).map((n) => Number((n as Reply[])[1])).sort((a, b) => a - b);
    for (let s = start; s <= end; s++) owner[s] = master;
    covered += end - start + 1;
    lines.push(`${String(start).padStart(5, "0")}-${end}:${master}[${replicas.join(",")}]`);
  }
  return { sig: lines.sort().join(" "), owner, covered };
}

async function runRedisCli(args: string[], timeoutMs: number): Promise<{ code: number | null; out: string }> {
  return await new Promise((resolve) => {
    const child = spawn("redis-cli", args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => {
      out += `\n[killed after ${timeoutMs} ms]`;
      if (child.pid) tryKill(child.pid, "SIGKILL");
    }, timeoutMs);
    child.on("error", (e) => {
      clearTimeout(timer);
      resolve({ code: -1, out: out + String(e) });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      // deno-lint-ignore no-control-regex
      resolve({ code, out: out.replace(/\x1b\[[0-9;]*m/g, "") });
    });
  });
}

export interface ClusterStartOptions {
  masters?: number;
  replicasPerMaster?: number;
  /** --cluster-node-timeout (default 2000). */
  nodeTimeoutMs?: number;
  /** Readiness timeout for the whole cluster to converge (default 30000). */
  readyTimeoutMs?: number;
}

/**
 * Start `masters * (1 + replicasPerMaster)` cluster-enabled redis-servers, create the cluster (redis-cli --cluster
 * create, or by hand for fewer than 3 masters) and wait until every node reports cluster_state:ok, agrees on slot
 * ownership and replicas, and every replica's link to its master is up.
 */
export async function startCluster(opts: ClusterStartOptions = {}): Promise<StartedCluster> {
  let lastError: unknown;
  for (let attempt = 1; attempt <= 2; attempt++) {
    try {
      return await startClusterOnce(opts);
    } catch (e) {
      lastError = e;
    }
  }
  throw lastError;
}

async function startClusterOnce(opts: ClusterStartOptions): Promise<StartedCluster> {
  const masters = opts.masters ?? 3;
  const replicasPerMaster = opts.replicasPerMaster ?? 1;
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
  if (masters < 1 || replicasPerMaster < 0) throw new Error("startCluster: need masters >= 1, replicasPerMaster >= 0");
  const dir = tmpDir("cluster");
  const procs: Proc[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  let stopped = false;
  const stopAll = async () => {
    if (stopped) return;
    stopped = true;
    await Promise.all(closers.splice(0).map(closeQuietly));
    await Promise.all(procs.map(killProc));
    removeDir(dir);
  };
  try {
    const total = masters * (1 + replicasPerMaster);
    const args = clusterNodeArgs(dir, opts.nodeTimeoutMs ?? 2000);
    for (let i = 0; i < total; i++) procs.push(await spawnServer({ kind: "cluster node", bus: true, args }));

    const ids = await Promise.all(procs.map(async (p) => String(await command(p.port, ["CLUSTER", "MYID"]))));
    if (masters >= 3) {
      const res = await runRedisCli([
        "--cluster",
        "create",
        ...procs.map((p) => `127.0.0.1:${p.port}`),
        "--cluster-replicas",
        String(replicasPerMaster),
        "--cluster-yes",
      ], 60_000);
      if (res.code !== 0 || !res.out.includes("All 16384 slots covered")) {
        throw new Error(`redis-cli --cluster create failed (exit ${res.code}):\n${res.out}`);
      }
    } else {
      await createClusterByHand(procs, ids, masters, replicasPerMaster);
    }

    const nodes: CNode[] = procs.map((p, i) => ({
      port: p.port,
      busPort: p.busPort!,
      pid: p.pid,
      id: ids[i]!,
      role: "master",
      proc: p,
      get alive() {
        return !p.exited;
      },
    }));
    let owner: Int32Array = new Int32Array(16384);

    const byPort = (port: number): CNode => {
      const n = nodes.find((x) => x.port === port);
      if (!n) throw new Error(`no cluster node on port ${port} (nodes: ${nodes.map((x) => x.port).join(", ")})`);
      return n;
    };
    const aliveNodes = () => nodes.filter((n) => n.alive);

    const refresh = async () => {
      let lastErr: unknown;
      for (const n of aliveNodes()) {
        try {
          const lines = parseClusterNodes(String(await command(n.port, ["CLUSTER", "NODES"])));
          const slots = slotsSignature(await command(n.port, ["CLUSTER", "SLOTS"]));
          for (const l of lines) {
            const node = nodes.find((x) => x.id === l.id);
            if (!node) continue;
            node.role = l.flags.includes("master") ? "master" : "replica";
            node.masterId = l.masterId === "-" ? undefined : l.masterId;
          }
          owner = slots.owner;
          return;
        } catch (e) {
          lastErr = e;
        }
      }
      throw new Error(`refresh: no live node answered: ${String(lastErr)}`);
    };

    /** true when all live nodes are ok and agree; otherwise the reason. */
    const consistent = async (expect?: { slot: number; port: number }): Promise<true | string> => {
      const alive = aliveNodes();
      let sig: string | undefined;
      for (const n of alive) {
        const ci = parseInfo(String(await command(n.port, ["CLUSTER", "INFO"])));
        if (ci.cluster_state !== "ok") return `${n.port}: cluster_state:${ci.cluster_state}`;
        const lines = parseClusterNodes(String(await command(n.port, ["CLUSTER", "NODES"])));
        for (const other of alive) {
          const l = lines.find((x) => x.id === other.id);
          if (!l) return `${n.port} does not know ${other.port} yet`;
          const bad = l.flags.filter((f) => /fail|handshake|noaddr/.test(f));
          if (bad.length) return `${n.port} sees ${other.port} as ${bad.join(",")}`;
          if (l.link !== "connected") return `${n.port} has link ${l.link} to ${other.port}`;
          if (l.slots.some((s) => s.startsWith("["))) {
            return `${n.port}: slot still migrating/importing: ${l.slots.join(" ")}`;
          }
        }
        const s = slotsSignature(await command(n.port, ["CLUSTER", "SLOTS"]));
        if (s.covered !== 16384) return `${n.port} covers only ${s.covered} slots`;
        if (expect && s.owner[expect.slot] !== expect.port) {
          return `${n.port} still sees slot ${expect.slot} on ${s.owner[expect.slot]}`;
        }
        if (sig === undefined) sig = s.sig;
        else if (sig !== s.sig) return `slot maps differ:\n  ${alive[0]!.port}: ${sig}\n  ${n.port}: ${s.sig}`;
        const repl = parseInfo(String(await command(n.port, ["INFO", "replication"])));
        if (repl.role === "slave" && repl.master_link_status !== "up") {
          return `${n.port}: master_link_status:${repl.master_link_status}`;
        }
      }
      const replicaCount = (sig ?? "").split(" ").map((r) => /\[(.*)\]/.exec(r)?.[1] ?? "").filter(Boolean)
        .flatMap((r) => r.split(",")).length;
      const aliveReplicas = alive.length - new Set(Array.from((sig ?? "").matchAll(/:(\d+)\[/g), (m) => m[1])).size;
      if (replicaCount < aliveReplicas) {
        return `only ${replicaCount} of ${aliveReplicas} replicas listed in CLUSTER SLOTS`;
      }
      return true;
    };

    const waitForConsistency = (timeoutMs = readyTimeoutMs) =>
      waitUntil("cluster to converge", timeoutMs, () => consistent(), 150).then(refresh);

    await waitForConsistency();
    const masterCount = nodes.filter((n) => n.role === "master").length;
    if (masterCount !== masters) throw new Error(`expected ${masters} masters, cluster has ${masterCount}`);
    nodes.sort((a, b) => (a.role === b.role ? 0 : a.role === "master" ? -1 : 1));

    const api: StartedCluster = {
      nodes,
      rootNodes: nodes.map((n) => ({ url: `redis://127.0.0.1:${n.port}` })),
      dir,
      masters: () => nodes.filter((n) => n.role === "master"),
      replicas: () => nodes.filter((n) => n.role === "replica"),
      node: byPort,
      async cluster(options = {}) {
        const c = createCluster({ rootNodes: api.rootNodes, ...options } as ClusterOptions);
        c.on("error", () => {});
        await c.connect();
        closers.push(() => c.disconnect());
        return c;
      },
      nodeClient: (port) => nodeClientFor(byPort(port).port, closers),
      command: (port, ...a) => command(port, a),
      slotOf,
      ownerOf(slot) {
        if (!Number.isInteger(slot) || slot < 0 || slot > 16383) throw new Error(`bad slot ${slot}`);
        return byPort(owner[slot]!);
      },
      async migrateSlot(slot, toMasterPort, mopts = {}) {
        await refresh();
        const src = api.ownerOf(slot);
        const dst = byPort(toMasterPort);
        if (dst.role !== "master") throw new Error(`migrateSlot: ${toMasterPort} is not a master`);
        if (src.port === dst.port) return { from: src.port, to: dst.port, keys: 0 };
        await command(dst.port, ["CLUSTER", "SETSLOT", slot, "IMPORTING", src.id]);
        await command(src.port, ["CLUSTER", "SETSLOT", slot, "MIGRATING", dst.id]);
        if (mopts.pauseMs) await sleep(mopts.pauseMs);
        if (mopts.during) await mopts.during();
        let moved = 0;
        for (;;) {
          const keys = await command(src.port, ["CLUSTER", "GETKEYSINSLOT", slot, 100], { raw: true }) as Buffer[];
          if (keys.length === 0) break;
          await command(src.port, ["MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", ...keys], {
            timeoutMs: 15_000,
          });
          moved += keys.length;
        }
        await command(dst.port, ["CLUSTER", "SETSLOT", slot, "NODE", dst.id]);
        await command(src.port, ["CLUSTER", "SETSLOT", slot, "NODE", dst.id]);
        for (const m of nodes.filter((n) => n.role === "master" && n.alive && n !== src && n !== dst)) {
          await command(m.port, ["CLUSTER", "SETSLOT", slot, "NODE", dst.id]);
        }
        await waitUntil(
          `all nodes to agree slot ${slot} moved ${src.port} -> ${dst.port}`,
          readyTimeoutMs,
          () => consistent({ slot, port: dst.port }),
          100,
        );
        await refresh();
        return { from: src.port, to: dst.port, keys: moved };
      },
      refresh,
      waitForConsistency,
      async kill(port) {
        await killProc(byPort(port).proc);
      },
      stop: stopAll,
    };
    return api;
  } catch (e) {
    const logs = procs.map((p) => `--- ${p.kind} ${p.port} (pid ${p.pid}) ---\n${p.log().slice(-3000)}`).join("\n");
    await stopAll();
    throw new Error(`startCluster failed: ${(e as Error).message}\n${logs}`);
  }
}

/** For 1-2 masters, which redis-cli refuses: ADDSLOTSRANGE, MEET, REPLICATE. */
async function createClusterByHand(procs: Proc[], ids: string[], masters: number, replicasPerMaster: number) {
  for (let i = 0; i < masters; i++) {
    const start = Math.floor((i * 16384) / masters);
    const end = Math.floor(((i + 1) * 16384) / masters) - 1;
    await command(procs[i]!.port, ["CLUSTER", "ADDSLOTSRANGE", start, end]);
    await command(procs[i]!.port, ["CLUSTER", "SET-CONFIG-EPOCH", i + 1]);
  }
  for (const p of procs.slice(1)) await command(procs[0]!.port, ["CLUSTER", "MEET", "127.0.0.1", p.port, p.busPort!]);
  await waitUntil("nodes to meet", 20_000, async () => {
    for (const p of procs) {
      const lines = parseClusterNodes(String(await command(p.port, ["CLUSTER", "NODES"])));
      if (lines.length < procs.length || lines.some((l) => l.flags.includes("handshake"))) {
        return `${p.port} knows ${lines.length}/${procs.length}`;
      }
    }
    return true;
  });
  for (let r = 0; r < masters * replicasPerMaster; r++) {
    const replica = procs[masters + r]!;
    const masterId = ids[r % masters]!;
    await waitUntil("replica to attach", 20_000, async () => {
      try {
        await command(replica.port, ["CLUSTER", "REPLICATE", masterId]);
        return true;
      } catch (e) {
        return (e as Error).message;
      }
    });
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Sentinel

function makeSentinelClient(options: Parameters<typeof createSentinel>[0]) {
  return createSentinel(options);
}
export type SentinelClient = ReturnType<typeof makeSentinelClient>;
type SentinelClientOptions = Parameters<typeof createSentinel>[0];

export interface ProcInfo {
  readonly port: number;
  readonly pid: number;
  /** Whether the process is still running. */
  readonly alive: boolean;
}

export interface SentinelStartOptions {
  replicas?: number;
  sentinels?: number;
  downAfterMs?: number;
  failoverTimeoutMs?: number;
  masterName?: string;
  /** Sentinel quorum (default min(2, sentinels)). */
  quorum?: number;
  /** Readiness timeout for replication sync and sentinel discovery (default 30000). */
  readyTimeoutMs?: number;
}

export interface StartedSentinel {
  /** The master at startup (after a failover, see currentMaster()). */
  readonly master: ProcInfo;
  readonly replicas: ProcInfo[];
  readonly sentinels: ProcInfo[];
  readonly masterName: string;
  readonly dir: string;
  /** The master according to the first sentinel that answers SENTINEL GET-MASTER-ADDR-BY-NAME. */
  currentMaster(): Promise<{ host: string; port: number }>;
  /** SIGKILL the current master; returns performance.now() taken right after the kill. */
  killMaster(): Promise<number>;
  /** SIGKILL one data node or sentinel by port. */
  kill(port: number): Promise<void>;
  /** Resolve with the new master port once a sentinel names a master other than oldPort and it reports role:master. */
  waitForFailover(oldPort: number, timeoutMs?: number): Promise<number>;
  /** A plain connected node-redis v4 client; disconnected by stop(). */
  nodeClient(port: number): Promise<Client>;
  /** A connected node-redis v5 sentinel client (all sentinels as root nodes); destroyed by stop(). */
  sentinelClient(options?: Partial<SentinelClientOptions>): Promise<SentinelClient>;
  /** A connected (ready) ioredis client in sentinel mode; disconnected by stop(). */
  ioredisClient(options?: IORedisOptions): Promise<IORedis>;
  /** Send one raw command to a data node or sentinel. */
  command(port: number, ...args: Arg[]): Promise<Reply>;
  stop(): Promise<void>;
}

function procInfo(p: Proc): ProcInfo {
  return {
    port: p.port,
    pid: p.pid,
    get alive() {
      return !p.exited;
    },
  };
}

function dataNodeArgs(dir: string, replicaOf?: number) {
  return (port: number) => [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    dir,
    "--dbfilename",
    `dump-${port}.rdb`,
    "--repl-diskless-sync-delay",
    "0",
    ...(replicaOf ? ["--replicaof", "127.0.0.1", String(replicaOf)] : []),
  ];
}

/**
 * Start a master, `replicas` replicas (in sync before returning) and `sentinels` sentinels monitoring it as
 * `masterName`, and wait until every sentinel sees the master up, all replicas and all other sentinels.
 */
export async function startSentinel(opts: SentinelStartOptions = {}): Promise<StartedSentinel> {
  const nReplicas = opts.replicas ?? 1;
  const nSentinels = opts.sentinels ?? 3;
  const downAfterMs = opts.downAfterMs ?? 1000;
  const failoverTimeoutMs = opts.failoverTimeoutMs ?? 5000;
  const masterName = opts.masterName ?? "mymaster";
  const quorum = opts.quorum ?? Math.min(2, nSentinels);
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
  if (nSentinels < 1 || nReplicas < 0) throw new Error("startSentinel: need sentinels >= 1, replicas >= 0");

  const dir = tmpDir("sentinel");
  const procs: Proc[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  let stopped = false;
  const stopAll = async () => {
    if (stopped) return;
    stopped = true;
    await Promise.all(closers.splice(0).map(closeQuietly));
    await Promise.all(procs.map(killProc));
    removeDir(dir);
  };

  try {
    const master = await spawnServer({ kind: "master", args: dataNodeArgs(dir) });
    procs.push(master);
    const replicas = await Promise.all(
      Array.from({ length: nReplicas }, () => spawnServer({ kind: "replica", args: dataNodeArgs(dir, master.port) })),
    );
    procs.push(...replicas);

    await waitUntil("replicas to be in sync", readyTimeoutMs, async () => {
      const r = await info(master.port, "replication");
      if (Number(r.connected_slaves) !== nReplicas) return `connected_slaves:${r.connected_slaves}`;
      for (let i = 0; i < nReplicas; i++) {
        const f = Object.fromEntries((r[`slave${i}`] ?? "").split(",").map((kv) => kv.split("=") as [string, string]));
        if (f.state !== "online") return `slave${i} state=${f.state}`;
        if (f.offset !== r.master_repl_offset) return `slave${i} offset ${f.offset} != ${r.master_repl_offset}`;
      }
      for (const rp of replicas) {
        const ri = await info(rp.port, "replication");
        if (ri.master_link_status !== "up") return `${rp.port}: master_link_status:${ri.master_link_status}`;
      }
      return true;
    });

    const sentinels = await Promise.all(Array.from({ length: nSentinels }, () =>
      spawnServer({
        kind: "sentinel",
        args: (port) => {
          const conf = join(dir, `sentinel-${port}.conf`);
          writeFileSync(
            conf,
            [
              `port ${port}`,
              "bind 127.0.0.1",
              `dir ${dir}`,
              `sentinel monitor ${masterName} 127.0.0.1 ${master.port} ${quorum}`,
              `sentinel down-after-milliseconds ${masterName} ${downAfterMs}`,
              `sentinel failover-timeout ${masterName} ${failoverTimeoutMs}`,
              `sentinel parallel-syncs ${masterName} 1`,
              "",
            ].join("\n"),
          );
          return [conf, "--sentinel"];
        },
      })));
    procs.push(...sentinels);

    await waitUntil("sentinels to discover replicas and each other", readyTimeoutMs, async () => {
      for (const s of sentinels) {
        const m = pairs(await command(s.port, ["SENTINEL", "MASTER", masterName]));
        if (m.flags !== "master") return `sentinel ${s.port}: master flags ${m.flags}`;
        const reps = (await command(s.port, ["SENTINEL", "REPLICAS", masterName]) as Reply[]).map(pairs)
          .filter((r) => !/s_down|o_down|disconnected/.test(r.flags ?? ""));
        if (reps.length < nReplicas) return `sentinel ${s.port} knows ${reps.length}/${nReplicas} replicas`;
        const others = (await command(s.port, ["SENTINEL", "SENTINELS", masterName]) as Reply[]).map(pairs)
          .filter((r) => !/s_down|disconnected/.test(r.flags ?? ""));
        if (others.length < nSentinels - 1) {
          return `sentinel ${s.port} knows ${others.length}/${nSentinels - 1} sentinels`;
        }
      }
      await command(sentinels[0]!.port, ["SENTINEL", "CKQUORUM", masterName]);
      return true;
    }, 200);

    const dataProcs = [master, ...replicas];
    const byPort = (port: number) => {
      const p = procs.find((x) => x.port === port);
      if (!p) throw new Error(`no process of this setup on port ${port}`);
      return p;
    };
    const sentinelRootNodes = sentinels.map((s) => ({ host: "127.0.0.1", port: s.port }));

    const currentMaster = async () => {
      let lastErr: unknown;
      for (const s of sentinels) {
        if (s.exited) continue;
        try {
          const [host, port] = await command(s.port, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName]) as string[];
          return { host: host!, port: Number(port) };
        } catch (e) {
          lastErr = e;
        }
      }
      throw new Error(`no sentinel answered GET-MASTER-ADDR-BY-NAME: ${String(lastErr)}`);
    };

    const api: StartedSentinel = {
      master: procInfo(master),
      replicas: replicas.map(procInfo),
      sentinels: sentinels.map(procInfo),
      masterName,
      dir,
      currentMaster,
      async killMaster() {
        const { port } = await currentMaster();
        const p = dataProcs.find((x) => x.port === port);
        if (!p) throw new Error(`sentinels name ${port} as master, which is not a node of this setup`);
        if (p.exited) throw new Error(`master ${port} (pid ${p.pid}) is already dead`);
        process.kill(p.pid, "SIGKILL");
        const t = performance.now();
        await withTimeout(p.exit, 5000, `master pid ${p.pid} exit`).catch(() => {});
        return t;
      },
      async kill(port) {
        await killProc(byPort(port));
      },
      async waitForFailover(oldPort, timeoutMs = 30_000) {
        let found = 0;
        await waitUntil(`a failover away from ${oldPort}`, timeoutMs, async () => {
          let reason = "no sentinel answered";
          for (const s of sentinels) {
            if (s.exited) continue;
            let port: number;
            try {
              const r = await command(s.port, ["SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName], { timeoutMs: 1000 });
              port = Number((r as string[])[1]);
            } catch (e) {
              reason = (e as Error).message;
              continue;
            }
            if (port === oldPort) {
              const m = pairs(await command(s.port, ["SENTINEL", "MASTER", masterName]).catch((): Reply => []));
              reason = `sentinel ${s.port} still names ${oldPort} (flags ${m.flags}, failover-state ${
                m["failover-state"] ?? "-"
              })`;
              continue;
            }
            const role = (await info(port, "replication").catch(() => ({} as Record<string, string>))).role;
            if (role === "master") {
              found = port;
              return true;
            }
            reason = `sentinel ${s.port} names ${port}, which reports role:${role}`;
          }
          return reason;
        }, 50);
        return found;
      },
      nodeClient: (port) => nodeClientFor(byPort(port).port, closers),
      async sentinelClient(options = {}) {
        const c = createSentinel({ name: masterName, sentinelRootNodes, ...options } as SentinelClientOptions);
        c.on("error", () => {});
        c.on("client-error", () => {});
        await c.connect();
        closers.push(() => c.destroy());
        return c;
      },
      async ioredisClient(options = {}) {
        const c = new IORedis({ sentinels: sentinelRootNodes, name: masterName, lazyConnect: true, ...options });
        c.on("error", () => {});
        closers.push(() => Promise.resolve(c.disconnect()));
        await c.connect();
        return c;
      },
      command: (port, ...a) => command(port, a),
      stop: stopAll,
    };
    return api;
  } catch (e) {
    const logs = procs.map((p) => `--- ${p.kind} ${p.port} (pid ${p.pid}) ---\n${p.log().slice(-3000)}`).join("\n");
    await stopAll();
    throw new Error(`startSentinel failed: ${(e as Error).message}\n${logs}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Independent masters

export type Masters = RedisServer[] & { stopAll(): Promise<void> };

/** n independent plain redis-servers (tests/_redis.ts startRedis), each verified to answer with its own pid. */
export async function startMasters(n: number, extra: string[] = []): Promise<Masters> {
  installExitHook();
  const servers: RedisServer[] = [];
  const stopAll = async () => {
    await Promise.all(
      servers.splice(0).map(async (s) => {
        await s.stop().catch(() => {});
        externalPids.delete(s.pid);
        reservedPorts.delete(s.port);
      }),
    );
  };
  try {
    for (let i = 0; i < n; i++) {
      for (let attempt = 1;; attempt++) {
        const s = await startRedis(extra);
        externalPids.add(s.pid);
        const pidOk = await info(s.port, "server").then((r) => Number(r.process_id) === s.pid, () => false);
        if (pidOk && !servers.some((x) => x.port === s.port) && !reservedPorts.has(s.port)) {
          reservedPorts.add(s.port);
          servers.push(s);
          break;
        }
        await s.stop().catch(() => {});
        externalPids.delete(s.pid);
        if (attempt >= 5) throw new Error(`could not start a redis-server on a port of its own (last: ${s.port})`);
      }
    }
  } catch (e) {
    await stopAll();
    throw e;
  }
  return Object.assign([...servers], { stopAll }) as Masters;
}
