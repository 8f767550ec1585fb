// The timers of Cloudflare Workers (a timer of its own per entry, see src/_timers.ts) keep schedule()'s promise:
// a callback never runs before its `at` on the performance.now() clock, though Node (like workerd) may fire a
// timer up to ~1 ms early, and a delay over MAX_TIMER_MS is capped. Node only: it poses as workerd through
// navigator.userAgent, which Deno and Bun define already.
import assert from "node:assert/strict";
import { test } from "node:test";

Object.defineProperty(globalThis, "navigator", {
  value: { userAgent: "Cloudflare-Workers" },
  configurable: true,
});
const timers = await import("../src/_timers.ts");

test("own timers: no callback runs before its `at` (performance.now() clock)", async () => {
  const early: number[] = [];
  const runs: Promise<void>[] = [];
  for (let i = 0; i < 200; i++) {
    const at = performance.now() + 1 + (i % 20) + Math.random();
    runs.push(
      new Promise<void>((r) => {
        const d = timers.schedule(at, () => {
          const now = performance.now();
          if (now < at) early.push(at - now);
          r();
        });
        assert.ok(d.t !== undefined, "the own-timer path is in use");
      }),
    );
    if (i % 10 === 0) await new Promise((r) => setTimeout(r, 0.3));
  }
  const keepAlive = setInterval(() => {}, 1_000); // the entries' timers are unref'd
  await Promise.all(runs).finally(() => clearInterval(keepAlive));
  assert.deepEqual(early, [], `${early.length}/200 ran early, by up to ${Math.max(...early).toFixed(3)} ms`);
});

test("own timers: an entry due after MAX_TIMER_MS does not run when the capped timer fires", () => {
  // Stand in for 24.8 days passing: record the timer, then fire it by hand.
  const real = globalThis.setTimeout;
  let fired: (() => void) | undefined;
  let delay = -1;
  globalThis.setTimeout = ((fn: () => void, ms: number) => {
    fired = fn;
    delay = ms;
    return real(() => {}, 0);
  }) as typeof setTimeout;
  let ran = false;
  try {
    timers.schedule(performance.now() + timers.MAX_TIMER_MS + 60_000, () => void (ran = true));
  } finally {
    globalThis.setTimeout = real;
  }
  assert.equal(delay, timers.MAX_TIMER_MS);
  fired!(); // the capped timer fires ~60 s before the entry is due
  assert.equal(ran, false, "ran 60 s before its `at`");
});

test("own timers: a timeout (with patience) found late waits its patience again, from the end of the pause", async () => {
  const t0 = performance.now();
  const keepAlive = setInterval(() => {}, 1_000);
  const ran = new Promise<number>((r) => timers.schedule(t0 + 2, () => r(performance.now()), 20));
  const end = t0 + 10;
  while (performance.now() < end) { /* busy: a pause past it */ }
  const at = await ran.finally(() => clearInterval(keepAlive));
  assert.ok(at >= end + 20, `ran ${at - end} ms after the pause`);
});
