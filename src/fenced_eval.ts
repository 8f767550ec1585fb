import type { RedisLike } from "./_client.ts";
import {
  checkKey,
  checkOptions,
  checkSlots,
  type FenceOptions,
  type FenceSource,
  prepare,
  runFenced,
  wrap,
} from "./_fence.ts";
import { fail } from "./_validate.ts";

/**
 * Run your own Lua script under the fence check, in the same script: refused with `StaleFenceError` (the script
 * not run) when a higher fence wrote `keys[0]`, the guarded resource, before; run with an equal or higher one. The
 * script sees its `KEYS` and `ARGV` exactly as given here (the check's key and arguments are passed beside them,
 * not among them), and its reply is resolved as `EVAL` would give it (`null` for nil); an error it raises or
 * returns rejects. The fence is recorded in the mark of `keys[0]`, `<keys[0]>:fence`, before the script runs (a
 * script that fails after writing has still written) and again after it, with the TTL it left `keys[0]` with.
 * The script is sent by `EVALSHA` (its SHA1 computed once per body with Web Crypto), in full only after
 * `NOSCRIPT`. It must not start with a `#!lua` line, and every key it touches must be in `keys`; on a Redis
 * Cluster they must share a hash tag with `keys[0]` (`TypeError` otherwise).
 *
 * @param client The Redis of the resource (any client redlease takes; it may be another Redis than the lease's).
 * @param lease The lease whose fence guards the write, or a fence carried elsewhere (`{ fence }` or the number).
 * @param body The Lua script, as you would pass it to `EVAL`.
 * @param keys Its `KEYS` (at least one): `keys[0]` is the guarded resource.
 * @param args Its `ARGV` (strings).
 * @param options Those of every fenced write.
 * @returns The script's reply.
 * @throws {StaleFenceError} when a higher fence wrote `keys[0]` before.
 * @throws {TypeError | RangeError} for invalid arguments, before any command.
 *
 * @example Move stock between two counters of one sale, only while holding its lease
 * ```ts
 * import { withLock } from "redlease";
 * import { fencedEval } from "redlease/fence";
 *
 * const moved = await withLock(client, "sale", (_signal, lease) =>
 *   fencedEval(
 *     client,
 *     lease,
 *     "local n = tonumber(redis.call('GET', KEYS[1]) or '0') if n < tonumber(ARGV[1]) then return 0 end " +
 *       "redis.call('DECRBY', KEYS[1], ARGV[1]) redis.call('INCRBY', KEYS[2], ARGV[1]) return 1",
 *     ["{sale}:stock", "{sale}:reserved"],
 *     ["3"],
 *   ));
 * ```
 */
export async function fencedEval(
  client: RedisLike,
  lease: FenceSource,
  body: string,
  keys: readonly string[],
  args: readonly string[],
  options?: FenceOptions,
): Promise<unknown> {
  const op = "make a fenced write";
  const opts = checkOptions(op, options);
  if (typeof body !== "string" || body.trim() === "") {
    fail(op, "body", "must be a non-empty Lua script", body, typeof body === "string" ? RangeError : TypeError);
  }
  // The body runs inside a function of the check's script: a shebang line (flags) cannot be honoured there.
  if (/^\s*#!/.test(body)) fail(op, "body", "must not start with a '#!' line (script flags)", body, RangeError);
  if (!Array.isArray(keys) || keys.length === 0) {
    fail(op, "keys", "must be an array of at least one key (keys[0] is the guarded resource)", keys);
  }
  keys.forEach((k, i) => checkKey(op, `keys[${i}]`, k));
  if (!Array.isArray(args)) fail(op, "args", "must be an array of strings", args);
  args.forEach((a, i) => typeof a === "string" || fail(op, `args[${i}]`, "must be a string", a));
  const call = prepare(op, client, lease, keys[0], opts);
  checkSlots(op, call, keys);
  return runFenced(call, await wrap(body), args, (r) => r.length > 1 ? r[1] : null, keys);
}
