// The chaos scenarios of `npm run chaos`: each is one bounded run with one kind of fault.
import {
  commandBlackhole,
  handoffPartition,
  latency,
  oneShots,
  subscriberBlackhole,
  subscriberResetQueued,
} from "./_network.ts";
import { killPrimary, killSlotMaster, migrateSlot } from "./_topology.ts";
import {
  clientKill,
  clientPause,
  debugSleep,
  evictionPulses,
  restart,
  type Runtime,
  type ScenarioSpec,
  scriptFlush,
} from "./_scenario.ts";

/** Two workers on each runtime (worker indexes: 0–1 node, 2–3 bun, 4–5 deno). */
export const ALL_RUNTIMES: Runtime[] = ["node", "node", "bun", "bun", "deno", "deno"];

export function scenarios(workers: Runtime[] = ALL_RUNTIMES): ScenarioSpec[] {
  // One victim per runtime present (its first worker), faulted in turn.
  const firstOf = (rt: Runtime) => workers.indexOf(rt);
  const victimIdx = (["node", "bun", "deno"] as Runtime[]).map(firstOf).filter((i) => i >= 0);
  return [
    {
      name: "baseline",
      fault: "none",
      workers,
      durationMs: 4_000,
    },
    {
      name: "sigstop",
      fault: "holder SIGSTOPped 1.2 s (4× its 300 ms watchdog lease), then SIGCONT",
      workers,
      durationMs: 1_000 + victimIdx.length * 1_700,
      victims: victimIdx.map((worker, k) => ({
        worker,
        fault: { kind: "pause" as const, atMs: 700 + k * 1_700, sleepMs: 150 },
        stopMs: 1_200,
      })),
    },
    {
      name: "event-loop-block",
      fault: "holder blocks its event loop synchronously for 1.5 s (fixed 300 ms lease)",
      workers,
      leaseMs: 300,
      // Longer than the default 1 s claim window too: a victim blocked right after a handoff message never claims
      // its grant, and the other waiters take the lease only when the claim window ends (not when the 300 ms
      // lease key expires), so with a 1 s block its late write raced the next holder's write.
      durationMs: 1_000 + victimIdx.length * 2_000,
      victims: victimIdx.map((worker, k) => ({
        worker,
        fault: { kind: "block" as const, atMs: 700 + k * 2_000, blockMs: 1_500 },
      })),
    },
    {
      name: "script-flush",
      fault: "SCRIPT FLUSH every 300 ms",
      workers,
      durationMs: 4_000,
      inject: scriptFlush(300),
    },
    {
      name: "redis-restart",
      fault: "lock redis-server SIGKILLed and restarted empty (150 ms down) at 1.3 s and 2.9 s",
      workers,
      durationMs: 4_500,
      inject: restart([1_300, 2_900], 150),
      losesLeaseData: true,
    },
    {
      name: "client-pause",
      fault: "CLIENT PAUSE 800 ALL at 1 s and 2.5 s (lease 300 ms)",
      workers,
      durationMs: 4_000,
      inject: clientPause([1_000, 2_500], 800),
    },
    {
      name: "debug-sleep",
      fault: "DEBUG SLEEP 0.8 at 1 s and 2.5 s (lease 300 ms)",
      workers,
      durationMs: 4_000,
      lockArgs: ["--enable-debug-command", "yes"],
      inject: debugSleep([1_000, 2_500], 800),
    },
    {
      name: "client-kill",
      fault: "CLIENT KILL every 400 ms, alternating TYPE normal / TYPE pubsub",
      workers,
      durationMs: 4_000,
      inject: clientKill(400),
    },
    {
      name: "volatile-lru",
      fault: "maxmemory-policy volatile-lru; memory pulses evict the lease keys every 600 ms (150 ms sections)",
      workers,
      durationMs: 5_000,
      csSleepMs: 150,
      lockArgs: ["--maxmemory-policy", "volatile-lru"],
      inject: evictionPulses(600),
      losesLeaseData: true,
    },
    ...networkScenarios(workers),
    ...kindScenarios(workers),
    ...topologyScenarios(workers),
    ...resourceScenarios(workers),
    ...lockDelayScenarios(workers),
  ];
}

