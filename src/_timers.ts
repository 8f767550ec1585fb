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

// The shared timer: one unref'd timer for the whole process, armed while any call or hold has something due, and
// cleared once nothing has. A timer of their own per call and per hold (an allocation, a list insertion and calls
// into the runtime each time, for a timer that is nearly always cleared long before it fires) is a large part of
// the cost of a short acquire + release. The timer is armed for the earliest entry when it was armed, and not moved
// when that entry is cancelled: it then fires early, finds nothing due, and is armed for the earliest left. Calls
// and holds are due seconds ahead, later than those before them, so it is rarely moved and fires rarely.

/** A callback that the shared timer runs at `at` (performance.now() clock) unless it is cancelled first. */
export interface Due {
  readonly at: number;
  readonly fn: () => void;
  /** Index in `pending`; -1 once run or cancelled. */
  i: number;
  /** Its own timer, where timers are not shared (`ownTimers`). */
  t?: Timer;
}

/**
 * Cloudflare Workers (workerd) ties a timer to the request that set it: a request whose only pending timer was set
 * by another request (one that may end first) is cancelled as hung. There every entry has a timer of its own.
 */
const ownTimers = (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === "Cloudflare-Workers";

/** What is due, in no order; each entry knows its index, so that cancelling one is O(1). */
const pending: Due[] = [];
let timer: Timer | undefined;
let armedAt = Infinity;
let disarmQueued = false;
/** Where there is one (Node, Bun, Deno 2), `process.nextTick` runs a callback once the current microtasks have run. */
const proc = (globalThis as { process?: { nextTick?(fn: () => void): void } }).process;

/**
 * Run `fn` once the current microtasks have run (`process.nextTick`, where there is one), else on a 0 ms timer.
 * Unlike a 0 ms timer that is then cleared, it never wakes a process that has gone to sleep meanwhile: in Node a
 * cleared timer still wakes the event loop when it was due.
 */
export function afterMicrotasks(fn: () => void): void {
  if (proc?.nextTick) proc.nextTick(fn);
  else unrefTimeout(fn, 0);
}

/** Run `fn` at `at` on the performance.now() clock (never earlier), on the shared timer. */
export function schedule(at: number, fn: () => void): Due {
  // NaN would never be due, and (Math.min) would keep the timer from ever being armed again: run it at once.
  const d: Due = { at: at === at ? at : -Infinity, fn, i: pending.length };
  if (ownTimers) {
    // Never earlier than `at` (a runtime may round a delay down, and a long one is capped): armed again until due.
    const own = (): void => {
      const left = d.at - performance.now();
      if (left > 0) {
        d.t = unrefTimeout(own, Math.ceil(left));
        return;
      }
      d.i = -1;
      fn();
    };
    d.t = unrefTimeout(own, Math.ceil(d.at - performance.now()));
    return d;
  }
  pending.push(d);
  if (d.at < armedAt) arm(d.at);
  return d;
}

/**
 * Drop `d` if it has not run yet. Once nothing is due, the shared timer is cleared: when the current microtasks have
 * run, where the runtime can tell. A call often settles just before the code it resumes makes the next one (a lease
 * released, then acquired again; an acquire's reply, then the hold it grants): the timer then stays armed for it
 * instead of being cleared and armed again at once.
 */
export function cancel(d: Due): void {
  if (d.i < 0) return;
  if (d.t !== undefined) {
    d.i = -1;
    return clearTimeout(d.t);
  }
  const last = pending.pop()!;
  if (last !== d) pending[last.i = d.i] = last;
  d.i = -1;
  if (pending.length > 0 || disarmQueued) return;
  disarmQueued = true;
  if (proc?.nextTick) proc.nextTick(disarm);
  else disarm();
}

function disarm(): void {
  disarmQueued = false;
  if (pending.length === 0) arm(Infinity);
}

function arm(at: number): void {
  clearTimeout(timer);
  armedAt = at;
  // (Capped at MAX_TIMER_MS: it then fires early and is armed again.)
  timer = at < Infinity ? unrefTimeout(fire, at - performance.now()) : undefined;
}

function fire(): void {
  const now = performance.now();
  const due = pending.filter((d) => d.at <= now);
  for (const d of due) cancel(d);
  arm(pending.reduce((next, d) => Math.min(next, d.at), Infinity));
  for (const d of due) {
    try {
      d.fn();
    } catch (e) {
      queueMicrotask(() => {
        throw e; // reported as an exception thrown from a timer would be, without keeping the others from running
      });
    }
  }
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
      cancel(due);
      signal?.removeEventListener("abort", done);
      onWake?.(undefined);
      resolve();
    };
    // On the shared timer: a waiter's nap nearly always ends by a message, long before it is due.
    const due = schedule(performance.now() + ms, done);
    signal?.addEventListener("abort", done, { once: true });
    onWake?.(done);
  });
}
