import type { RedisLike } from "./_client.ts";
import { checkOptions, type FenceOptions, type FenceSource, prepare, runFenced } from "./_fence.ts";
import { fencedDel as script } from "./_scripts.ts";

/**
 * `DEL key` in one script with the fence check: refused with `StaleFenceError` (nothing deleted) when a higher
 * fence wrote `key` before, accepted with an equal or higher one. The key's mark, `<key>:fence`, then records the
 * fence and stays `retainMs` (24 hours by default), so that a stale writer cannot create the key again meanwhile;
 * then it expires. On a Redis Cluster `key` must have a hash tag (`{…}`).
 *
 * @param client The Redis of the resource (any client redlease takes; it may be another Redis than the lease's).
 * @param lease The lease whose fence guards the write, or a fence carried elsewhere (`{ fence }` or the number).
 * @param key The resource.
 * @param options Those of every fenced write (`retainMs`: how long the mark stays).
 * @returns Whether the key existed.
 * @throws {StaleFenceError} when a higher fence wrote the key before.
 * @throws {TypeError | RangeError} for invalid arguments, before any command.
 *
 * @example Remove a finished job's state
 * ```ts
 * import { withLock } from "redlease";
 * import { fencedDel } from "redlease/fence";
 *
 * await withLock(client, "job:7", (_signal, lease) => fencedDel(client, lease, "{job:7}:state"));
 * ```
 */
export function fencedDel(
  client: RedisLike,
  lease: FenceSource,
  key: string,
  options?: FenceOptions,
): Promise<boolean> {
  const op = "make a fenced write";
  try {
    const call = prepare(op, client, lease, key, checkOptions(op, options));
    return runFenced(call, script, [], (r) => Number(r[1]) === 1);
  } catch (e) {
    return Promise.reject(e);
  }
}