/**
 * The resource scenarios (issue 28, chaos/_resource.ts): every section also sells one item through the fence
 * helpers, at a Redis resource (`fencedEval` on the resource redis-server, not the lock server) or a PostgreSQL one
 * (`fencedSqlTransaction` through `pg`, on a throwaway server), while a holder is paused past its lease and then
 * makes its write with its old fence:
 *
 * - resource-<target>-sigstop: the victim (the first worker of each runtime, in turn) SIGSTOPped 1.2 s inside a
 *   section, 300 ms watchdog lease, then SIGCONT;
 * - resource-<target>-blocked-loop: the victim blocks its own event loop 1.5 s inside a section (fixed 300 ms
 *   lease; the worker applies it at the time the runner gave it);
 * - resource-<target>-partition: the victim's route to the lock server (its proxy) cut both ways, commands and
 *   subscriber, for 2 s from inside a section (watchdog lease 300 ms, claim window 300 ms); it writes 1.5 s in,
 *   still cut off from the lock server: the resource is reached directly, so its late write gets there.
 *
 * With the check on the resource's log must show 0 stale writes accepted and the workers > 0 refused; each has an
 * `-unchecked` twin (plain EVAL / plain BEGIN … COMMIT) that must show stale writes accepted > 0, so the count is
 * shown able to see them. `extra` is spread over every spec (e.g. `acquireOptions` for a scenario about an acquire
 * option, named by the caller).
 */
export function resourceScenarios(
  workers: Runtime[] = ALL_RUNTIMES,
  extra: Partial<ScenarioSpec> = {},
): ScenarioSpec[] {
  const victimIdx = (["node", "bun", "deno"] as Runtime[]).map((rt) => workers.indexOf(rt)).filter((i) => i >= 0);
  const faults: Array<Omit<ScenarioSpec, "name" | "workers">> = [
    {
      fault: "holder SIGSTOPped 1.2 s inside its section (300 ms watchdog lease), then SIGCONT; then its write",
      watchdogMs: 300,
      durationMs: 1_000 + victimIdx.length * 1_700,
      victims: victimIdx.map((worker, k) => ({
        worker,
        fault: { kind: "pause" as const, atMs: 700 + k * 1_700, sleepMs: 150 },
        stopMs: 1_200,
      })),
    },
    {
      fault: "holder blocks its event loop 1.5 s inside its section (fixed 300 ms lease); then its write",
      leaseMs: 300,
      durationMs: 1_000 + victimIdx.length * 2_000,
      victims: victimIdx.map((worker, k) => ({
        worker,
        fault: { kind: "block" as const, atMs: 700 + k * 2_000, blockMs: 1_500 },
      })),
    },
    {
      fault: "holder partitioned from the lock server 2 s (both connections, both ways, through its proxy) inside " +
        "its section (300 ms watchdog lease, 300 ms claim window); its write 1.5 s in, the resource reachable",
      watchdogMs: 300,
      claimMs: NET_CLAIM_MS,
      durationMs: 1_000 + victimIdx.length * 2_500,
      victims: victimIdx.map((worker, k) => ({
        worker,
        fault: { kind: "partition" as const, atMs: 700 + k * 2_500, sleepMs: 1_500 },
        stopMs: 2_000,
      })),
    },
  ];
  const names = ["sigstop", "blocked-loop", "partition"];
  return (["redis", "pg"] as const).flatMap((target) =>
    faults.flatMap((f, i) =>
      [true, false].map((check): ScenarioSpec => ({
        ...f,
        workers,
        name: `resource-${target}-${names[i]}${check ? "" : "-unchecked"}`,
        fault: `${target === "redis" ? "Redis (fencedEval)" : "PostgreSQL (fencedSqlTransaction)"}${
          check ? "" : ", check OFF (plain writes)"
        }: ${f.fault}`,
        resource: { targets: [target], check },
        ...extra,
      }))
    )
  );
}

