// Redlock over independent masters (the algorithm in the Redis documentation), on the same scripts and lease
// handles as a single Redis: acquire on every node with a per-node timeout, succeed on a majority within the
// lease's validity, undo everywhere otherwise; renew and release by quorum. Several names are one set: each node
// takes all of them or none in one script call, and a majority must grant the whole set (then each name is its own
// hold, renewed and released by quorum).
import type { Bound, LeaseKeys, Logger, Resolved } from "./_types.ts";
import type { LeaseEventHandler } from "./events.ts";
import { giveBack } from "./_acquire.ts";
import { ownerOfNames } from "./_acquire_names.ts";
import { LeaseGroup } from "./_group.ts";
import { acquiredEvent, failedEvent } from "./_events.ts";
import { emit } from "./_log.ts";
import { type ClientState, type RedisLike, stateOf } from "./_client.ts";
import { bounded } from "./_connection.ts";
import { ABORT_CLEANUP_MS, ACQUIRE_GRACE_MS } from "./_defaults.ts";
import { drift, grant, type Hold, holdMap, type LeaseImpl, type Target } from "./_hold.ts";
import {
  acquireAllCall,
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
  const keys = keysOf(opts.prefix, opts.name);
  const one: Shape<LeaseImpl> = {
    keys: [keys],
    names: [opts.name],
    owner: () => ownerFor(group, keys, opts),
    send: (attempt) => sendAttempt(group, keys, opts, attempt),
    grant: (attempt, replies) => grantOnQuorum(group, keys, opts, attempt, replies),
    busyMs: (reply) => (typeof reply === "number" && reply <= 0 ? -1 - reply : undefined),
    busyName: () => opts.name,
    tell: (events, lease, startedAt, queued) => acquiredEvent(events, lease, startedAt, queued, false),
  };
  return await acquireShape(group, opts, retryDelayMs, one);
}

/**
 * acquire() of several names on several independent masters: on each master one script call takes every name or
 * none (acquire_all.lua); the set is granted when a majority of the masters granted every name within the
 * validity, and undone on every master otherwise, to be tried again after a random pause (see docs/names.md).
 */
export async function acquireRedlockNames(
  clients: readonly RedisLike[],
  names: readonly string[],
  opts: Resolved,
  nodeTimeoutMs: number,
  retryDelayMs: number,
): Promise<LeaseGroup> {
  const group = groupOf(clients, nodeTimeoutMs);
  const keys = names.map((n) => keysOf(opts.prefix, n));
  const all: Shape<LeaseGroup> = {
    keys,
    names,
    owner: () => ownerOfNames(group, keys, opts),
    send: (attempt) =>
      group.all((node) =>
        acquireAllCall(
          node,
          keys,
          { kind: "x", owner: attempt.owner, ms: opts.ms, attempt: attempt.id, lockDelayMs: opts.lockDelayMs },
          attempt.nodeBound,
        )
      ),
    grant: (attempt, replies) => grantAllOnQuorum(group, keys, names, opts, attempt, replies),
    // A master that refused names the first name it found held (a 1-based index); the time it stays held is not told.
    busyMs: (reply) => (typeof reply === "number" ? -1 : undefined),
    busyName: (replies) => names[(replies.find((r) => typeof r === "number") as number | undefined ?? 1) - 1],
    tell: (events, lease, startedAt, queued) => {
      for (const part of lease.parts) acquiredEvent(events, part, startedAt, queued, false);
    },
  };
  return await acquireShape(group, opts, retryDelayMs, all);
}

/** What differs between a Redlock acquire of one name and of several: how a try is sent, granted and undone. */
interface Shape<L> {
  /** The keys of every name, which an undo gives back. */
  readonly keys: readonly LeaseKeys[];
  /** The names, in the order of `keys`. */
  readonly names: readonly string[];
  /** The owner of a first try (see ownerFor). */
  owner(): string;
  /** One try on every master: each master's reply, or its error. */
  send(attempt: Attempt): Promise<unknown[]>;
  /** The lease when the replies grant it within its validity, else undefined (then it is undone). */
  grant(attempt: Attempt, replies: unknown[]): L | undefined;
  /** For a reply that says "held by another" (the master holds nothing of this try): the ms it stays held (-1: not told). */
  busyMs(reply: unknown): number | undefined;
  /** The name a LockTimeoutError names. */
  busyName(replies: unknown[]): string;
  /** Tell the event handler of the grant. */
  tell(events: LeaseEventHandler, lease: L, startedAt: number, queued: boolean): void;
}

