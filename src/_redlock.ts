// Redlock over independent masters (the algorithm in the Redis documentation), on the same scripts and lease
// handles as a single Redis: acquire on every node with a per-node timeout, succeed on a majority within the
// lease's validity, undo everywhere otherwise; renew and release by quorum.
import type { Bound, Logger, Resolved } from "./_types.ts";
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
  asLockTimeout,
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
  const id = `${nodeTimeoutMs}/${states.map((s) => s.id).join(",")}`;
  let byId = groups.get(states[0]);
  if (!byId) groups.set(states[0], byId = new Map());
  let g = byId.get(id);
  if (!g) byId.set(id, g = new RedlockGroup(states, nodeTimeoutMs));
  return g;
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
  all(fn: (st: ClientState, i: number) => Promise<unknown>): Promise<unknown[]> {
    const ms = this.nodeTimeoutMs;
    return Promise.all(this.nodes.map((st, i) =>
      new Promise<unknown>((resolve) => {
        const due = schedule(performance.now() + ms, () => resolve(new NodeTimeout(`no reply within ${ms} ms`)), ms);
        const done = (r: unknown) => {
          cancel(due);
          resolve(r);
        };
        fn(st, i).then(done, done);
      })
    ));
  }

  /**
   * Renew on every node; a node that lost the lease (restarted empty) gets it back where it is free there, so
   * restarting masters one at a time never loses a held lease. Lost only when a majority cannot be held.
   */
  async renew(hold: Hold, ms: number, bound: Bound, exact?: boolean): Promise<boolean> {
    const t0 = performance.now();
    const fences = nodeFences.get(hold);
    // (`bound` carries the hold's `ending`: a renewal is never sent again once the hold is released, where it would
    // re-establish the lease after its release.)
    const rs = await this.all((st, i) =>
      extendCall(st, hold.keys, {
        kind: hold.kind,
        owner: hold.owner,
        ms,
        fence: fenceOn(hold, i),
        reestablish: true,
        exact,
        lockDelayMs: nodeDelays.get(hold),
      }, bound).then(
        (r) => {
          if (typeof r === "boolean") return r ? 1 : 0;
          if (fences) fences[i] = r.fence; // re-established: this node's fence for the hold from now on
          return 1;
        },
      )
    );
    const ok = rs.filter((r) => r === 1).length;
    if (ok >= this.quorum && performance.now() - t0 < ms - drift(ms)) return true;
    if (rs.filter((r) => r === 0).length > this.nodes.length - this.quorum) return false;
    throw new QuorumError(hold.name, ok, this.quorum, rs.filter((r) => r instanceof Error));
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
      const n = this.nodes.length;
      let released = 0, notHeld = 0, answered = 0;
      const errors: unknown[] = [];
      this.nodes.forEach((st, i) => {
        releaseCall(st, hold.keys, { kind: hold.kind, owner: hold.owner, fence: fenceOn(hold, i) }, bound).then(
          (r) => void (r === "not-held" ? notHeld++ : released++),
          (e) => void errors.push(e),
        ).finally(() => {
          answered++;
          if (released >= this.quorum) resolve(true);
          else if (notHeld > n - this.quorum) resolve(false);
          else if (answered === n) reject(new QuorumError(hold.name, released, this.quorum, errors));
        });
      });
    });
  }
}

/** acquire() on several independent masters. */
export async function acquireRedlock(
  clients: readonly RedisLike[],
  o: Resolved,
  nodeTimeoutMs: number,
  retryDelayMs: number,
): Promise<LeaseImpl> {
  const group = groupOf(clients, nodeTimeoutMs);
  const ev = group.events;
  if (!ev) return acquireOn(group, o, retryDelayMs);
  const waited = { queued: false };
  const startedAt = performance.now();
  let lease: LeaseImpl;
  try {
    lease = await acquireOn(group, o, retryDelayMs, waited);
  } catch (e) {
    failedEvent(ev, o.name, eventKind(o.kind, false), e, o.signal, startedAt);
    throw e;
  }
  acquiredEvent(ev, lease, startedAt, waited.queued, false);
  return lease;
}

