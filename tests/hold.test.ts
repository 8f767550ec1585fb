// The Hold state machine on a fake target and fake time: when it renews, claims, gives up and tells its handles,
// without sleeping (as std's retry_test.ts tests timing).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Bound } from "../src/_types.ts";
import type { Logger } from "../src/configure.ts";
import { type Clock, drift, grant, type Hold, type LeaseImpl, releaseHandle, type Target } from "../src/_hold.ts";
import { keysOf } from "../src/_protocol.ts";
import type { LeaseLostError } from "../src/errors.ts";
import { Waiter } from "../src/_waiter.ts";
import { LeaseGroup } from "../src/_group.ts";

/** Time that moves only when the test says so; timers fire in order as it passes them. */
class FakeClock implements Clock {
  t = 1_000;
  #timers = new Map<number, { at: number; fn: () => void }>();
  #next = 1;
  now = () => this.t;
  set = (fn: () => void, ms: number) => {
    const id = this.#next++;
    this.#timers.set(id, { at: this.t + Math.max(0, ms), fn });
    return id;
  };
  clear = (id: unknown) => void this.#timers.delete(id as number);
  get pending(): number {
    return this.#timers.size;
  }
  /** Advance to `t + ms`, firing due timers (and letting their promises settle) on the way. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      const due = [...this.#timers.entries()].filter(([, v]) => v.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.#timers.delete(due[0]);
      this.t = due[1].at;
      due[1].fn();
      for (let i = 0; i < 5; i++) await Promise.resolve();
    }
    this.t = end;
  }
}

/** A target whose renewals answer as the test scripts them, recording when each was asked. */
class FakeTarget implements Target {
  readonly holds = new Map<string, Hold>();
  readonly resumable = true;
  logger: Logger | null = null;
  events = undefined;
  renewals: Array<{ at: number; ms: number; bound: Bound }> = [];
  answer: () => Promise<boolean> = () => Promise.resolve(true);
  constructor(readonly clock: FakeClock) {}
  renew(_hold: Hold, ms: number, bound: Bound): Promise<boolean> {
    this.renewals.push({ at: this.clock.t, ms, bound });
    return this.answer();
  }
  release(): Promise<boolean> {
    return Promise.resolve(true);
  }
}

const keys = keysOf("redlease", "job");
const watchdog = { ms: 3_000, watchdog: true, replicas: 0, replicaTimeoutMs: 0 };
const fixed = { ms: 3_000, watchdog: false, replicas: 0, replicaTimeoutMs: 0 };

function setup(o = watchdog, claimAt?: number, deadline?: number) {
  const clock = new FakeClock();
  const target = new FakeTarget(clock);
  const g = {
    kind: "x" as const,
    keys,
    name: "job",
    owner: "me",
    fence: 7,
    deadline: deadline ?? clock.t + o.ms - drift(o.ms),
    claimAt,
  };
  const lease = grant(target, g, o, clock) as LeaseImpl;
  return { clock, target, lease, hold: lease.hold };
}

describe("Hold (fake time)", () => {
  test("a watchdog hold renews every third of its lease, bounded by its deadline, and moves the deadline", async () => {
    const { clock, target, hold } = setup();
    await clock.advance(999);
    assert.equal(target.renewals.length, 0);
    await clock.advance(2);
    assert.equal(target.renewals.length, 1);
    assert.equal(target.renewals[0].at, 2_000, "a third of the lease after the grant");
    assert.equal(target.renewals[0].bound.until, 1_000 + 3_000 - drift(3_000), "bounded by the local deadline");
    assert.equal(hold.deadline, 2_000 + 3_000 - drift(3_000), "deadline measured from the renewal's send time");
    await clock.advance(1_000);
    assert.equal(target.renewals.length, 2);
  });

  test("renewal errors are retried until the deadline, then the lease is lost as unreachable", async () => {
    const { clock, target, lease } = setup();
    target.answer = () => Promise.reject(new Error("ECONNREFUSED"));
    await clock.advance(3_000);
    assert.ok(target.renewals.length > 3, `retried ${target.renewals.length} times`);
    assert.ok(lease.signal.aborted);
    assert.equal((lease.signal.reason as LeaseLostError).why, "unreachable");
    assert.equal(clock.pending, 0, "no timer left behind");
  });

  test("a logger's debug hears of each retried renewal and of the loss; warn hears nothing", async () => {
    const { clock, target, lease } = setup();
    const debug: string[] = [], warn: string[] = [];
    target.logger = {
      warn: (m) => void warn.push(m),
      debug: (m, d) => void debug.push(`${m} ${d.name} ${String(d.error)}`),
    };
    target.answer = () => Promise.reject(new Error("ECONNREFUSED"));
    await clock.advance(3_000);
    assert.ok(lease.signal.aborted);
    const retried = debug.filter((m) =>
      /renewing lease 'job' failed; retrying for \d+ ms job Error: ECONNREFUSED/.test(m)
    );
    assert.ok(retried.length >= 3 && retried.length === debug.length - 1, debug.join("\n"));
    assert.match(debug[debug.length - 1], /lease 'job' lost \(unreachable\) job/);
    assert.deepEqual(warn, []);
  });

  test("a logger that throws changes nothing: renewals go on after a failure, a loss still aborts the signal", async () => {
    const throwing = {
      warn: () => {
        throw new Error("warn broke");
      },
      debug: () => {
        throw new Error("debug broke");
      },
    };
    const { clock, target, lease } = setup();
    target.logger = throwing;
    let fails = 1;
    target.answer = () => (fails-- > 0 ? Promise.reject(new Error("ECONNRESET")) : Promise.resolve(true));
    await clock.advance(10_000);
    assert.ok(target.renewals.length > 5, `renewed ${target.renewals.length} times after one failure`);
    assert.equal(lease.signal.aborted, false);
    let abortedAtLog: boolean | undefined;
    target.logger = {
      warn: () => {},
      debug: () => {
        abortedAtLog = lease.signal.aborted;
        throw new Error("debug broke");
      },
    };
    target.answer = () => Promise.resolve(false);
    await clock.advance(3_000);
    assert.equal((lease.signal.reason as LeaseLostError).why, "not-held");
    assert.equal(abortedAtLog, true, "debug hears of a loss after the signal aborted");
    assert.equal(clock.pending, 0, "no timer left behind");
  });

  test("a renewal that hangs does not hold the hold past its deadline", async () => {
    const { clock, target, lease } = setup();
    target.answer = () => new Promise(() => {});
    await clock.advance(3_000 - drift(3_000));
    // One turn (1 ms) past the deadline, never more, for a reply that came while the process was busy.
    assert.equal(lease.signal.aborted, false);
    await clock.advance(1);
    assert.equal((lease.signal.reason as LeaseLostError).why, "unreachable");
  });

  test("Redis saying not held loses the lease at once as not-held", async () => {
    const { clock, target, lease } = setup();
    target.answer = () => Promise.resolve(false);
    await clock.advance(1_001);
    assert.equal((lease.signal.reason as LeaseLostError).why, "not-held");
  });

  test("a fixed lease never renews and is lost as expired at its deadline", async () => {
    const { clock, target, lease } = setup(fixed);
    await clock.advance(3_000 - drift(3_000));
    assert.equal(target.renewals.length, 0);
    assert.equal((lease.signal.reason as LeaseLostError).why, "expired");
  });

  test("a handed-over grant is claimed at its claim time; once claimed it has the full lease", async () => {
    const { clock, target, hold, lease } = setup(fixed, 1_200, 1_400);
    assert.equal(hold.claiming, true);
    await clock.advance(199);
    assert.equal(target.renewals.length, 0);
    await clock.advance(1);
    assert.equal(target.renewals.length, 1, "claimed (a renewal) even though the lease is fixed");
    assert.equal(hold.claiming, false);
    assert.equal(hold.deadline, 1_200 + 3_000 - drift(3_000));
    await clock.advance(2_000);
    assert.equal(target.renewals.length, 1, "a claimed fixed lease does not renew");
    assert.equal(lease.signal.aborted, false);
  });

  test("a handed-over grant released before its claim time is never claimed", async () => {
    const { clock, target, lease } = setup(watchdog, 1_200, 1_400);
    await releaseHandle(lease);
    await clock.advance(5_000);
    assert.equal(target.renewals.length, 0);
    assert.equal(clock.pending, 0);
  });

  test("a claim that fails by the claim window loses the grant", async () => {
    const { clock, target, lease } = setup(watchdog, 1_200, 1_400);
    target.answer = () => new Promise(() => {});
    await clock.advance(400 + 1); // the window, and one turn for a reply that came meanwhile
    assert.equal((lease.signal.reason as LeaseLostError).why, "unreachable");
  });

  test("a grant already past its deadline is not attached (counts as not acquired)", () => {
    const clock = new FakeClock();
    const target = new FakeTarget(clock);
    const g = { kind: "x" as const, keys, name: "job", owner: "me", fence: 7, deadline: clock.t };
    assert.equal(grant(target, g, watchdog, clock), undefined);
    assert.equal(target.holds.size, 0);
  });

  test("re-entering keeps one hold and one timer; the last release stops it", async () => {
    const { clock, target, lease, hold } = setup();
    const again = grant(
      target,
      { kind: "x" as const, keys, name: "job", owner: "me", fence: 7, deadline: clock.t + 5_000 },
      watchdog,
      clock,
    )!;
    assert.equal(again.hold, hold);
    assert.equal(hold.deadline, clock.t + 5_000, "re-entering only lengthens the deadline");
    await releaseHandle(lease);
    assert.equal(hold.active, true);
    await releaseHandle(again);
    assert.equal(hold.active, false);
    assert.equal(clock.pending, 0);
  });
});

describe("a lease handle's end (LeaseImpl and LeaseGroup share it)", () => {
  const second = (target: FakeTarget, clock: FakeClock, name: string) =>
    grant(
      target,
      { kind: "x" as const, keys: keysOf("redlease", name), name, owner: "me", fence: 3, deadline: clock.t + 2_000 },
      watchdog,
      clock,
    )!;

  test("the first end wins, and a signal made after the end is already aborted with that reason", () => {
    const { lease } = setup();
    const first = new Error("first"), later = new Error("later");
    lease.end(first);
    lease.end(later);
    assert.equal(lease.endedWith, first);
    assert.equal(lease.signal.aborted, true, "made after the end");
    assert.equal(lease.signal.reason, first);
  });

  test("a signal made before the end aborts once, with the first reason", () => {
    const { lease } = setup();
    const signal = lease.signal;
    assert.equal(lease.signal, signal, "one signal per handle");
    let aborts = 0;
    signal.addEventListener("abort", () => aborts++);
    const first = new Error("first");
    lease.end(first);
    lease.end(new Error("later"));
    assert.equal(aborts, 1);
    assert.equal(signal.reason, first);
  });

  test("a release ends the handle as released, and an abort listener that releases again finds it released", async () => {
    const { lease } = setup();
    let again: Promise<boolean> | undefined;
    lease.signal.addEventListener("abort", () => void (again = releaseHandle(lease)));
    const first = releaseHandle(lease);
    assert.equal(again, first, "the listener got the release under way, not a second one");
    assert.equal(lease.releasing, first);
    assert.equal((lease.endedWith as DOMException).name, "AbortError");
    assert.equal(await first, true);
    lease.end(new Error("after"));
    assert.equal((lease.signal.reason as DOMException).name, "AbortError", "a released handle stays released");
  });

  test("a group ends with the first part that ends (a group made after that is ended from the start)", () => {
    const { clock, target, lease } = setup();
    const other = second(target, clock, "other");
    const group = new LeaseGroup([lease, other]);
    assert.equal(group.endedWith, undefined);
    const lost = new Error("lost");
    other.end(lost);
    lease.end(new Error("later"));
    assert.equal(group.endedWith, lost);
    assert.equal(group.signal.reason, lost, "a signal made after the end");
    const late = new LeaseGroup([lease, other]);
    assert.equal(late.endedWith, lease.endedWith, "the first ended part, in the group's order");
    assert.equal(late.signal.aborted, true);
  });

  test("a group's release releases every part once, and ends it as released", async () => {
    const { clock, target, lease } = setup();
    const other = second(target, clock, "other");
    const group = new LeaseGroup([lease, other]);
    const signal = group.signal;
    const first = group.release();
    assert.equal(group.release(), first, "idempotent");
    assert.equal(group.releasing, first);
    assert.equal((signal.reason as DOMException).name, "AbortError");
    assert.equal(await first, true);
    assert.ok(lease.releasing && other.releasing, "every part released");
    assert.equal(target.holds.size, 0);
  });
});

describe("Waiter (fake time)", () => {
  const entry = { clientId: "c", kind: "x" as const, attempt: "a1", ms: 3_000, claimMs: 1_000, owner: "me" };
  const setupWaiter = () => {
    let t = 5_000;
    const w = new Waiter(entry, () => t);
    return { w, at: (v: number) => (t = v) };
  };

  test("a grant message is taken at once, with a deadline measured from the call that queued it", () => {
    const { w, at } = setupWaiter();
    w.queued({ retryMs: 100, queuedAt: 1_000_000, queuedNow: true }, 4_000);
    at(4_300);
    w.onMessage({ kind: "grant", attempt: "a1", fence: 9, queuedAt: 1_000_000, grantedAt: 1_200_000 });
    assert.equal(w.state, "granted");
    assert.equal(w.grant!.fence, 9);
    assert.equal(w.grant!.deadline, 4_000 + 200 + 1_000 - drift(1_000), "queued-send + server age + claim window");
  });

  test("a grant whose queueing call is unknown, or that arrives too late, is verified by a re-check", () => {
    const a = setupWaiter();
    a.w.onMessage({ kind: "grant", attempt: "a1", fence: 9, queuedAt: 1, grantedAt: 2 });
    assert.equal(a.w.state, "unverified");
    const b = setupWaiter();
    b.w.queued({ retryMs: 100, queuedAt: 1_000_000, queuedNow: true }, 1_000);
    b.at(9_000); // the message was held up for seconds
    b.w.onMessage({ kind: "grant", attempt: "a1", fence: 9, queuedAt: 1_000_000, grantedAt: 1_100_000 });
    assert.equal(b.w.state, "unverified");
    assert.equal(b.w.grant, undefined);
  });

  test("a waiter queued twice measures each grant from the call that queued its entry", () => {
    for (const which of ["earlier", "latest"] as const) {
      const { w, at } = setupWaiter();
      w.queued({ retryMs: 100, queuedAt: 1_000_000, queuedNow: true }, 4_000);
      w.queued({ retryMs: 100, queuedAt: 1_000_000, queuedNow: false }, 4_100); // a re-check: not queued by it
      w.queued({ retryMs: 100, queuedAt: 2_000_000, queuedNow: true }, 4_200); // its entry lapsed: queued again
      at(4_300);
      const [queuedAt, sent] = which === "earlier" ? [1_000_000, 4_000] : [2_000_000, 4_200];
      w.onMessage({ kind: "grant", attempt: "a1", fence: 9, queuedAt, grantedAt: queuedAt + 50_000 });
      assert.equal(w.state, "granted", which);
      assert.equal(w.grant!.deadline, sent + 50 + 1_000 - drift(1_000), which);
    }
  });

  test("a message about an earlier grant, or after the waiter moved on, changes nothing", () => {
    const { w } = setupWaiter();
    w.queued({ retryMs: 100, queuedAt: 1_000_000, queuedNow: true }, 4_900);
    w.onMessage({ kind: "grant", attempt: "a1", fence: 9, queuedAt: 1_000_000, grantedAt: 1_000_100 });
    assert.equal(w.state, "granted");
    w.tooLate(); // as if it had been too late to use
    w.onMessage({ kind: "grant", attempt: "a1", fence: 8, queuedAt: 1_000_000, grantedAt: 1_000_050 });
    assert.equal(w.state, "unverified", "an older fence is ignored");
    w.end();
    const v = w.version;
    w.onMessage({ kind: "grant", attempt: "a1", fence: 10, queuedAt: 1_000_000, grantedAt: 1_000_200 });
    w.onMessage({ kind: "check", attempt: "a1" });
    assert.equal(w.version, v, "an ended waiter ignores every message");
  });

  test("an unverified grant is taken back by a re-check only if no message came since it was sent", () => {
    const { w } = setupWaiter();
    w.onMessage({ kind: "grant", attempt: "a1", fence: 9, queuedAt: 1, grantedAt: 2 }); // unknown call: unverified
    const sent = w.version;
    w.onMessage({ kind: "grant", attempt: "a1", fence: 10, queuedAt: 1, grantedAt: 3 }); // came during the re-check
    w.takenBack(sent);
    assert.equal(w.state, "unverified", "a message during the re-check keeps it to be verified");
    w.takenBack(w.version);
    assert.equal(w.state, "queued");
    w.tooLate();
    assert.equal(w.state, "queued", "only a granted waiter can be too late");
    w.end();
    w.takenBack(w.version);
    assert.equal(w.state, "ended", "an ended waiter stays ended");
  });

  test("woke() clears the re-check asked for, once the nap is over", () => {
    const { w } = setupWaiter();
    w.onMessage({ kind: "check", attempt: "a1" });
    assert.equal(w.recheckAt, 5_000);
    w.woke();
    assert.equal(w.recheckAt, Infinity);
  });

  test("a 'check' (messages may have been lost) schedules a re-check now, and wakes the nap", () => {
    const { w } = setupWaiter();
    let woken = 0;
    w.onWake(() => woken++);
    w.onMessage({ kind: "check", attempt: "a1" });
    assert.equal(w.recheckAt, 5_000);
    assert.equal(w.state, "queued");
    assert.equal(woken, 1);
  });
});