/** The acquire of `shape` on `group`, with its events told to the group's handler if any. */
async function acquireShape<L>(group: RedlockGroup, opts: Resolved, retryDelayMs: number, shape: Shape<L>): Promise<L> {
  const events = group.events;
  if (!events) return acquireOn(group, opts, retryDelayMs, shape);
  const waited = { queued: false };
  const startedAt = performance.now();
  let lease: L;
  try {
    lease = await acquireOn(group, opts, retryDelayMs, shape, waited);
  } catch (e) {
    failedEvent(events, opts.name, eventKind(opts.kind, false), e, opts.signal, startedAt);
    throw e;
  }
  shape.tell(events, lease, startedAt, waited.queued);
  return lease;
}

/** The acquire of `shape` on `group`; `waited` (with an event handler) learns whether it had to wait, and tells it. */
async function acquireOn<L>(
  group: RedlockGroup,
  opts: Resolved,
  retryDelayMs: number,
  shape: Shape<L>,
  waited?: { queued: boolean },
): Promise<L> {
  let owner = shape.owner();
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
      replies = await bounded(shape.send(attempt), { ...bound, until: Infinity });
    } catch (e) {
      await undo(group, shape, opts, attempt, bound.until);
      if (opts.signal?.aborted) throw opts.signal.reason;
      throw asUnavailable(e, opts.name);
    }
    const lease = shape.grant(attempt, replies);
    if (lease) return lease;
    await undo(group, shape, opts, attempt, bound.until, replies);
    const left = deadline - performance.now();
    const retryMs = notGranted(group, opts, shape, replies, left, start);
    const events = group.events;
    if (waited && events && !waited.queued) {
      waited.queued = true;
      emit(events, { type: "queued", name: opts.name, kind: eventKind(opts.kind, false), owner, retryMs });
    }
    // A random pause: two acquires that keep meeting (overlapping sets of names, or a split vote on one) part ways.
    const pause = Math.min(left, retryDelayMs * (0.5 + Math.random()));
    await nap(pause, opts.signal);
    opts.signal?.throwIfAborted();
    // A generated owner is new per try: an undo of this try that runs after the next one (re-sent after NOSCRIPT, or
    // slower than the per-node timeout) cannot meet a hold the next try re-entered. (A fixed owner's can: see
    // docs/topologies.md, "Redlock".)
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
  keepNodeFences(lease, replies.map((reply) => (typeof reply === "number" && reply > 0 ? reply : undefined)), opts);
  opts.signal?.removeEventListener("abort", attempt.giveUp); // a slow node may still grant it: part of this lease
  // ...until the hold ends: its release may overtake that node's call, which must not then be sent again.
  if (replies.some((reply) => reply instanceof NodeTimeout)) {
    lease.hold.ending.addEventListener("abort", () => attempt.gaveUp.abort(), { once: true });
  }
  return lease;
}

/**
 * The lease over every name, when a majority of the masters granted all of them and some of the validity is left;
 * undefined when it is to be undone. Each name's fence is the highest a granting master gave it (as for one name),
 * and each name is then renewed and released by quorum on its own hold.
 */
