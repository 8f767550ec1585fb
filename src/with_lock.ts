import { acquireAny, checkClients, ownerOf, type Redlock, resolveNames } from "./_acquire.ts";
import { acquireNamesAny } from "./_acquire_names.ts";
import type { RedisLike } from "./_client.ts";
import { fail, resolveAcquire } from "./_validate.ts";
import { LeaseLostError } from "./errors.ts";
import type { AcquireOptions, Lease } from "./lease.ts";

/**
 * Run `fn` while holding the lease `name`, and release it afterwards in every case.
 *
 * `fn` receives the lease's `signal` (pass it on to your I/O so work stops when the lease is lost) and the
 * lease itself (for its `fence`). If the lease was lost before `fn` settled, `withLock` rejects with that
 * {@linkcode LeaseLostError} even if `fn` resolved — a lost lease is never silent; so it does when the final
 * release finds that the lease was no longer held (lost without the holder having noticed yet). Otherwise it settles as `fn`
 * did. If the release command itself fails, it rejects with that error (the lease then expires on its own).
 *
 * @param client A client as for {@linkcode acquire} (one, or a Redlock group from `redlease/redlock`).
 * @param name The lease name, or several names: one lease over all of them (see {@linkcode acquire}).
 * @param fn The critical section.
 * @param options See {@linkcode AcquireOptions}.
 * @returns What `fn` returned.
 *
 * @example
 * ```ts
 * import { withLock } from "redlease";
 * const total = await withLock(client, `account:${id}`, async (signal, lease) => {
 *   const balance = await ledger.read(id, { signal });
 *   await ledger.write(id, balance + 10, { fence: lease.fence, signal });
 *   return balance + 10;
 * }, { waitMs: 2_000 });
 * ```
 */
export async function withLock<T>(
  client: RedisLike | Redlock,
  name: string | readonly string[],
  fn: (signal: AbortSignal, lease: Lease) => T | PromiseLike<T>,
  options?: AcquireOptions,
): Promise<T> {
  checkClients("run withLock", client);
  const names = Array.isArray(name) ? name : undefined;
  const opts = names
    ? resolveNames("run withLock", client, names, options)
    : resolveAcquire("run withLock", name, options, ownerOf);
  if (typeof fn !== "function") fail("run withLock", "fn", "must be a function", fn);
  const lease = names ? await acquireNamesAny(client, names, opts) : await acquireAny(client, opts);
  let value: T | undefined;
  let failed = false;
  let error: unknown;
  try {
    value = await fn(lease.signal, lease);
  } catch (e) {
    failed = true;
    error = e;
  }
  let releaseFailed = false;
  let releaseError: unknown;
  let lost = lease.endedWith;
  try {
    // A release that finds the lease gone means it was lost while fn ran (expired, force-unlocked, evicted)
    // without the holder having been told yet: that is a loss too, never a silent success.
    const released = await lease.release();
    if (!released && !(lost instanceof LeaseLostError)) lost = new LeaseLostError(lease.name, "not-held");
  } catch (e) {
    releaseFailed = true;
    releaseError = e;
  }
  if (lost instanceof LeaseLostError) {
    if (failed && error !== lost) throw new LeaseLostError(lost.lockName, lost.why, { cause: error });
    throw lost;
  }
  if (failed) throw error;
  if (releaseFailed) throw releaseError;
  return value as T;
}
