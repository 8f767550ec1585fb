// Redlock over independent masters (the algorithm in the Redis documentation), on the same scripts and lease
// handles as a single Redis: acquire on every node with a per-node timeout, succeed on a majority within the
// lease's validity, undo everywhere otherwise; renew and release by quorum.
import type { Bound, LeaseKeys, Logger, Resolved } from "./_types.ts";
import type { LeaseEventHandler } from "./events.ts";
import { giveBack } from "./_acquire.ts";
import { acquiredEvent, failedEvent } from "./_events.ts";
import { emit } from "./_log.ts";
import { type ClientState, type RedisLike, stateOf } from "./_client.ts";
import { bounded } from "./_connection.ts";
import { ABORT_CLEANUP_MS, ACQUIRE_GRACE_MS } from "./_defaults.ts";
import { drift, grant, type Hold, holdMap, type LeaseImpl, type Target } from "./_hold.ts";
import {
  acquireOnNode,
  asUnavailable,
  attemptId,
  eventKind,
  extendCall,
  holdId,
  keysOf,
  newOwner,
  ownerFor,
  releaseCall,
} from "./_protocol.ts";
import { cancel, nap, schedule } from "./_timers.ts";
import { LeaseKindError, LockTimeoutError, QuorumError } from "./errors.ts";

class NodeTimeout extends Error {
  override name = "NodeTimeout";
}

const groups = new WeakMap<ClientState, Map<string, RedlockGroup>>();

/** Each master's own fence for a Redlock hold (undefined where that master did not grant it, or not yet). */
const nodeFences = new WeakMap<Hold, Array<number | undefined>>();

/** The lock delay each hold was granted with (a re-entry keeps it): a hold re-established on a node keeps it too. */
const nodeDelays = new WeakMap<Hold, number>();

function fenceOn(hold: Hold, node: number): number | undefined {
  return nodeFences.get(hold)?.[node];
}

export function groupOf(clients: readonly RedisLike[], nodeTimeoutMs: number): RedlockGroup {
  const states = clients.map(stateOf);
  const id = `${nodeTimeoutMs}/${states.map((state) => state.id).join(",")}`;
  let byId = groups.get(states[0]);
  if (!byId) groups.set(states[0], byId = new Map());
  let group = byId.get(id);
  if (!group) byId.set(id, group = new RedlockGroup(states, nodeTimeoutMs));
  return group;
}

export class RedlockGroup implements Target {
  readonly holds: Map<string, Hold> = holdMap();
  readonly resumable = false;
  /** A group's messages go where its first client's do. */
  get logger(): Logger | null {
    return this.nodes[0].logger;
  }
  /** And its events go to its first client's handler. */
  get events(): LeaseEventHandler | undefined {
    return this.nodes[0].events;
  }
  /**
   * Owner strings given to this group are its own (not those of the same string on one of its clients alone): one
   * group per set of clients and nodeTimeoutMs in a process (groupOf), so the same string re-enters through it.
   */
  readonly scope = `g${crypto.randomUUID().replaceAll("-", "")}`;
  readonly quorum: number;

  constructor(readonly nodes: readonly ClientState[], readonly nodeTimeoutMs: number) {
    this.quorum = Math.floor(nodes.length / 2) + 1;
  }

  /**
   * Run `fn` on every node at once; each result is its reply, or the error (a NodeTimeout after the timeout). The
   * timeout is on the shared timer and patient: a reply that came while this process was busy (a pause past the
   * timeout) counts, so the caller's own pause is never taken for the nodes' failure (issue 27). Validity is
   * judged by the caller on the real clock.
   */
  all(fn: (node: ClientState, i: number) => Promise<unknown>): Promise<unknown[]> {
    const ms = this.nodeTimeoutMs;
    return Promise.all(this.nodes.map((node, i) =>
      new Promise<unknown>((resolve) => {
        const due = schedule(performance.now() + ms, () => resolve(new NodeTimeout(`no reply within ${ms} ms`)), ms);
        const done = (reply: unknown) => {
          cancel(due);
          resolve(reply);
        };
        fn(node, i).then(done, done);
      })
    ));
  }

