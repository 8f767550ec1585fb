import type { RedisLike } from "./_client.ts";
import { checkOptions, type FenceOptions, type FenceSource, prepare, runFenced } from "./_fence.ts";
import { fencedSet as script } from "./_scripts.ts";
import { fail } from "./_validate.ts";

/** Options of {@linkcode fencedSet}. */
export interface FencedSetOptions extends FenceOptions {
  /**
   * The value's TTL in ms (`SET … PX`). Without it the key has no TTL after the write, as after a plain `SET`.
   * The fence mark follows it (see `retainMs`). Integer from 1 to 2147483647.
   * @default {undefined}
   * @example A status that expires unless written again within a minute
   * ```ts
   * await fencedSet(client, lease, "{worker:3}:status", "busy", { px: 60_000 });
   * ```
   */
  readonly px?: number;
  /**
   * Write only when the value differs from the current one: resolves `false` (nothing written, the TTL left as it
   * is) when it is equal. The fence is still checked, and still recorded.
   * @default {false}
   * @example
   * ```ts
   * const changed = await fencedSet(client, lease, "{config}:json", json, { ifChanged: true });
   * ```
   */
  readonly ifChanged?: boolean;
}

/**
 * `SET key value` in one script with the fence check: refused with `StaleFenceError` (nothing written) when a
 * higher fence wrote `key` before, accepted with an equal or higher one. The fence is then recorded in the key's
 * mark, `<key>:fence`. On a Redis Cluster `key` must have a hash tag (`{…}`).
 *
 * @param client The Redis of the resource (any client redlease takes; it may be another Redis than the lease's).
 * @param lease The lease whose fence guards the write, or a fence carried elsewhere (`{ fence }` or the number).
 * @param key The resource.
 * @param value The string to write.
 * @param options `px`, `ifChanged`, and those of every fenced write.
 * @returns `true` when written; `false` when `ifChanged` found the value equal.
 * @throws {StaleFenceError} when a higher fence wrote the key before.
 * @throws {TypeError | RangeError} for invalid arguments, before any command.
 *
 * @example Publish a report only while holding its lease
 * ```ts
 * import { withLock } from "redlease";
 * import { fencedSet } from "redlease/fence";
 *
 * await withLock(client, "report", async (_signal, lease) => {
 *   await fencedSet(client, lease, "{report}:body", await render());
 * });
 * ```
 */
export function fencedSet(
  client: RedisLike,
  lease: FenceSource,
  key: string,
  value: string,
  options?: FencedSetOptions,
): Promise<boolean> {
  const op = "make a fenced write";
  try {
    const opts = checkOptions(op, options, "px", "ifChanged");
    if (typeof value !== "string") fail(op, "value", "must be a string", value);
    const px = opts.px;
    if (px !== undefined && !(typeof px === "number" && Number.isInteger(px) && px >= 1 && px <= 2_147_483_647)) {
      fail(op, "px", "must be an integer from 1 to 2147483647", px, typeof px === "number" ? RangeError : TypeError);
    }
    const ifChanged = opts.ifChanged ?? false;
    if (typeof ifChanged !== "boolean") fail(op, "ifChanged", "must be a boolean", ifChanged);
    const call = prepare(op, client, lease, key, opts);
    const args = [value, px === undefined ? "" : String(px), ifChanged ? "1" : ""];
    return runFenced(call, script, args, (r) => Number(r[1]) === 1);
  } catch (e) {
    return Promise.reject(e);
  }
}
