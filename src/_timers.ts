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
  /** When it is due; moved later when a timeout waits again (see `again`). */
  at: number;
  readonly fn: () => void;
  /** Index in `pending`; -1 once run or cancelled. */
  i: number;
  /** Its own timer, where timers are not shared (`ownTimers`). */
  t?: Timer;
  /** For a timeout's "no reply": how long it waits again once found late (see `again`), ms; 0 for anything else. */
  readonly patience: number;
  /** How many times it has waited again. */
  waits: number;
}

/**
 * How many times a timeout waits again, at most (see `again`): once, so that a process that stays busy (a loaded
 * machine) delays a verdict of "no reply" by one patience at most, never several.
 */
const MAX_WAITS = 1;
/** How late a timer may fire (timer granularity) before the process counts as having been busy, ms. */
const LATE_MS = 1;

/**
 * Whether timeout `d`, due and found due at `now`, waits again instead of concluding "no reply" (and if so, when it
 * is due now). A timer fires in the timers phase, before the replies that came meanwhile are read (Node runs timers
 * before it polls for I/O), and the process may have been busy past it (a GC pause, a synchronous parse, the
 * caller's own loop): a reply may then be waiting unread, or its command not even written yet (node-redis writes
 * on a later turn). So a timeout found on time waits one turn of the event loop (1 ms), for what has come to be
 * read; one found late (the process was busy) gives the reply its `patience` again from now, as if the command went
 * out when the process came back. It waits again once only. Only the verdict waits: whoever reads the clock (a
 * validity, a deadline) still reads the real elapsed time.
 */
function again(d: Due, now: number): boolean {
  const late = now - d.at;
  if (d.waits >= MAX_WAITS) return false;
  d.waits++;
  d.at = now + (late > LATE_MS ? d.patience : 1);
  return true;
}

/**
 * Cloudflare Workers (workerd) ties a timer to the request that set it: a request whose only pending timer was set
 * by another request (one that may end first) is cancelled as hung. There every entry has a timer of its own.
 */
const ownTimers = (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === "Cloudflare-Workers";

/**
 * What is due, in no order; each entry knows its index, so that cancelling one is O(1). Its first entry is never due
 * (a sentinel, as in holdMap(): V8 trims an array that a pop empties, and grows it again on the next push, two
 * reallocations per call of a process with one call at a time).
 */
const pending: Due[] = [{ at: Infinity, fn: () => {}, i: 0, patience: 0, waits: 0 }];
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

/**
 * Run `fn` at `at` on the performance.now() clock (never earlier), on the shared timer. With `patience` (> 0, ms),
 * `fn` is a timeout's "no reply": it runs only once the process has been looking for the reply until then, waiting
 * again one turn, or, when it finds that it was busy meanwhile, its `patience` from then (see `again`).
 */
export function schedule(at: number, fn: () => void, patience = 0): Due {
  return enqueue({ at, fn, i: -1, patience, waits: 0 });
}

/**
 * Put `d` on the shared timer, as schedule() does: for an object that is its own entry (a bounded call, whose `fn`
 * is its timeout), so that it costs no entry and no closure of its own. Its `fn` is called as its method.
 */
export function enqueue(d: Due): Due {
  // NaN would never be due, and (Math.min) would keep the timer from ever being armed again: run it at once.
  if (d.at !== d.at) d.at = -Infinity;
  d.i = pending.length;
  if (ownTimers) return ownTimer(d);
  pending.push(d);
  if (d.at < armedAt) arm(d.at);
  return d;
}

/**
 * `d` on a timer of its own (see `ownTimers`). (Its own function: a closure in enqueue() would cost every call there
 * a context, allocated on entry whichever branch runs.)
 */
function ownTimer(d: Due): Due {
  // Never earlier than `at` (a runtime may round a delay down, and a long one is capped): armed again until due.
  const own = (): void => {
    const now = performance.now(), left = d.at - now;
    if (left > 0 || (d.patience > 0 && again(d, now))) {
      d.t = unrefTimeout(own, Math.ceil(d.at - now));
      return;
    }
    d.i = -1;
    d.fn();
  };
  d.t = unrefTimeout(own, Math.ceil(d.at - performance.now()));
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
  if (pending.length > 1 || disarmQueued) return;
  disarmQueued = true;
  if (proc?.nextTick) proc.nextTick(disarm);
  else disarm();
}

function disarm(): void {
  disarmQueued = false;
  if (pending.length === 1) arm(Infinity);
}

function arm(at: number): void {
  clearTimeout(timer);
  armedAt = at;
  // (Capped at MAX_TIMER_MS: it then fires early and is armed again.)
  timer = at < Infinity ? unrefTimeout(fire, at - performance.now()) : undefined;
}

function fire(): void {
  const now = performance.now();
  let due = pending.filter((d) => d.at <= now);
  let waiting = false;
  for (const d of due) {
    cancel(d);
    // A timeout that waits again (see `again`) is pending again, and runs later if at all.
    if (d.patience > 0 && again(d, now)) {
      d.i = pending.push(d) - 1;
      waiting = true;
    }
  }
  if (waiting) due = due.filter((d) => d.i < 0);
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