  /**
   * Renew on every node; a node that lost the lease (restarted empty) gets it back where it is free there, so
   * restarting masters one at a time never loses a held lease. Lost only when a majority cannot be held.
   */
  async renew(hold: Hold, ms: number, bound: Bound, exact?: boolean): Promise<boolean> {
    const startedAt = performance.now();
    const fences = nodeFences.get(hold);
    // (`bound` carries the hold's `ending`: a renewal is never sent again once the hold is released, where it would
    // re-establish the lease after its release.)
    const replies = await this.all((node, i) =>
      extendCall(node, hold.keys, {
        kind: hold.kind,
        owner: hold.owner,
        ms,
        fence: fenceOn(hold, i),
        reestablish: true,
        exact,
        lockDelayMs: nodeDelays.get(hold),
      }, bound).then(
        (reply) => {
          if (typeof reply === "boolean") return reply ? 1 : 0;
          if (fences) fences[i] = reply.fence; // re-established: this node's fence for the hold from now on
          return 1;
        },
      )
    );
    const renewed = replies.filter((reply) => reply === 1).length;
    if (renewed >= this.quorum && performance.now() - startedAt < ms - drift(ms)) return true;
    if (replies.filter((reply) => reply === 0).length > this.nodes.length - this.quorum) return false;
    throw new QuorumError(hold.name, renewed, this.quorum, replies.filter((reply) => reply instanceof Error));
  }

  /**
   * Release on every node, each waiting up to the caller's bound (not the per-node timeout, which keeps a slow node
   * from delaying a grant: a release has no grant to lose, and an answer missed would be reported as "not held").
   * True when a majority released it, false when a majority did not hold it; otherwise the outcome is unknown.
   */
  release(hold: Hold, bound: Bound): Promise<boolean> {
    // Settles as soon as the answers decide it (a slow or dead minority does not delay it); the other calls finish
    // in the background.
    return new Promise((resolve, reject) => {
      const nodeCount = this.nodes.length;
      let released = 0, notHeld = 0, answered = 0;
      const errors: unknown[] = [];
      this.nodes.forEach((node, i) => {
        releaseCall(node, hold.keys, { kind: hold.kind, owner: hold.owner, fence: fenceOn(hold, i) }, bound).then(
          (reply) => void (reply === "not-held" ? notHeld++ : released++),
          (e) => void errors.push(e),
        ).finally(() => {
          answered++;
          if (released >= this.quorum) resolve(true);
          else if (notHeld > nodeCount - this.quorum) resolve(false);
          else if (answered === nodeCount) reject(new QuorumError(hold.name, released, this.quorum, errors));
        });
      });
    });
  }
}

/** acquire() on several independent masters. */
export async function acquireRedlock(
  clients: readonly RedisLike[],
  opts: Resolved,
  nodeTimeoutMs: number,
  retryDelayMs: number,
): Promise<LeaseImpl> {
  const group = groupOf(clients, nodeTimeoutMs);
  const events = group.events;
  if (!events) return acquireOn(group, opts, retryDelayMs);
  const waited = { queued: false };
  const startedAt = performance.now();
  let lease: LeaseImpl;
  try {
    lease = await acquireOn(group, opts, retryDelayMs, waited);
  } catch (e) {
    failedEvent(events, opts.name, eventKind(opts.kind, false), e, opts.signal, startedAt);
    throw e;
  }
  acquiredEvent(events, lease, startedAt, waited.queued, false);
  return lease;
}

