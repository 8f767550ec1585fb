// Network fault injectors: each acts on the route (FaultProxy) of one victim worker at a time, between that worker
// and the lock server, while every worker contends. FaultContext.victims are the workers the scenario faults
// (ScenarioSpec.faulted); the others are never faulted, and the idle check counts only their waiting.
//
// The runner clears every route when the injector returns and again at the end of the run, so an injector that
// leaves a fault armed (a one-shot that never fired) cannot hang the workers' last calls.
import { wall } from "./_protocol.ts";
import type { FaultContext, Injector, WorkerRoute } from "./_scenario.ts";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));
const sleepUntil = (t: number) => sleep(t - wall());

/** `p`'s value, or undefined once `ms` have passed. */
async function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), Math.max(0, ms))));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A grant message on a waiter channel: "<attempt id>:<fence>:<µs queued>:<µs granted>" (lua/_handoff.lua), the
 * attempt id being base64url (src/_protocol.ts, attemptId). Channel names do not match (they end in a client id).
 */
export const GRANT_MESSAGE = /[A-Za-z0-9_-]{16,}:[1-9][0-9]*:[0-9]+:[0-9]+\r\n/;

/**
 * The victims in turn: victim k gets the window [leadMs + k·slot, leadMs + (k+1)·slot) of the run, where slot
 * splits what is left of the run (less `tailMs`) evenly. `fn` must return within its window.
 */
function phases(
  leadMs: number,
  tailMs: number,
  fn: (ctx: FaultContext, v: WorkerRoute, end: number) => Promise<void>,
): Injector {
  return async (ctx) => {
    const n = ctx.victims.length;
    if (n === 0) return ctx.note("no victims: nothing injected");
    const slot = (ctx.until - ctx.startWall - leadMs - tailMs) / n;
    for (const [k, v] of ctx.victims.entries()) {
      const from = ctx.startWall + leadMs + k * slot;
      await sleepUntil(from);
      await fn(ctx, v, from + slot);
    }
  };
}

/** Latency: `ms` + up to `jitterMs` on every chunk, both directions, on every victim's route for the whole run. */
export const latency = (ms: number, jitterMs: number): Injector => async (ctx) => {
  for (const v of ctx.victims) v.proxy.delay({ ms, jitterMs, kind: "all", direction: "both" });
  ctx.note("delay on", { workers: ctx.victims.map((v) => v.id), ms, jitterMs });
  await sleepUntil(ctx.until - 100);
  for (const v of ctx.victims) v.proxy.delay({ ms: 0 });
  ctx.note("delay off");
};

/**
 * Whether `owner` holds the lease now (claimed). The lease key is a string, the grant record (lua/_record.lua):
 * "<fence>:<attempt id>:<holds>:<claim by µs>:<owner>" (owner last). (It was a hash once: HEXISTS on it now fails
 * with WRONGTYPE, which stopped net-cmd-blackhole's injector before it injected anything.)
 */
async function holdsNow(ctx: FaultContext, owner: string): Promise<boolean> {
  const v = await ctx.admin.get(ctx.keys.hash);
  const held = v === null ? null : /^\d+:[^:]*:(\d+):(\d*):(.*)$/s.exec(v);
  // Claimed (no claim deadline left): a grant handed over but not claimed yet is not a hold.
  // The owner as stored may carry the client's id in front ("<client id>:<owner>").
  return held !== null && Number(held[1]) > 0 && held[2] === "" &&
    (held[3] === owner || held[3].endsWith(`:${owner}`));
}

/**
 * Half-open command connection: the victim's command connection(s) silently swallow bytes both ways (no RST,
 * no FIN) for `holdMs`, then heal (connections that lost bytes are reset, so the client reconnects). With a
 * fixed owner (ScenarioSpec.fixedOwners), the blackhole starts as the victim's next hold begins (its owner field
 * appears in the lease hash; waited for up to `waitMs`), so that what gets cut off is a holder's watchdog.
 */
export const commandBlackhole = (holdMs: number, leadMs = 600, waitMs = 1_500): Injector =>
  phases(leadMs, 300, async (ctx, v) => {
    let holding: boolean | undefined;
    if (v.owner) {
      const holds = () => holdsNow(ctx, v.owner!);
      const until = wall() + waitMs;
      while (wall() < until && await holds()) await sleep(2); // not in the middle of a hold
      holding = false;
      while (wall() < until && !(holding = await holds())) await sleep(1);
    }
    v.proxy.blackhole({ kind: "command", direction: "both" });
    ctx.note("command blackhole", { worker: v.id, holding, holdMs, conns: v.proxy.connections().length });
    await sleep(holdMs);
    v.proxy.heal();
    ctx.note("healed", { worker: v.id });
  });

/**
 * Deaf subscriber: what Redis sends to the victim's subscriber connection is held back for `holdMs` (the
 * connection stays up, Redis believes it delivered), then delivered late by heal(): grant and "next" messages
 * about grants that have long passed on must change nothing.
 */
export const subscriberBlackhole = (holdMs: number, leadMs = 600): Injector =>
  phases(leadMs, 300, async (ctx, v) => {
    v.proxy.blackhole({ kind: "subscriber", direction: "down", hold: true });
    ctx.note("subscriber deaf (held)", { worker: v.id, holdMs });
    await sleep(holdMs);
    const before = v.proxy.stats().bytes.subscriber.down;
    v.proxy.heal();
    ctx.note("healed: held messages delivered late", {
      worker: v.id,
      lateBytes: v.proxy.stats().bytes.subscriber.down - before,
    });
  });