/**
 * The lock-delay scenario (issue 28): a resource that cannot check a fence (plain writes, check off), and leases
 * taken with `lockDelayMs: 1500`. The victim is SIGSTOPped 1.2 s inside its section (300 ms watchdog lease), so its
 * lease expires without a release; the delay keeps it from everyone until 1.8 s, so the victim's late write (made
 * on waking, its lease lost) comes before any other grant. Checked: no grant to another worker within the delay
 * after a hold that ended without a release (the servers' clock, lockDelay in the analysis), 0 stale writes
 * accepted at the resource although nothing checks a fence there, and at least one late write made and accepted.
 * Its twin without the delay is resource-<target>-sigstop-unchecked, which must count stale writes accepted.
 */
export function lockDelayScenarios(workers: Runtime[] = ALL_RUNTIMES): ScenarioSpec[] {
  const sigstop = resourceScenarios(workers).filter((s) => s.name.endsWith("-sigstop-unchecked"));
  return sigstop.map((s) => ({
    ...s,
    name: s.name.replace("-sigstop-unchecked", "-sigstop-lockdelay"),
    fault: `${s.fault}; leases with lockDelayMs 1500 (the delay outlasts the pause)`,
    acquireOptions: { ...s.acquireOptions, lockDelayMs: 1_500 },
    resource: { ...s.resource!, lockDelayCovers: true },
  }));
}

/**
 * The topology scenarios (chaos/_topology.ts): the lock side is a Redis Cluster or a Sentinel group, reached with
 * the driver's own cluster / sentinel client (no proxies), and the fault is a topology change while every worker
 * loops; the fenced register stays on its own plain server. Watchdog lease 1000 ms (renewed every 333 ms: a
 * migration's ASK window does not cost every lease). Reported besides the usual checks: overlaps with an older
 * holder told / not told before the newer grant, hung acquires (not settled within waitMs + 5 s), and the time
 * from each change to the first grant after it; the bound (2 s) applies from the change named by firstGrantFrom.
 * In the kill scenarios the first worker's first section is long (11 s cluster, 8 s sentinel: it holds from the
 * start, through the kill, until after the lease is granted again), so its late write tests fencing across the
 * failover, and the waiters queued behind it at the kill test the handoff across it.
 *
 * - topo-slot-migration: 3 masters, no replicas; the lease name's slot migrated live to the next master at 2 s
 *   and at 6 s (IMPORTING/MIGRATING, 300 ms ASK window, MIGRATE, SETSLOT NODE). Bound from each "migrated".
 * - topo-master-kill[-replicas1][-v5]: 3 masters + 1 replica each, cluster-node-timeout 1000; the master of the
 *   slot SIGKILLed at 2.5 s, its replica promoted, the killed node restarted (empty) 5 s after the promotion and
 *   rejoining as a replica (5 s: later than the waitMs of the acquires waiting at the kill, so that a grant the
 *   restart makes possible is told apart from one that only follows their timeout). node-redis v4 cluster (v5 with -v5). Default options: bound from "promoted", and the
 *   lease data may be lost with the master (unreplicated grants: losesLeaseData). `replicas: 1`: no grant is
 *   possible until the promoted master has a replica again, so the bound is from "rejoined as replica", and any
 *   holder unaware at a re-grant is a failure.
 * - topo-sentinel-kill[-replicas1][-ioredis]: primary + 2 replicas + 3 sentinels (down-after 2000 ms, the harness's
 *   default for two replicas), node-redis v5 createSentinel (ioredis in sentinel mode with -ioredis: run its workers
 *   on Node and Bun, where ioredis runs); the primary SIGKILLed at 2 s (not restarted). The second
 *   replica is what `replicas: 1` needs after the failover: bound from "replica attached" then, else "promoted".
 */
