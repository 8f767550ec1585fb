import { checkClient, type RedisLike, stateOf } from "./_client.ts";
import { checkKeys, fail } from "./_validate.ts";
import type { LeaseEventHandler } from "./events.ts";
import type { Logger } from "./_types.ts";

export type * from "./events.ts";
export type { LogDetails, Logger } from "./_types.ts";

/** Options of {@linkcode configure}. */
export interface ConfigureOptions {
  /**
   * Where this client's messages go; `null` drops them.
   * @default {console's warn (and no debug)}
   * @example
   * ```ts
   * configure(client, { logger: null }); // silence redlease on this client
   * ```
   */
  readonly logger?: Logger | null;
  /**
   * Who hears of this client's lease events (see {@linkcode LeaseEvent}): every acquire, wait, renewal, loss,
   * release and handoff, for every kind of lease, as it happens; `null` removes it. One handler per client: to feed
   * several, call them from one function. `redlease/otel` makes one that records OpenTelemetry metrics and spans.
   * Without a handler, no event is built (nothing is allocated for it). A Redlock group's events go to its first
   * client's handler.
   * @default {undefined: none}
   * @example Print every lost lease, and how long callers wait
   * ```ts
   * configure(client, {
   *   onEvent: (e) => {
   *     if (e.type === "lost") console.warn(`lost ${e.name}: ${e.reason}`);
   *     if (e.type === "acquired" && e.queued) console.log(`${e.name}: waited ${e.waitMs.toFixed(1)} ms`);
   *   },
   * });
   * ```
   */
  readonly onEvent?: LeaseEventHandler | null;
}

/**
 * Configure how redlease works with `client`, for every later call with it (each client is configured on its own; a
 * Redlock group's messages go to its first client's logger).
 *
 * @param client A connected node-redis client or a {@linkcode Driver}.
 * @param options See {@linkcode ConfigureOptions}; an option left out keeps its current setting.
 * @throws {TypeError} for an invalid client or option.
 *
 * @example Send redlease's warnings to your logger
 * ```ts
 * import { configure } from "redlease";
 * configure(client, { logger: { warn: (message, details) => myLogger.warn(message, details) } });
 * ```
 */
export function configure(client: RedisLike, options: ConfigureOptions): void {
  const op = "configure";
  checkClient(op, client);
  if (options === null || typeof options !== "object") fail(op, "options", "must be an object", options);
  checkKeys(op, options, ["logger", "onEvent"]);
  const logger = options.logger;
  if (logger !== undefined && logger !== null) {
    if (typeof logger !== "object" || typeof logger.warn !== "function") {
      fail(op, "logger", "must have a warn(message, details) method, or be null", logger);
    }
    if (logger.debug !== undefined && typeof logger.debug !== "function") {
      fail(op, "logger.debug", "must be a function when given", logger.debug);
    }
  }
  const onEvent = options.onEvent;
  if (onEvent !== undefined && onEvent !== null && typeof onEvent !== "function") {
    fail(op, "onEvent", "must be a function (event) => void, or null", onEvent);
  }
  if (logger !== undefined) stateOf(client).logger = logger;
  if (onEvent !== undefined) stateOf(client).events = onEvent ?? undefined;
}
