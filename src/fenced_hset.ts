import type { RedisLike } from "./_client.ts";
import { checkOptions, type FenceOptions, type FenceSource, prepare, runFenced } from "./_fence.ts";
import { fencedHset as script } from "./_scripts.ts";
import { fail } from "./_validate.ts";

/**
 * `HSET key field value …` in one script with the fence check: refused with `StaleFenceError` (nothing written)
 * when a higher fence wrote `key` before, accepted with an equal or higher one. The fence is then recorded in the
 * key's mark, `<key>:fence`. On a Redis Cluster `key` must have a hash tag (`{…}`).
 *
 * @param client The Redis of the resource (any client redlease takes; it may be another Redis than the lease's).
 * @param lease The lease whose fence guards the write, or a fence carried elsewhere (`{ fence }` or the number).
 * @param key The resource, a hash.
 * @param fields The fields to set and their string values (at least one).
 * @param options Those of every fenced write.
 * @returns How many fields were added (not counting those updated), as `HSET` replies.
 * @throws {StaleFenceError} when a higher fence wrote the key before.
 * @throws {TypeError | RangeError} for invalid arguments, before any command.
 *
 * @example Record an order's state under its lease
 * ```ts
 * import { withLock } from "redlease";
 * import { fencedHSet } from "redlease/fence";
 *
 * await withLock(client, "order:42", (_signal, lease) =>
 *   fencedHSet(client, lease, "{order:42}:state", { status: "paid", at: new Date().toISOString() }));
 * ```
 */
export function fencedHSet(
  client: RedisLike,
  lease: FenceSource,
  key: string,
  fields: Readonly<Record<string, string>>,
  options?: FenceOptions,
): Promise<number> {
  const op = "make a fenced write";
  try {
    const opts = checkOptions(op, options);
    if (typeof fields !== "object" || fields === null || Array.isArray(fields)) {
      fail(op, "fields", "must be an object of string values", fields);
    }
    const args: string[] = [];
    for (const [field, value] of Object.entries(fields)) {
      if (typeof value !== "string") fail(op, `fields.${field}`, "must be a string", value);
      args.push(field, value);
    }
    if (args.length === 0) fail(op, "fields", "must have at least one field", fields, RangeError);
    const call = prepare(op, client, lease, key, opts);
    return runFenced(call, script, args, (r) => Number(r[1]));
  } catch (e) {
    return Promise.reject(e);
  }
}