/**
 * Subscriber reset while queued: every `everyMs`, victims in turn, wait (≤ `waitMs`) until the victim's entry is
 * at the head of the wait queue, so that the next release hands it the lease, and reset its subscriber
 * connection. The route refuses new connections until the entry has left the head (≤ 400 ms), so that the client
 * cannot re-subscribe first (node-redis reconnects at once): the release's PUBLISH reaches nobody.
 */
export const subscriberResetQueued = (everyMs: number, waitMs = 400): Injector => async (ctx) => {
  if (ctx.victims.length === 0) return ctx.note("no victims: nothing injected");
  for (let i = 0, t = ctx.startWall + 400; t < ctx.until - 300; i++, t += everyMs) {
    await sleepUntil(t);
    const v = ctx.victims[i % ctx.victims.length];
    const head = `${v.clientId}|`;
    const channel = `${ctx.keys.hash}:w:${v.clientId}`;
    let atHead = false;
    for (const until = wall() + waitMs; wall() < until;) {
      const top = await ctx.admin.sendCommand(["ZRANGE", ctx.keys.queue, "0", "0"]) as string[];
      if (top[0]?.startsWith(head)) {
        atHead = true;
        break;
      }
      await sleep(1);
    }
    if (!atHead) {
      ctx.note("subscriber reset skipped: not at the queue head", { worker: v.id });
      continue;
    }
    v.proxy.pause();
    const resets = v.proxy.reset({ kind: "subscriber" });
    // Watch the entry leave the queue (popped by a handoff, or taken back by the victim) and whether anyone was
    // subscribed to its channel just before: if not, the handoff's PUBLISH reached nobody.
    let subscribed = -1;
    let left = false;
    for (const until = wall() + 400; wall() < until && !left;) {
      const [top, numsub] = await ctx.admin.multi().zRange(ctx.keys.queue, 0, 0).pubSubNumSub(channel).exec() as [
        string[],
        Record<string, number>,
      ];
      left = !top[0]?.startsWith(head);
      if (!left) {
        subscribed = Number(numsub[channel] ?? 0);
        await sleep(1);
      }
    }
    v.proxy.resume();
    // (The entry leaves the head by a handoff popping it, or by the victim's own call; the latter needs its
    // heartbeat or its re-subscription first, so with nobody subscribed it is, in practice, a PUBLISH to nobody.)
    ctx.note("subscriber reset at the queue head", {
      worker: v.id,
      resets,
      leftHead: left,
      subscribersJustBefore: subscribed,
      leftWhileUnsubscribed: left && subscribed === 0,
    });
  }
};

type OneShot = "resetNext" | "loseNextReply" | "loseNextRequest";

/**
 * A one-shot fault on the victim's command connection, every `everyMs`, victims in turn: a request is reset
 * mid-flight (`resetNext`: it may or may not have run), has its reply lost after it ran (`loseNextReply`), or is
 * lost before it ran (`loseNextRequest`). Which request: the victim spends most of its time queued, where it
 * sends nothing (it learns of its grant by message), so the next request is nearly always its release; the one
 * after that, its next acquire call (or the undo of a failed one); then a release again, or a queue re-check.
 * So each victim's firings let 0, 1, 2 requests pass in turn (`skip`), to hit all of these.
 */
export const oneShots = (what: OneShot, everyMs: number): Injector => async (ctx) => {
  const n = ctx.victims.length;
  if (n === 0) return ctx.note("no victims: nothing injected");
  for (let i = 0, t = ctx.startWall + 300; t < ctx.until - 300; i++, t += everyMs) {
    await sleepUntil(t);
    const v = ctx.victims[i % n];
    const skip = Math.floor(i / n) % 3;
    const armed = wall();
    const fired = await within(v.proxy[what]({ kind: "command", skip }), Math.min(everyMs, ctx.until - 200 - wall()));
    if (fired === undefined) {
      v.proxy.clear(); // disarm
      ctx.note(`${what} did not fire`, { worker: v.id, skip });
    } else ctx.note(what, { worker: v.id, skip, conn: fired, afterMs: Math.round(wall() - armed) });
  }
};

/**
 * Partition at the moment of handoff, victims in turn: the victim's subscriber is cut off (both ways) by the
 * first grant message addressed to it, and at that moment its command connection is blackholed too, so it can
 * neither hear of nor claim the grant; after `holdMs` everything heals (and the lost connections reset). The
 * grant must pass to the next live waiter when its claim window ends.
 */
export const handoffPartition = (holdMs: number, leadMs = 500): Injector =>
  phases(leadMs, 300, async (ctx, v, end) => {
    const armed = wall();
    const trigger = v.proxy.partitionOn({ pattern: GRANT_MESSAGE, kind: "subscriber", direction: "both" }).then(
      (conn) => {
        // In the same turn as the trigger: no byte gets through on the command connection in between.
        v.proxy.blackhole({ kind: "command", direction: "both" });
        return conn;
      },
    );
    const conn = await within(trigger, end - holdMs - 200 - wall());
    if (conn === undefined) {
      v.proxy.heal(); // disarms the trigger
      ctx.note("handoff partition did not fire (no grant message to the victim)", { worker: v.id });
      return;
    }
    ctx.note("partitioned at handoff", { worker: v.id, conn, afterMs: Math.round(wall() - armed), holdMs });
    await sleep(holdMs);
    v.proxy.heal();
    ctx.note("healed", { worker: v.id });
  });
