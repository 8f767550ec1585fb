// Timers that never keep a process alive, on Node, Bun (Timeout#unref) and Deno (Deno.unrefTimer).
declare const Deno: { unrefTimer(id: number): void };

/** Largest delay setTimeout accepts without firing at once. */
export const MAX_TIMER_MS = 2_147_483_647;

export type Timer = ReturnType<typeof setTimeout>;

export function unrefTimeout(fn: () => void, ms: number): Timer {
  const t = setTimeout(fn, Math.min(Math.max(0, ms), MAX_TIMER_MS));
  if (typeof t === "object" && t !== null && typeof (t as { unref?: unknown }).unref === "function") {
    (t as unknown as { unref(): void }).unref();
  } else {
    try {
      Deno.unrefTimer(t as unknown as number);
    } catch { /* not Deno: nothing to unref */ }
  }
  return t;
}

/** Sleep up to `ms`, ending early when `signal` aborts; `onWake` receives a function that ends it at once. */
export function nap(
  ms: number,
  signal: AbortSignal | undefined,
  onWake?: (wake: (() => void) | undefined) => void,
): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve(); // aborted while the caller was busy: no listener would ever fire
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      onWake?.(undefined);
      resolve();
    };
    const timer = unrefTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    onWake?.(done);
  });
}