/** acquireRedlock() on `group`; `waited` (with an event handler) learns whether it had to wait, and tells it. */
async function acquireOn(
  group: RedlockGroup,
  opts: Resolved,
  retryDelayMs: number,
  waited?: { queued: boolean },
): Promise<LeaseImpl> {
  const keys = keysOf(opts.prefix, opts.name);
  let owner = ownerFor(group, keys, opts);
  const start = performance.now();
  const deadline = start + opts.waitMs;
  // The whole call is bounded like a single-node acquire, whatever nodeTimeoutMs is.
  const bound = { until: deadline + ACQUIRE_GRACE_MS, signal: opts.signal, name: opts.name };
  for (;;) {
    const attempt = startAttempt(opts, owner, bound.until);
    let replies: unknown[];
    try {
      // Each node's call is bounded by `bound.until` itself (a node that has not answered by then is an error among
      // the replies): so the nodes that answered decide, and a majority that said "held" is a LockTimeoutError even
      // when the others never answer. Here only the signal: it settles at once on abort.
      replies = await bounded(sendAttempt(group, keys, opts, attempt), { ...bound, until: Infinity });
    } catch (e) {
      await undo(group, keys, opts, attempt, bound.until);
      if (opts.signal?.aborted) throw opts.signal.reason;
      throw asUnavailable(e, opts.name);
    }
    const lease = grantOnQuorum(group, keys, opts, attempt, replies);
    if (lease) return lease;
    await undo(group, keys, opts, attempt, bound.until, replies);
    const left = deadline - performance.now();
    const retryMs = notGranted(group, opts, replies, left, start);
    const events = group.events;
    if (waited && events && !waited.queued) {
      waited.queued = true;
      emit(events, { type: "queued", name: opts.name, kind: eventKind(opts.kind, false), owner, retryMs });
    }
    const pause = Math.min(left, retryDelayMs * (0.5 + Math.random()));
    await nap(pause, opts.signal);
    opts.signal?.throwIfAborted();
    // A generated owner is new per try: an undo of this try that runs after the next one (re-sent after NOSCRIPT, or
    // slower than the per-node timeout) cannot meet a hold the next try re-entered. (A fixed owner's can: see docs/topologies.md, "Redlock".)
    if (opts.owner === undefined) owner = newOwner(opts);
  }
}

/** One try of a Redlock acquire over every master. */
interface Attempt {
  /** The id its undo names, so that it gives back only what this try took. */
  readonly id: string;
  readonly owner: string;
  /** When it was sent: the lease's validity counts from here. */
  readonly startedAt: number;
  /**
   * Aborted once the attempt is given up, which stops its per-node calls (they send nothing more, e.g. after a
   * NOSCRIPT): its undo may be on its way, and a command sent after it would run after it and leave a lease nobody
   * holds.
   */
  readonly gaveUp: AbortController;
  /** Gives the attempt up (also on the caller's abort, until it is granted). */
  readonly giveUp: () => void;
  /** The bound of each per-node call: the caller's, ended by `gaveUp` instead of the caller's signal. */
  readonly nodeBound: Bound;
}

function startAttempt(opts: Resolved, owner: string, until: number): Attempt {
  const startedAt = performance.now();
  const gaveUp = new AbortController();
  const giveUp = () => {
    opts.signal?.removeEventListener("abort", giveUp);
    gaveUp.abort(opts.signal?.reason);
  };
  opts.signal?.addEventListener("abort", giveUp, { once: true });
  return {
    id: attemptId(),
    owner,
    startedAt,
    gaveUp,
    giveUp,
    nodeBound: { until, signal: gaveUp.signal, name: opts.name },
  };
}

/** Per node: its fence (> 0) where granted, minus one minus its busy time where held elsewhere, or the error. */
function sendAttempt(group: RedlockGroup, keys: LeaseKeys, opts: Resolved, attempt: Attempt): Promise<unknown[]> {
  return group.all((node) =>
    acquireOnNode(
      node,
      keys,
      { kind: opts.kind, owner: attempt.owner, ms: opts.ms, attempt: attempt.id, lockDelayMs: opts.lockDelayMs },
      attempt.nodeBound,
    )
  );
}

/**
 * The lease, when a majority granted the attempt and some of its validity is left (what remains of the lease after
 * the time the attempt took and the clock-drift allowance); undefined when it is to be undone.
 */