function grantAllOnQuorum(
  group: RedlockGroup,
  keys: readonly LeaseKeys[],
  names: readonly string[],
  opts: Resolved,
  attempt: Attempt,
  replies: unknown[],
): LeaseGroup | undefined {
  const granted = replies.map((reply) => (Array.isArray(reply) ? reply as number[] : undefined));
  const count = granted.filter((reply) => reply !== undefined).length;
  if (count < group.quorum || !(opts.ms - (performance.now() - attempt.startedAt) - drift(opts.ms) > 0)) {
    return undefined;
  }
  const deadline = attempt.startedAt + opts.ms - drift(opts.ms);
  const parts: Array<LeaseImpl | undefined> = keys.map((k, j) => {
    const perNode = granted.map((reply) => reply?.[j]);
    const held = group.holds.get(holdId(k, attempt.owner, "x"));
    const fence = held && held.active ? held.fence : Math.max(...perNode.filter((f) => f !== undefined));
    const part = grant(group, { kind: "x", keys: k, name: names[j], owner: attempt.owner, fence, deadline }, opts);
    if (part) keepNodeFences(part, perNode, opts);
    return part;
  });
  if (parts.some((part) => part === undefined)) {
    // (Only when the clock passed the deadline between the check and here.) Dropped: the undo gives each back.
    for (const part of parts) part?.hold.drop(part);
    return undefined;
  }
  opts.signal?.removeEventListener("abort", attempt.giveUp); // a slow node may still grant it: part of this lease
  // ...until any hold ends: its release may overtake that node's call, which must not then be sent again.
  if (replies.some((reply) => reply instanceof NodeTimeout)) {
    for (const part of parts) part!.hold.ending.addEventListener("abort", () => attempt.gaveUp.abort(), { once: true });
  }
  return new LeaseGroup(parts as LeaseImpl[]);
}

/** Remember each master's own fence for `lease`'s hold (undefined where it did not grant), and its lock delay. */
function keepNodeFences(lease: LeaseImpl, granted: Array<number | undefined>, opts: Resolved): void {
  const known = nodeFences.get(lease.hold);
  if (known) granted.forEach((nodeFence, i) => (known[i] ??= nodeFence));
  else nodeFences.set(lease.hold, granted);
  if (!nodeDelays.has(lease.hold)) nodeDelays.set(lease.hold, opts.lockDelayMs);
}

/**
 * Undo `attempt` on every node that granted it or may have (no reply, or an error after sending): never leave a
 * minority holding it. A node that answered "busy" holds nothing of ours. Waited for only until `until` (briefly
 * after an abort); it completes on its own otherwise.
 */
async function undo<L>(
  group: RedlockGroup,
  shape: Shape<L>,
  opts: Resolved,
  attempt: Attempt,
  until: number,
  replies?: unknown[],
): Promise<void> {
  attempt.giveUp();
  const args = { kind: opts.kind, owner: attempt.owner, attempt: attempt.id };
  const sent = group.all((node, i) =>
    replies && shape.busyMs(replies[i]) !== undefined
      ? Promise.resolve(0)
      : Promise.all(shape.keys.map((k, j) => giveBack(node, k, args, opts.ms, shape.names[j])))
  );
  const left = opts.signal?.aborted ? ABORT_CLEANUP_MS : until - performance.now();
  await Promise.race([sent, nap(Math.max(0, left), undefined)]);
}

/**
 * After an attempt that was not granted (and was undone), with `left` ms of the wait remaining: throws when waiting
 * cannot help or is over; otherwise returns the shortest time a node said the lease stays held there (-1: none said).
 */
function notGranted<L>(
  group: RedlockGroup,
  opts: Resolved,
  shape: Shape<L>,
  replies: unknown[],
  left: number,
  start: number,
): number {
  const errors = replies.filter((reply) => reply instanceof Error);
  // A lease held in a way this request cannot join (on a majority): waiting cannot help.
  const refused = errors.filter((e) => e instanceof LeaseKindError);
  if (refused.length >= group.quorum) {
    throw new LeaseKindError(opts.name, (refused[0] as LeaseKindError).why, (refused[0] as LeaseKindError).found);
  }
  const busy = replies.map(shape.busyMs).filter((ms): ms is number => ms !== undefined);
  const retryMs = busy.length ? Math.min(...busy) : -1;
  if (left <= 0) {
    if (errors.length > group.nodes.length - group.quorum) {
      const granted = replies.filter((reply) => !(reply instanceof Error) && shape.busyMs(reply) === undefined).length;
      throw new QuorumError(opts.name, granted, group.quorum, errors);
    }
    throw new LockTimeoutError(shape.busyName(replies), retryMs, performance.now() - start);
  }
  return retryMs;
}
