// Harness: small timing helpers shared by the server starters (harness/*): sleep, a promise with a time
// limit, polling until a condition holds, and closing a client without letting a stuck close hang a test.

export const sleep = (ms: number): Promise<void> => new Promise<void>((r) => setTimeout(r, ms));

/** `p`, or a rejection naming `what` if it does not settle within `ms` (the timer keeps the event loop alive). */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`timeout after ${ms} ms: ${what}`)), ms))),
  ]).finally(() => clearTimeout(timer));
}

/** Run a client's close function, giving up quietly after 3 s or on an error. */
export async function closeQuietly(close: () => Promise<unknown>): Promise<void> {
  await withTimeout(Promise.resolve().then(close), 3000, "client close").catch(() => {});
}

/** Run `check` until it returns true; on timeout throw with the last reason it gave (a string or an error). */
export async function waitUntil(
  what: string,
  timeoutMs: number,
  check: () => Promise<true | string>,
  intervalMs = 100,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let reason = "";
  for (;;) {
    try {
      const r = await check();
      if (r === true) return;
      reason = r;
    } catch (e) {
      reason = (e as Error).message;
    }
    if (performance.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}: ${reason}`);
    }
    await sleep(intervalMs);
  }
}

/**
 * Run `fn` every 50 ms until it returns something other than undefined (a rejection counts as undefined), and return
 * that; throw "timed out waiting for `what`" after `timeoutMs`.
 */
export async function pollFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const end = performance.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Check the synchronous `ok` every 10 ms until it holds; throw after `timeoutMs`, naming `what`. */
export function until(what: string, ok: () => boolean, timeoutMs = 10_000): Promise<void> {
  return waitUntil(what, timeoutMs, () => Promise.resolve(ok() || "not yet"), 10);
}

/**
 * What a topology starter owns: its temp dir, its servers and the clients it made. `stop()` closes the clients, then
 * stops the servers and removes the dir, once however often it is called.
 */
export function ownedBy<P extends { stop(): Promise<unknown> }>(dir: string, removeDir: (dir: string) => void): {
  readonly procs: P[];
  readonly closers: Array<() => Promise<unknown>>;
  stop(): Promise<void>;
} {
  const procs: P[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  let stopped = false;
  return {
    procs,
    closers,
    async stop() {
      if (stopped) return;
      stopped = true;
      await Promise.all(closers.splice(0).map(closeQuietly));
      await Promise.all(procs.map((p) => p.stop()));
      removeDir(dir);
    },
  };
}
