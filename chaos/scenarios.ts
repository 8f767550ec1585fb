// The chaos scenarios of `npm run chaos`: each is one bounded run with one kind of fault.
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
      fault: "holder blocks its event loop synchronously for 1 s (fixed 300 ms lease)",
      workers,
      leaseMs: 300,
      durationMs: 1_000 + victimIdx.length * 1_600,
      victims: victimIdx.map((worker, k) => ({
        worker,
        fault: { kind: "block" as const, atMs: 700 + k * 1_600, blockMs: 1_000 },
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
    },
  ];
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