export function topologyScenarios(workers: Runtime[] = ALL_RUNTIMES): ScenarioSpec[] {
  const base = { workers, watchdogMs: 1_000 };
  const kill = (driver: "redis4" | "redis5", replicas: number): ScenarioSpec => ({
    ...base,
    name: `topo-master-kill${replicas ? "-replicas1" : ""}${driver === "redis5" ? "-v5" : ""}`,
    fault: `cluster 3 masters + 3 replicas (node timeout 1 s), node-redis ${driver === "redis5" ? "v5" : "v4"}` +
      `${replicas ? ", replicas: 1" : ""}: the slot's master SIGKILLed at 2.5 s, replica promoted, old master ` +
      "restarted 5 s later (rejoins as replica)",
    durationMs: 16_000,
    longHolder: { worker: 0, csSleepMs: 11_000 },
    replicas: replicas || undefined,
    losesLeaseData: replicas === 0,
    // Across a failover nobody can be granted the lease until a master (and for replicas: 1 a replica) is back:
    // the idle check does not apply; the first grant after the change is the figure (topology.firstGrantFrom).
    idleBoundMs: 16_000,
    topology: {
      kind: "cluster",
      cluster: { masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1_000 },
      driver,
      inject: killSlotMaster(2_500, 5_000),
      firstGrantFrom: replicas ? "rejoined as replica" : "promoted",
    },
  });
  const sentinel = (replicas: number, driver: "redis5" | "ioredis" = "redis5"): ScenarioSpec => ({
    ...base,
    name: `topo-sentinel-kill${replicas ? "-replicas1" : ""}${driver === "ioredis" ? "-ioredis" : ""}`,
    fault: `sentinel primary + 2 replicas + 3 sentinels, ${
      driver === "ioredis" ? "ioredis in sentinel mode" : "node-redis v5 createSentinel"
    }${replicas ? ", replicas: 1" : ""}: the primary SIGKILLed at 2 s, a replica promoted`,
    durationMs: 12_000,
    longHolder: { worker: 0, csSleepMs: 8_000 },
    replicas: replicas || undefined,
    losesLeaseData: replicas === 0,
    idleBoundMs: 12_000,
    topology: {
      kind: "sentinel",
      sentinel: { replicas: 2, sentinels: 3 },
      driver,
      inject: killPrimary(2_000),
      firstGrantFrom: replicas ? "replica attached" : "promoted",
    },
  });
  return [
    {
      ...base,
      name: "topo-slot-migration",
      fault: "cluster 3 masters, node-redis v4: the lease's slot migrated live to the next master at 2 s and 6 s " +
        "(300 ms ASK window)",
      durationMs: 9_000,
      topology: {
        kind: "cluster",
        cluster: { masters: 3, replicasPerMaster: 0 },
        driver: "redis4",
        inject: migrateSlot([2_000, 6_000], 300),
        firstGrantFrom: "migrated",
      },
    },
    kill("redis4", 0),
    kill("redis4", 1),
    kill("redis5", 0),
    kill("redis5", 1),
    sentinel(0),
    sentinel(1),
    sentinel(0, "ioredis"),
    sentinel(1, "ioredis"),
  ];
}

/**
 * The workers whose network route a network scenario faults: the first worker of each runtime, as long as at
 * least one worker is left that is never faulted (the idle check counts only the waiting of non-faulted workers);
 * otherwise all but the last worker.
 */
export function routeVictims(workers: Runtime[]): number[] {
  const firsts = (["node", "bun", "deno"] as Runtime[]).map((rt) => workers.indexOf(rt)).filter((i) => i >= 0);
  if (firsts.length < workers.length) return firsts;
  return workers.slice(0, -1).map((_, i) => i);
}

/** Claim window and watchdog lease of the network scenarios, ms: short, so that each runs a few seconds. */
export const NET_CLAIM_MS = 300;

/**
 * The network fault scenarios: every worker reaches the lock server through its own fault-injecting proxy; the
 * victims (`routeVictims`) have one class of fault injected on their route, in turn (or all at once for latency)
 * while all workers contend. Claim window 300 ms, watchdog lease 300 ms: idle bound 2 × 300 + 500 = 1100 ms.
 */
