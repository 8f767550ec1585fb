/**
 * redlease: distributed leases (locks) on Redis for Node, Deno and Bun.
 *
 * Leases are reentrant, renewed by a watchdog while held, handed to exactly one waiter on release, carry a
 * strictly increasing fencing token, and abort their `signal` the moment they are lost.
 *
 * @example
 * ```ts
 * import { createClient } from "redis";
 * import { withLock } from "redlease";
 *
 * const client = await createClient().connect();
 * await withLock(client, "invoice:42", async (signal, lease) => {
 *   await chargeCustomer({ fence: lease.fence, signal });
 * });
 * await client.quit();
 * ```
 *
 * @module
 */
export * from "./src/acquire.ts";
export * from "./src/campaign.ts";
export * from "./src/configure.ts";
export * from "./src/errors.ts";
export * from "./src/extend.ts";
export * from "./src/force_unlock.ts";
export * from "./src/inspect.ts";
export * from "./src/observe.ts";
export * from "./src/proclaim.ts";
export * from "./src/release.ts";
export * from "./src/resume.ts";
export * from "./src/with_lock.ts";
