import { checkClient, type RedisLike, stateOf } from "./_client.ts";
import { bounded } from "./_connection.ts";
import { electionChannelOf, keysOf, labelOf, leaderCall, type LeaderReply } from "./_protocol.ts";
import { nap } from "./_timers.ts";
import { checkKeys, checkName, checkPrefix, fail } from "./_validate.ts";
import { DEFAULT_CALL_TIMEOUT_MS } from "./_defaults.ts";
import type { KeyOptions } from "./lease.ts";

/** An election's state, as {@linkcode observe} reports it. */
export interface LeaderState {
  /** The leader's owner string (see `Lease.owner`), or undefined while nobody leads. */
  readonly leader: string | undefined;
  /** The `label` the leader campaigned with, else undefined. */
  readonly label: string | undefined;
  /**
   * The leader's term (its lease's fence); while nobody leads, the latest term known (Redis keeps the last fence for a
   * while after a release; an observer keeps the last term it saw), or 0.
   */
  readonly term: number;
  /** The value the leader proclaimed in this term, or undefined. */
  readonly value: string | undefined;
  /** How long the leadership lasts at least (its TTL when read), ms; 0 while nobody leads. */
  readonly remainingMs: number;
}

/** Options of {@linkcode observe}. */
export interface ObserveOptions extends KeyOptions {
  /**
   * Ends the observation: the iteration finishes (without an error) once it aborts.
   * @default {undefined}
   */
  readonly signal?: AbortSignal;
  /**
   * Without pub/sub (the HTTP driver), how often to read the state, ms; with pub/sub, changes are told by message,
   * and the state is read again at the latest this often anyway (and when a leadership's TTL ends). Integer from 10
   * to 3600000.
   * @default {1000 without pub/sub, 30000 with it}
   */
  readonly pollMs?: number;
}

/**
 * Watch the election `name`: an async iterable of its state — the current state first, then every change of leader,
 * term or value, including vacancy — driven by the messages that `campaign`, `proclaim` and a resignation send. A
 * leader that dies without resigning is seen to go when its lease's TTL ends (the observer reads the state again
 * then), and the next candidate's election is told by message as any other. Consecutive states always differ.
 *
 * Breaking out of the loop, or aborting `signal`, ends the observation and its subscription.
 *
 * @param client A connected node-redis client or a {@linkcode Driver}.
 * @param name The election's name.
 * @param options See {@linkcode ObserveOptions}.
 * @throws {TypeError | RangeError} at once (before any Redis command) for invalid arguments; during iteration, a
 *   Redis error or {@linkcode RedisTimeoutError} (5 s per read) ends it with that error.
 *
 * @example Follow the leader of the scheduler election
 * ```ts
 * import { observe } from "redlease";
 * for await (const s of observe(client, "scheduler", { signal: AbortSignal.timeout(60_000) })) {
 *   console.log(s.leader ? `term ${s.term}: ${s.value ?? "(no value yet)"}` : "nobody leads");
 * }
 * ```
 */
export function observe(client: RedisLike, name: string, options?: ObserveOptions): AsyncIterableIterator<LeaderState> {
  const op = "observe election";
  checkClient(op, client);
  checkName(op, name);
  const prefix = checkPrefix(op, options);
  checkKeys(op, options, ["prefix", "signal", "pollMs"]);
  const signal = options?.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) fail(op, "signal", "must be an AbortSignal", signal);
  const pollMs = options?.pollMs;
  if (
    pollMs !== undefined &&
    (typeof pollMs !== "number" || !Number.isInteger(pollMs) || pollMs < 10 || pollMs > 3_600_000)
  ) {
    fail(
      op,
      "pollMs",
      "must be an integer from 10 to 3600000",
      pollMs,
      typeof pollMs === "number" ? RangeError : TypeError,
    );
  }
  return watch(client, name, prefix, signal, pollMs);
}

// Long: the subscription, the read loop and the teardown share the listener and its wake-up; each part is short.
async function* watch(
  client: RedisLike,
  name: string,
  prefix: string,
  signal: AbortSignal | undefined,
  pollMs: number | undefined,
): AsyncGenerator<LeaderState> {
  const state = stateOf(client);
  const keys = keysOf(prefix, name);
  const channel = electionChannelOf(keys);
  const driver = state.driver;
  let told = false;
  let wake: (() => void) | undefined;
  const listener = () => {
    told = true;
    wake?.();
  };
  let subscribing: Promise<void> | undefined;
  const bound = () => ({ until: performance.now() + DEFAULT_CALL_TIMEOUT_MS, signal, name });
  // Messages sent while the subscriber connection was down are lost: read again once it is back.
  state.resubscribed.add(listener);
  try {
    if (driver.subscribe && !signal?.aborted) {
      subscribing = driver.subscribe(channel, listener);
      await bounded(subscribing, bound());
    }
    const subscribed = subscribing !== undefined;
    const heartbeat = pollMs ?? (subscribed ? 30_000 : 1_000);
    let last: LeaderState | undefined;
    while (!signal?.aborted) {
      told = false;
      const now = stateFrom(await leaderCall(state, keys, bound()), last);
      if (!last || now.leader !== last.leader || now.term !== last.term || now.value !== last.value) {
        last = now;
        yield now;
      }
      // Until a message, the end of the leadership's TTL (a leader that died), or the heartbeat.
      const pause = Math.min(heartbeat, now.leader === undefined ? Infinity : now.remainingMs + 5);
      if (!told) await nap(pause, signal, (wakeUp) => (wake = wakeUp));
      wake = undefined;
    }
  } catch (e) {
    if (signal?.aborted) return;
    throw e;
  } finally {
    state.resubscribed.delete(listener);
    // Unsubscribe once subscribed, even if the wait for it was given up (it may still complete).
    if (subscribing) {
      await bounded(subscribing.then(() => driver.unsubscribe?.(channel, listener)), bound()).catch(() => {});
    }
  }
}

/** The state a leader read shows, after the `last` one reported. */
function stateFrom(reply: LeaderReply, last: LeaderState | undefined): LeaderState {
  return {
    leader: reply.owner,
    label: reply.owner === undefined ? undefined : labelOf(reply.owner),
    // While nobody leads, the latest term known: Redis forgets it after a while (at once when a leader's lease
    // expired), which is not a change.
    term: reply.owner === undefined && last && reply.term < last.term ? last.term : reply.term,
    value: reply.value,
    remainingMs: reply.owner === undefined ? 0 : Math.max(0, reply.pttl),
  };
}
