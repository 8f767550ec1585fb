// The lock side of the topology scenarios (`topo-*` in chaos/scenarios.ts): instead of one plain lock
// redis-server behind per-worker fault proxies, a Redis Cluster or a Sentinel group from the test harness
// (harness/cluster.ts, sentinel.ts), which the workers reach with the driver's own cluster or sentinel client
// (chaos/worker.ts, WorkerConfig.lock), directly: the fault is the topology change itself (a slot migrated live, a
// master or primary SIGKILLed and its replica promoted). The resource server stays a separate plain redis-server.
//
// chaos/_scenario.ts's runScenario decides the lock side in one place: ScenarioSpec.topology absent, the plain
// server and its proxies; present, startTopology(spec.topology) here. Each change an injector makes is noted as a
// fault event with `change: true` and `srvMs`, the servers' clock (TIME of a node of the topology, on this host's
// clock like every server's) right after the change took effect; the checker measures from it the first grant
// after the change (chaos/_analyze.ts, TopologyReport).
import { type ClusterStartOptions, startCluster, type StartedCluster } from "../harness/cluster.ts";
import type { RedisServer } from "../harness/redis.ts";
import { command, parseInfo, type Reply } from "../harness/resp.ts";
import { type SentinelStartOptions, type StartedSentinel, startSentinel } from "../harness/sentinel.ts";
import { slotOf } from "../src/adapters/_slot.ts";
import { type LockTarget, wall } from "./_protocol.ts";

/** What a topology injector may act on; it runs from GO until `until` (wall ms). */
export interface TopologyContext {
  startWall: number;
  until: number;
  /** The lease's hash key (its slot is the one the lease lives in). */
  hash: string;
  /** Record one fault event; a topology change has `{ change: true, srvMs }` (see `changed`). */
  note(event: string, detail?: Record<string, unknown>): void;
}

interface Common {
  /**
   * The change event (its name) after which the first grant must come within `firstGrantBoundMs`: for each
   * occurrence, the time from it to the first grant after it (the report shows the worst).
   */
  firstGrantFrom: string;
  /** Default 2000 ms. */
  firstGrantBoundMs?: number;
}

export type TopologySpec =
  | Common & {
    kind: "cluster";
    /** Cluster layout (harness/cluster.ts). */
    cluster: ClusterStartOptions;
    /** The workers' cluster client: node-redis v4 (`redis`) or v5 (`redis5`). */
    driver: "redis4" | "redis5";
    inject: (c: StartedCluster, ctx: TopologyContext) => Promise<void>;
  }
  | Common & {
    kind: "sentinel";
    /** Sentinel group layout (harness/sentinel.ts). */
    sentinel: SentinelStartOptions;
    /** The workers' sentinel client: node-redis v5's createSentinel, or ioredis in sentinel mode (default redis5). */
    driver?: "redis5" | "ioredis";
    inject: (s: StartedSentinel, ctx: TopologyContext) => Promise<void>;
  };

/** A started topology, as the runner uses it. */
export interface Topology {
  /** What every worker connects to. */
  target: LockTarget;
  /** One line for the logs: the layout. */
  describe: string;
  /** Ports of the live masters (cluster) or of the current primary (sentinel), for the leftovers check. */
  masterPorts(): Promise<number[]>;
  /** Run the spec's injector. */
  inject(ctx: TopologyContext): Promise<void>;
  stop(): Promise<void>;
}