export function networkScenarios(workers: Runtime[] = ALL_RUNTIMES): ScenarioSpec[] {
  const faulted = routeVictims(workers);
  const n = Math.max(1, faulted.length);
  const base = { workers, faulted, claimMs: NET_CLAIM_MS, watchdogMs: 300 };
  return [
    {
      ...base,
      name: "net-latency",
      fault: "20–40 ms latency (20 ms + up to 20 ms jitter) each way on each victim's route, whole run",
      durationMs: 4_000,
      inject: latency(20, 20),
    },
    {
      ...base,
      name: "net-cmd-blackhole",
      fault: "victim's command connection half-open (both directions swallowed, no RST) 1.5 s from a moment it " +
        "begins a hold (fixed owners; its sections take 400 ms, so it loses the 300 ms lease mid-section), then healed",
      durationMs: 900 + n * 3_000,
      faultedCsSleepMs: 400,
      fixedOwners: faulted,
      inject: commandBlackhole(1_500),
    },
    {
      ...base,
      name: "net-sub-deaf",
      fault: "victim's subscriber deaf (Redis → client held back) 2 s, then healed: held messages arrive late",
      durationMs: 900 + n * 2_500,
      inject: subscriberBlackhole(2_000),
    },
    {
      ...base,
      name: "net-sub-reset",
      fault: "victim's subscriber reset while it heads the queue, kept from reconnecting until the handoff (whose " +
        "PUBLISH reaches nobody), every 250 ms",
      durationMs: 4_500,
      inject: subscriberResetQueued(250),
    },
    {
      ...base,
      name: "net-reset-mid-command",
      fault: "victim's command connection reset after its next request was sent (may or may not run), every 200 ms",
      durationMs: 4_000,
      inject: oneShots("resetNext", 200),
    },
    {
      ...base,
      name: "net-lost-reply",
      fault: "victim's next reply lost after the command ran (then reset), every 200 ms; victims alternate " +
        "fixed / random owners",
      durationMs: 4_000,
      fixedOwners: faulted.filter((_, k) => k % 2 === 0),
      inject: oneShots("loseNextReply", 200),
    },
    {
      ...base,
      name: "net-lost-request",
      fault: "victim's next request lost before it ran (then reset), every 200 ms",
      durationMs: 4_000,
      inject: oneShots("loseNextRequest", 200),
    },
    {
      ...base,
      name: "net-handoff-partition",
      fault: "victim partitioned by the grant message to it (subscriber cut, command connection blackholed) 2 s, " +
        "then healed",
      durationMs: 800 + n * 2_800,
      inject: handoffPartition(2_000),
    },
  ];
}

/**
 * Every kind of lease under every network fault of `networkScenarios`, each as that scenario runs it for the lock
 * (`kind-<kind>-<fault>`, e.g. kind-permits-lost-reply): "names": one lease over two names; "elect": campaign();
 * "shared": every third section a writer, the others readers; "permits": one of 2; "weighted": 3 permits, every other
 * worker taking 2 at once and the others 1. The checker counts, on the resource server's clock, overlaps of
 * exclusive sections with anything, and more than n permits taken by live holders at once.
 */
export function kindScenarios(workers: Runtime[] = ALL_RUNTIMES): ScenarioSpec[] {
  const kinds = [
    { kind: "names" as const, what: "one lease over two names" },
    { kind: "elect" as const, what: "leader election (campaign)" },
    { kind: "shared" as const, what: "shared leases (1 section in 3 a writer)" },
    { kind: "permits" as const, what: "2 permits", permits: 2 },
    { kind: "weighted" as const, what: "3 permits, weights 2 and 1", permits: 3 },
  ];
  return kinds.flatMap(({ kind, what, permits }) =>
    networkScenarios(workers).map((s) => ({
      ...s,
      kind,
      permits,
      name: `kind-${kind}-${s.name.replace(/^net-/, "")}`,
      fault: `${what}: ${s.fault}`,
    }))
  );
}

/**
 * The checker's self-test (`npm run chaos -- --self-test`, and tests/chaos.node.alone.test.ts): the workers skip the
 * lock altogether, so their sections really overlap on the resource server and the analysis must report live
 * overlaps and lost updates, i.e. fail. A checker that passes this run cannot see a mutual-exclusion violation.
 */
export function selfTestScenario(workers: Runtime[] = ["node", "node", "node"], durationMs = 1_500): ScenarioSpec {
  return {
    name: "self-test-no-lock",
    fault: "none, but the workers do not acquire the lease at all (checker self-test: must be reported)",
    workers,
    durationMs,
    noLock: true,
  };
}