/** acquireRedlock() on `group`; `waited` (with an event handler) learns whether it had to wait, and tells it. */
async function acquireOn(
  group: RedlockGroup,
  o: Resolved,
  retryDelayMs: number,
  waited?: { queued: boolean },
): Promise<LeaseImpl> {
  const keys = keysOf(o.prefix, o.name);
  let owner = ownerFor(group, keys, o);
  const start = performance.now();
  const deadline = start + o.waitMs;
  // The whole call is bounded like a single-node acquire, whatever nodeTimeoutMs is.
  const bound = { until: deadline + ACQUIRE_GRACE_MS, signal: o.signal, name: o.name };
  for (;;) {
    const t0 = performance.now();
    const attempt = attemptId();
    // Per-node calls stop (send nothing more, e.g. after a NOSCRIPT) once the attempt is given up: its undo may be
    // on its way, and a command sent after it would run after it and leave a lease nobody holds.
    const gaveUp = new AbortController();
    const giveUp = () => {
      o.signal?.removeEventListener("abort", giveUp);
      gaveUp.abort(o.signal?.reason);
    };
    o.signal?.addEventListener("abort", giveUp, { once: true });
    const nodeBound = { until: bound.until, signal: gaveUp.signal, name: o.name };
    // Undo on every node that granted it or may have (no reply, or an error after sending): never leave a
    // minority holding it. A node that answered "busy" holds nothing of ours. Waited for only within the bound
    // (briefly after an abort); it completes on its own otherwise.
    const undo = async (rs?: unknown[]) => {
      giveUp();
      const sent = group.all((st, i) =>
        typeof rs?.[i] === "number" && (rs[i] as number) <= 0
          ? Promise.resolve(0)
          : giveBack(st, keys, { kind: o.kind, owner, attempt }, o.ms, o.name)
      );
      const left = o.signal?.aborted ? ABORT_CLEANUP_MS : bound.until - performance.now();
      await Promise.race([sent, nap(Math.max(0, left), undefined)]);
    };
    // Per node: its fence (> 0) where granted, minus one minus its busy time where held elsewhere, or the error.
    let rs: unknown[];
    try {
      rs = await bounded(
        group.all((st) =>
          acquireOnNode(st, keys, { kind: o.kind, owner, ms: o.ms, attempt, lockDelayMs: o.lockDelayMs }, nodeBound)
        ),
        bound,
      );
    } catch (e) {
      await undo();
      if (o.signal?.aborted) throw o.signal.reason;
      throw asLockTimeout(e, o.name, performance.now() - start);
    }
    const fences = rs.filter((r): r is number => typeof r === "number" && r > 0);
    // Validity: what is left of the lease after the time the attempt took and the clock-drift allowance.
    if (fences.length >= group.quorum && o.ms - (performance.now() - t0) - drift(o.ms) > 0) {
      // Reentrant: keep the live hold's fence even if a master that did not grant it before grants it now.
      const held = group.holds.get(holdId(keys, owner, o.kind));
      const fence = held && held.active ? held.fence : Math.max(...fences);
      const lease = grant(
        group,
        { kind: o.kind, keys, name: o.name, owner, fence, deadline: t0 + o.ms - drift(o.ms) },
        o,
      );
      if (lease) {
        const now = rs.map((r) => (typeof r === "number" && r > 0 ? r : undefined));
        const known = nodeFences.get(lease.hold);
        if (known) now.forEach((f, i) => (known[i] ??= f));
        else nodeFences.set(lease.hold, now);
        if (!nodeDelays.has(lease.hold)) nodeDelays.set(lease.hold, o.lockDelayMs);
        o.signal?.removeEventListener("abort", giveUp); // a slow node may still grant it: part of this lease
        // ...until the hold ends: its release may overtake that node's call, which must not then be sent again.
        if (rs.some((r) => r instanceof NodeTimeout)) {
          lease.hold.ending.addEventListener("abort", () => gaveUp.abort(), { once: true });
        }
        return lease;
      }
    }
    await undo(rs);
    const errors = rs.filter((r) => r instanceof Error);
    // A lease held in a way this request cannot join (on a majority): waiting cannot help.
    const refused = errors.filter((e) => e instanceof LeaseKindError);
    if (refused.length >= group.quorum) {
      throw new LeaseKindError(o.name, (refused[0] as LeaseKindError).why, (refused[0] as LeaseKindError).found);
    }
    const busy = rs.filter((r): r is number => typeof r === "number" && r <= 0).map((r) => -1 - r);
    const left = deadline - performance.now();
    if (left <= 0) {
      if (errors.length > group.nodes.length - group.quorum) {
        throw new QuorumError(o.name, fences.length, group.quorum, errors);
      }
      throw new LockTimeoutError(o.name, busy.length ? Math.min(...busy) : -1, performance.now() - start);
    }
    const ev = group.events;
    if (waited && ev && !waited.queued) {
      waited.queued = true;
      const retryMs = busy.length ? Math.min(...busy) : -1;
      emit(ev, { type: "queued", name: o.name, kind: eventKind(o.kind, false), owner, retryMs });
    }
    const pause = Math.min(left, retryDelayMs * (0.5 + Math.random()));
    await nap(pause, o.signal);
    o.signal?.throwIfAborted();
    // A generated owner is new per try: an undo of this try that runs after the next one (re-sent after NOSCRIPT, or
    // slower than the per-node timeout) cannot meet a hold the next try re-entered. (A fixed owner's can: see README.)
    if (o.owner === undefined) owner = newOwner(o);
  }
}
