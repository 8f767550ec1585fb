import type { RedisLike } from "./_client.ts";
import { checkInteger, checkOptions, type FenceOptions, type FenceSource, prepare, runFenced } from "./_fence.ts";
import { fencedIncrBy as script } from "./_scripts.ts";
import { fail } from "./_validate.ts";

/** Options of {@linkcode fencedIncrBy}. */
export interface FencedIncrByOptions extends FenceOptions {
  /**
   * The lowest value the counter may reach: an increment that would take it below is not made, and the call
   * resolves `undefined`. A safe integer.
   * @default {undefined}
   * @example Never sell below zero
   * ```ts
   * const left = await fencedIncrBy(client, lease, "{sale}:stock", -1, { floor: 0 });
   * if (left === undefined) console.log("sold out");
   * ```
   */
  readonly floor?: number;
  /**
   * The highest value the counter may reach: an increment that would take it above is not made, and the call
   * resolves `undefined`. A safe integer, not below `floor`.
   * @default {undefined}
   * @example At most 100 seats
   * ```ts
   * const taken = await fencedIncrBy(client, lease, "{hall}:seats", 1, { ceiling: 100 });
   * ```
   */
  readonly ceiling?: number;
}

/**
 * `INCRBY key by` in one script with the fence check, within optional bounds: refused with `StaleFenceError`
 * (nothing written) when a higher fence wrote `key` before, accepted with an equal or higher one. An absent key
 * counts as 0. The fence is then recorded in the key's mark, `<key>:fence`. On a Redis Cluster `key` must have a
 * hash tag (`{…}`).
 *
 * @param client The Redis of the resource (any client redlease takes; it may be another Redis than the lease's).
 * @param lease The lease whose fence guards the write, or a fence carried elsewhere (`{ fence }` or the number).
 * @param key The resource, an integer counter.
 * @param by The increment, a safe integer (negative to decrement).
 * @param options `floor`, `ceiling`, and those of every fenced write.
 * @returns The new value, or `undefined` when `floor` or `ceiling` refused the increment (the value unchanged).
 * @throws {StaleFenceError} when a higher fence wrote the key before.
 * @throws {TypeError | RangeError} for invalid arguments, before any command.
 *
 * @example A flash sale: take one item from the stock, never below zero
 * ```ts
 * import { withLock } from "redlease";
 * import { fencedIncrBy } from "redlease/fence";
 *
 * const left = await withLock(client, "sale", (_signal, lease) =>
 *   fencedIncrBy(client, lease, "{sale}:stock", -1, { floor: 0 }));
 * ```
 */
export function fencedIncrBy(
  client: RedisLike,
  lease: FenceSource,
  key: string,
  by: number,
  options?: FencedIncrByOptions,
): Promise<number | undefined> {
  const op = "make a fenced write";
  try {
    const opts = checkOptions(op, options, "floor", "ceiling");
    checkInteger(op, "by", by);
    const { floor, ceiling } = opts;
    if (floor !== undefined) checkInteger(op, "floor", floor);
    if (ceiling !== undefined) checkInteger(op, "ceiling", ceiling);
    if (floor !== undefined && ceiling !== undefined && ceiling < floor) {
      fail(op, "ceiling", `must not be below 'floor' (${floor})`, ceiling, RangeError);
    }
    const call = prepare(op, client, lease, key, opts);
    const args = [String(by), floor === undefined ? "" : String(floor), ceiling === undefined ? "" : String(ceiling)];
    return runFenced(call, script, args, (r) => Number(r[0]) === 2 ? undefined : Number(r[1]));
  } catch (e) {
    return Promise.reject(e);
  }
}
