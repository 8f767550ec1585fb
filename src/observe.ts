import { checkClient, type RedisLike, stateOf } from "./_client.ts";
import { follow } from "./_follow.ts";
import { electionChannelOf, keysOf, labelOf, leaderCall, type LeaderReply } from "./_protocol.ts";
import { checkFollowOptions, checkName, checkPrefix } from "./_validate.ts";
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
  const { signal, pollMs } = checkFollowOptions(op, options);
  const keys = keysOf(prefix, name), state = stateOf(client);
  return follow<LeaderReply, LeaderState, LeaderState>(state, name, signal, {
    channel: electionChannelOf(keys),
    heartbeat: (subscribed) => pollMs ?? (subscribed ? 30_000 : 1_000),
    read: (bound) => leaderCall(state, keys, bound),
    step(reply, last) {
      const now = stateFrom(reply, last);
      const changed = !last || now.leader !== last.leader || now.term !== last.term || now.value !== last.value;
      // A leader that dies without resigning is seen at the end of its leadership's TTL.
      return { out: changed ? [now] : [], last: changed ? now : last, ms: now.leader ? now.remainingMs + 5 : Infinity };
    },
  });
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