function grantOnQuorum(
  group: RedlockGroup,
  keys: LeaseKeys,
  opts: Resolved,
  attempt: Attempt,
  replies: unknown[],
): LeaseImpl | undefined {
  const fences = replies.filter((reply): reply is number => typeof reply === "number" && reply > 0);
  if (fences.length < group.quorum || !(opts.ms - (performance.now() - attempt.startedAt) - drift(opts.ms) > 0)) {
    return undefined;
  }
  // Reentrant: keep the live hold's fence even if a master that did not grant it before grants it now.
  const held = group.holds.get(holdId(keys, attempt.owner, opts.kind));
  const fence = held && held.active ? held.fence : Math.max(...fences);
  const deadline = attempt.startedAt + opts.ms - drift(opts.ms);
  const lease = grant(group, { kind: opts.kind, keys, name: opts.name, owner: attempt.owner, fence, deadline }, opts);
  if (!lease) return undefined;
  const granted = replies.map((reply) => (typeof reply === "number" && reply > 0 ? reply : undefined));
  const known = nodeFences.get(lease.hold);
  if (known) granted.forEach((nodeFence, i) => (known[i] ??= nodeFence));
  else nodeFences.set(lease.hold, granted);
  if (!nodeDelays.has(lease.hold)) nodeDelays.set(lease.hold, opts.lockDelayMs);
  opts.signal?.removeEventListener("abort", attempt.giveUp); // a slow node may still grant it: part of this lease
  // ...until the hold ends: its release may overtake that node's call, which must not then be sent again.
  if (replies.some((reply) => reply instanceof NodeTimeout)) {
    lease.hold.ending.addEventListener("abort", () => attempt.gaveUp.abort(), { once: true });
  }
  return lease;
}

/**
 * Undo `attempt` on every node that granted it or may have (no reply, or an error after sending): never leave a
 * minority holding it. A node that answered "busy" holds nothing of ours. Waited for only until `until` (briefly
 * after an abort); it completes on its own otherwise.
 */
async function undo(
  group: RedlockGroup,
  keys: LeaseKeys,
  opts: Resolved,
  attempt: Attempt,
  until: number,
  replies?: unknown[],
): Promise<void> {
  attempt.giveUp();
  const sent = group.all((node, i) =>
    typeof replies?.[i] === "number" && (replies[i] as number) <= 0
      ? Promise.resolve(0)
      : giveBack(node, keys, { kind: opts.kind, owner: attempt.owner, attempt: attempt.id }, opts.ms, opts.name)
  );
  const left = opts.signal?.aborted ? ABORT_CLEANUP_MS : until - performance.now();
  await Promise.race([sent, nap(Math.max(0, left), undefined)]);
}

/**
 * After an attempt that was not granted (and was undone), with `left` ms of the wait remaining: throws when waiting
 * cannot help or is over; otherwise returns the shortest time a node said the lease stays held there (-1: none said).
 */
function notGranted(group: RedlockGroup, opts: Resolved, replies: unknown[], left: number, start: number): number {
  const errors = replies.filter((reply) => reply instanceof Error);
  // A lease held in a way this request cannot join (on a majority): waiting cannot help.
  const refused = errors.filter((e) => e instanceof LeaseKindError);
  if (refused.length >= group.quorum) {
    throw new LeaseKindError(opts.name, (refused[0] as LeaseKindError).why, (refused[0] as LeaseKindError).found);
  }
  const busy = replies.filter((reply): reply is number => typeof reply === "number" && reply <= 0)
    .map((reply) => -1 - reply);
  const retryMs = busy.length ? Math.min(...busy) : -1;
  if (left <= 0) {
    if (errors.length > group.nodes.length - group.quorum) {
      const granted = replies.filter((reply) => typeof reply === "number" && reply > 0).length;
      throw new QuorumError(opts.name, granted, group.quorum, errors);
    }
    throw new LockTimeoutError(opts.name, retryMs, performance.now() - start);
  }
  return retryMs;
}
