// Harness: a throwaway Redis Cluster on free loopback ports (harness/redis.ts starts every node):
// masters and replicas, created with redis-cli --cluster create (or by hand for fewer than 3 masters), with live slot
// migration and node kills for the tests. Administrative commands go over the one-shot RESP client (resp.ts).
//
//   const c = await startCluster();                 // 3 masters + 3 replicas
//   const cluster = await c.cluster();              // node-redis v4 cluster client, closed by c.stop()
//   await c.migrateSlot(c.slotOf("k"), otherPort);  // live slot migration (MIGRATING/IMPORTING + MIGRATE)
//   await c.stop();
import { spawn } from "node:child_process";
import type { Buffer } from "node:buffer";
import { join } from "node:path";
import { createCluster } from "redis";
import { slotOf } from "../src/adapters/_slot.ts";
import { removeDir, tempDir, tryKill } from "./cleanup.ts";
import { type Client, connectClient, type RedisServer, startServer } from "./redis.ts";
import { type Arg, command, parseInfo, type Reply } from "./resp.ts";
import { ownedBy, sleep, waitUntil } from "./wait.ts";

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
  proc: RedisServer;
}

/** After the defaults of harness/redis.ts (port, bind, no persistence, dir). */
function clusterNodeArgs(dir: string, nodeTimeoutMs: number) {
  return ({ port, busPort }: { port: number; busPort: number }) => [
    "--cluster-enabled",
    "yes",
    "--cluster-port",
    String(busPort),
    "--cluster-config-file",
    join(dir, `nodes-${port}.conf`),
    "--cluster-node-timeout",
    String(nodeTimeoutMs),
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
  const dir = tempDir("cluster");
  const { procs, closers, stop: stopAll } = ownedBy<RedisServer>(dir, removeDir);
  try {
    const total = masters * (1 + replicasPerMaster);
    const args = clusterNodeArgs(dir, opts.nodeTimeoutMs ?? 2000);
    for (let i = 0; i < total; i++) procs.push(await startServer({ kind: "cluster node", bus: true, dir, args }));

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
      nodeClient: (port) => connectClient(byPort(port).proc.url, closers),
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
        await byPort(port).proc.kill();
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
async function createClusterByHand(procs: RedisServer[], ids: string[], masters: number, replicasPerMaster: number) {
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