export async function startTopology(spec: TopologySpec): Promise<Topology> {
  if (spec.kind === "cluster") {
    const c = await startCluster(spec.cluster);
    return {
      target: { kind: "cluster", driver: spec.driver, rootNodes: c.rootNodes.map((n) => n.url) },
      describe: `cluster ${c.masters().length} masters + ${c.replicas().length} replicas (${spec.driver})`,
      async masterPorts() {
        const ports: number[] = [];
        for (const n of c.nodes.filter((x) => x.alive)) {
          const role = await command(n.port, ["ROLE"], { timeoutMs: 1_000 }).catch(() => undefined) as Reply[];
          if (role?.[0] === "master") ports.push(n.port);
        }
        return ports;
      },
      inject: (ctx) => spec.inject(c, ctx),
      stop: () => c.stop(),
    };
  }
  const s = await startSentinel(spec.sentinel);
  return {
    target: {
      kind: "sentinel",
      driver: spec.driver ?? "redis5",
      name: s.masterName,
      sentinels: s.sentinels.map((x) => ({ host: "127.0.0.1", port: x.port })),
    },
    describe: `sentinel: primary + ${s.replicas.length} replicas + ${s.sentinels.length} sentinels (${
      spec.driver ?? "redis5"
    })`,
    masterPorts: async () => [(await s.currentMaster()).port],
    inject: (ctx) => spec.inject(s, ctx),
    stop: () => s.stop(),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Topology changes

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const sleepUntil = (t: number) => sleep(Math.max(0, t - wall()));

/** A node's TIME in ms (every server on this host reads the same clock). */
export async function srvNow(port: number): Promise<number> {
  const [sec, usec] = await command(port, ["TIME"], { timeoutMs: 1_000 }) as string[];
  return Number(sec) * 1000 + Number(usec) / 1000;
}

/** Note a topology change on the servers' clock, read from `port` right now. */
async function changed(ctx: TopologyContext, port: number, event: string, detail: Record<string, unknown> = {}) {
  const srvMs = await srvNow(port);
  ctx.note(event, { change: true, srvMs, ...detail });
  return srvMs;
}

async function role(port: number): Promise<string | undefined> {
  const r = await command(port, ["ROLE"], { timeoutMs: 500 }).catch(() => undefined) as Reply[] | undefined;
  return r?.[0] === undefined ? undefined : String(r[0]);
}

/** Poll every 10 ms until `check` returns a value (or throw after `timeoutMs`). */
async function poll<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = wall() + timeoutMs;
  for (;;) {
    const v = await check().catch(() => undefined);
    if (v !== undefined) return v;
    if (wall() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

/**
 * The lease's slot migrated live, once at each of `atMs`, each time to the next master (CLUSTER SETSLOT
 * IMPORTING / MIGRATING, the keys MIGRATEd after a `pauseMs` ASK window, SETSLOT NODE on every master:
 * StartedCluster.migrateSlot, as tests/cluster.test.ts does). Changes: "migration started", "migrated" (every node
 * agrees on the new owner).
 */
export function migrateSlot(atMs: number[], pauseMs = 300): (c: StartedCluster, ctx: TopologyContext) => Promise<void> {
  return async (c, ctx) => {
    const slot = slotOf(ctx.hash);
    for (const [i, ms] of atMs.entries()) {
      await sleepUntil(ctx.startWall + ms);
      await c.refresh();
      const from = c.ownerOf(slot);
      const masters = c.masters().filter((m) => m.alive);
      const to = masters[(masters.indexOf(from) + 1) % masters.length]!;
      await changed(ctx, from.port, "migration started", { n: i + 1, slot, from: from.port, to: to.port });
      const r = await c.migrateSlot(slot, to.port, { pauseMs });
      await changed(ctx, to.port, "migrated", { n: i + 1, slot, keys: r.keys });
    }
  };
}

/**
 * The master owning the lease's slot SIGKILLed at `atMs`; changes: "killed", "promoted" (its replica answers ROLE
 * with "master", polled every 10 ms), then, `restartAfterMs` later, the killed node is started again on its port
 * with its cluster config (empty: no persistence) — "restarted" — and rejoins as a replica of the promoted node —
 * "rejoined as replica" (ROLE "slave", link up). The restart gives a client that never rediscovers (node-redis
 * v4) its old address back, and the promoted master a replica to acknowledge WAIT (`replicas: 1`).
 */
export function killSlotMaster(
  atMs: number,
  restartAfterMs = 3_000,
): (c: StartedCluster, ctx: TopologyContext) => Promise<void> {
  return async (c, ctx) => {
    await sleepUntil(ctx.startWall + atMs);
    await c.refresh();
    const victim = c.ownerOf(slotOf(ctx.hash));
    const replica = c.nodes.find((n) => n.alive && n.role === "replica" && n.masterId === victim.id);
    if (!replica) throw new Error(`master ${victim.port} has no live replica`);
    // The harness keeps the node's server handle on the node (harness/cluster.ts, CNode.proc).
    const proc = (victim as unknown as { proc?: RedisServer }).proc;
    if (!proc?.restart) throw new Error("the cluster harness no longer exposes the node's server (CNode.proc)");
    await c.kill(victim.port);
    const killedAt = await changed(ctx, replica.port, "killed", { port: victim.port });
    await poll("the replica's promotion", 30_000, async () => (await role(replica.port)) === "master" || undefined);
    const promotedAt = await changed(ctx, replica.port, "promoted", { port: replica.port });
    ctx.note("kill to promotion", { ms: Math.round(promotedAt - killedAt) });
    await sleep(restartAfterMs);
    await proc.restart();
    await changed(ctx, victim.port, "restarted", { port: victim.port });
    await poll("the old master to rejoin as a replica", 30_000, async () => {
      if ((await role(victim.port)) !== "slave") return undefined;
      const r = parseInfo(String(await command(victim.port, ["INFO", "replication"])));
      return r.master_link_status === "up" && Number(r.master_port) === replica.port || undefined;
    });
    await changed(ctx, victim.port, "rejoined as replica", { port: victim.port, master: replica.port });
  };
}

/**
 * The Sentinel group's primary SIGKILLed at `atMs` (not restarted); changes: "killed", "promoted" (a replica
 * answers ROLE with "master"), "replica attached" (the promoted primary has an online replica again: the other
 * replica, reconfigured by the sentinels, which `replicas: 1` needs).
 */
export function killPrimary(atMs: number): (s: StartedSentinel, ctx: TopologyContext) => Promise<void> {
  return async (s, ctx) => {
    await sleepUntil(ctx.startWall + atMs);
    const old = (await s.currentMaster()).port;
    const replicas = s.replicas.filter((r) => r.alive && r.port !== old);
    await s.killMaster();
    const killedAt = await changed(ctx, replicas[0]!.port, "killed", { port: old });
    const promoted = await poll("a replica's promotion", 30_000, async () => {
      for (const r of replicas) if ((await role(r.port)) === "master") return r.port;
      return undefined;
    });
    const promotedAt = await changed(ctx, promoted, "promoted", { port: promoted });
    ctx.note("kill to promotion", { ms: Math.round(promotedAt - killedAt) });
    await poll("a replica attached to the new primary", 30_000, async () => {
      const r = parseInfo(String(await command(promoted, ["INFO", "replication"])));
      return /state=online/.test(r.slave0 ?? "") || undefined;
    });
    await changed(ctx, promoted, "replica attached", { port: promoted });
  };
}
