// An upstream that serves at most `limit` calls at once (more get "429 Too Many Requests"), called by several
// callers, each with its own Redis connection (as separate processes would be), for a fixed time. The first caller
// is heavy: each of its rounds makes `heavy` calls at once (a batch), so it needs that many of the permits. Three
// variants:
//   no limit            every caller calls as soon as it can, and retries a 429 after 10 ms
//   polling semaphore   redis-semaphore's Semaphore(limit) around each call, MultiSemaphore(limit, heavy) around a
//                       batch (default settings: they poll every 10 ms)
//   redlease permits    withLock(client, name, call, { permits: limit, weight }), weight 1 or `heavy`: waiters
//                       queue, first come first served, and a release wakes the waiters that now fit
import { Redis as IORedis } from "ioredis";
import { createClient } from "redis";
import { withLock } from "../../mod.ts";

export const UPSTREAM_VARIANTS = ["no limit", "polling semaphore", "redlease permits"] as const;
export type UpstreamVariant = typeof UPSTREAM_VARIANTS[number];

export interface UpstreamConfig {
  readonly callers: number;
  /** Calls the upstream serves at once. */
  readonly limit: number;
  /** Calls the first caller makes at once each round (the permits it takes). */
  readonly heavy: number;
  /** How long a call takes, ms. */
  readonly callMs: number;
  readonly seconds: number;
}

export interface UpstreamResult {
  readonly variant: UpstreamVariant;
  /** Calls the upstream served. */
  readonly served: number;
  /** Calls it refused with 429 (over the limit). */
  readonly rejected: number;
  /** The most calls in flight at the upstream at once (the limit is what it can take). */
  readonly maxInFlight: number;
  /** Fewest / most calls served per caller, the heavy one left out. */
  readonly minPerCaller: number;
  readonly maxPerCaller: number;
  /** Rounds the heavy caller completed (each `heavy` calls at once). */
  readonly heavyRounds: number;
  /** From wanting to call to the call's end, ms. */
  readonly p50Ms: number;
  readonly p99Ms: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function pct(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export async function runUpstream(
  url: string,
  ns: string,
  variant: UpstreamVariant,
  c: UpstreamConfig,
): Promise<UpstreamResult> {
  let inFlight = 0, maxInFlight = 0, rejected = 0;
  /** The upstream: serves a call in callMs, or refuses it at once when `limit` calls are in flight. */
  const upstream = async (): Promise<boolean> => {
    if (inFlight >= c.limit) {
      rejected++;
      // Refused calls still arrived: they count towards what the upstream saw at once.
      maxInFlight = Math.max(maxInFlight, inFlight + 1);
      return false;
    }
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    await sleep(c.callMs);
    inFlight--;
    return true;
  };
  const name = `${ns}:upstream:${variant.replace(/ /g, "-")}`;
  const node = await Promise.all(Array.from({ length: c.callers }, async () => {
    const cl = createClient({ url });
    cl.on("error", () => {});
    return await cl.connect();
  }));
  const io = variant === "polling semaphore"
    ? Array.from({ length: c.callers }, () => new IORedis(url, { lazyConnect: false, maxRetriesPerRequest: 1 }))
    : [];
  // deno-lint-ignore no-explicit-any
  const { Semaphore, MultiSemaphore }: any = variant === "polling semaphore" ? await import("redis-semaphore") : {};
  const served = new Array<number>(c.callers).fill(0);
  const latencies: number[] = [];
  const end = performance.now() + c.seconds * 1000;
  try {
    await Promise.all(node.map(async (client, i) => {
      const weight = i === 0 ? c.heavy : 1;
      // A round: `weight` calls at once, served only if every one was.
      const calls = async () => (await Promise.all(Array.from({ length: weight }, upstream))).every(Boolean);
      while (performance.now() < end) {
        const t0 = performance.now();
        if (variant === "no limit") {
          await Promise.all(Array.from({ length: weight }, async () => {
            while (!await upstream()) await sleep(10);
          }));
        } else if (variant === "polling semaphore") {
          const s = weight > 1 ? new MultiSemaphore(io[i], name, c.limit, weight) : new Semaphore(io[i], name, c.limit);
          await s.acquire();
          try {
            if (!await calls()) continue;
          } finally {
            await s.release();
          }
        } else {
          const ok = await withLock(client, name, calls, { permits: c.limit, weight, prefix: `${ns}:rl` });
          if (!ok) continue;
        }
        served[i]++;
        latencies.push(performance.now() - t0);
      }
    }));
  } finally {
    await Promise.all(node.map((cl) => cl.quit().catch(() => {})));
    await Promise.all(io.map((cl) => cl.quit().catch(() => {})));
  }
  latencies.sort((a, b) => a - b);
  return {
    variant,
    served: served.reduce((a, b) => a + b, 0),
    rejected,
    maxInFlight,
    minPerCaller: Math.min(...served.slice(1)),
    maxPerCaller: Math.max(...served.slice(1)),
    heavyRounds: served[0],
    p50Ms: pct(latencies, 50),
    p99Ms: pct(latencies, 99),
  };
}
