// Test helpers: checking results (holdsOf, abortedWithin, noCommands), waiting for a queue (queued), and the
// harness's servers and child
// processes re-exported for the tests. The servers come from harness/redis.ts, the one module that starts
// redis-servers (for the tests, the topologies, the benchmarks, the chaos runs and the demo too).
import type { Driver } from "../src/driver.ts";
import { inspect, type RedisLike } from "../mod.ts";
import { waitUntil } from "../harness/wait.ts";

export { type Client, freePort, type RedisServer, sleep, startRedis } from "../harness/redis.ts";
export { until } from "../harness/wait.ts";
export { type Ran, runProcess, runtimeArgs, runtimeName } from "../harness/process.ts";

/**
 * Until `name`'s queue in Redis (read on `on`) holds `count` entries: an acquire queues a moment after it is called
 * (it subscribes first, and its `queued` event comes before the entry). With `past`, until at least `count` have
 * queued: those in the queue plus `past()`, the ones granted meanwhile (a grant leaves the queue before its acquire
 * returns).
 */
export function queued(on: RedisLike, name: string, count = 1, past?: () => number): Promise<void> {
  return waitUntil(`${count} queued for ${name}`, 10_000, async () => {
    const now = (await inspect(on, name)).waiters + (past?.() ?? 0);
    return (past ? now >= count : now === count) || `${now} queued`;
  }, 10);
}

/** The owners of an inspect() result as `{ owner, holds }` (without each hold's kind and remaining time). */
export function holdsOf(info: { readonly owners: ReadonlyArray<{ readonly owner: string; readonly holds: number }> }) {
  return info.owners.map(({ owner, holds }) => ({ owner, holds }));
}

/** The reason `signal` aborts with, or "timeout" if it does not within `ms`. */
export function abortedWithin(signal: AbortSignal, ms: number): Promise<unknown> {
  if (signal.aborted) return Promise.resolve(signal.reason);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve("timeout"), ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve(signal.reason);
    }, { once: true });
  });
}

/**
 * A client (a Driver) that sends nothing: every command fails the call with "no command may be sent" and is
 * counted in `sent`. An argument refused while `sent` stays 0 was refused before any Redis command.
 *
 * @example
 * ```ts
 * const idle = noCommands();
 * await assert.rejects(acquire(idle, ""), RangeError);
 * assert.equal(idle.sent, 0);
 * ```
 */
export function noCommands(): Driver & { sent: number } {
  const refuse = () => {
    d.sent++;
    return Promise.reject(new Error("no command may be sent"));
  };
  const d = { sent: 0, evalScript: refuse, evalSource: refuse, loadScript: refuse, command: refuse };
  return d;
}

/** How `p` settled: its value or its error, and the ms it took. */
export async function settled<T>(p: Promise<T>): Promise<{ value?: T; error?: unknown; ms: number }> {
  const t0 = performance.now();
  try {
    return { value: await p, ms: performance.now() - t0 };
  } catch (error) {
    return { error, ms: performance.now() - t0 };
  }
}
