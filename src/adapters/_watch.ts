// What a driver knows of its client's connection errors (Driver.lastError), shared by the node-redis driver and the
// ioredis adapter: both clients are Node EventEmitters that report connection errors as `error` events.

interface Emitter {
  on(event: string | symbol, fn: (error?: unknown) => void): unknown;
}

const watched = new WeakMap<object, () => unknown>();

/**
 * The last `error` event of `client` until its next `ready`, watched with the emitter's `errorMonitor` (Node's
 * `events.errorMonitor`, which Bun and Deno have as well): unlike an `error` listener, it handles nothing, so a client
 * without a listener of its own still throws its errors as before. Undefined for a client that is not such an
 * emitter. Once per client, however many drivers wrap it.
 */
export function watchErrors(client: unknown): (() => unknown) | undefined {
  const c = client as Partial<Emitter> & { constructor?: { errorMonitor?: unknown } };
  const monitor = c?.constructor?.errorMonitor;
  if (typeof monitor !== "symbol" || typeof c.on !== "function") return undefined;
  let last = watched.get(c);
  if (!last) {
    let error: unknown;
    c.on(monitor, (e) => void (error = e));
    c.on("ready", () => void (error = undefined));
    watched.set(c, last = () => error);
  }
  return last;
}
