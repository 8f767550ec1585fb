// The chaos scenarios of `npm run chaos`: each is one bounded run with one kind of fault.
import {
  commandBlackhole,
  handoffPartition,
  latency,
  oneShots,
  subscriberBlackhole,
  subscriberResetQueued,
} from "./_network.ts";
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
 * "shared": every third section a writer, the others readers; "permits": one of 2. The checker counts, on the
 * resource server's clock, overlaps of exclusive sections with anything, and more than 2 live permit holders at once.
 */
export function kindScenarios(workers: Runtime[] = ALL_RUNTIMES): ScenarioSpec[] {
  const kinds = [
    { kind: "names" as const, what: "one lease over two names" },
    { kind: "elect" as const, what: "leader election (campaign)" },
    { kind: "shared" as const, what: "shared leases (1 section in 3 a writer)" },
    { kind: "permits" as const, what: "2 permits", permits: 2 },
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
 * The checker's self-test (`npm run chaos -- --self-test`, and tests/chaos.node.test.ts): the workers skip the
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
