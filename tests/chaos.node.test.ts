// The CI subset of `npm run chaos` (chaos/run.ts): 3 Node worker processes contend for one lease name for a few
// seconds under one fault each, doing a non-atomic read–sleep–write of a counter and a fenced write on a separate
// redis-server inside the critical section. Node only (`*.node.test.ts`): the full run covers Bun and Deno.
// Overlaps are decided on the resource server's clock; the wall-clock overlap count (one clock per worker
// process) is a diagnostic and is not asserted on. The checker itself is tested last: with the lock disabled it
// must report the overlaps and lost updates that then really happen.
import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import { type Analysis, analyze, type AnalyzeInput } from "../chaos/_analyze.ts";
import type { Section } from "../chaos/_protocol.ts";
import { clientKill, runScenario, type Runtime, type ScenarioRun, scriptFlush } from "../chaos/_scenario.ts";
import { selfTestScenario } from "../chaos/scenarios.ts";

const WORKERS: Runtime[] = ["node", "node", "node"];

/** One diagnostic line per run: the server-clock verdict next to the wall-clock view (not asserted on). */
function report(t: TestContext, a: Analysis): void {
  t.diagnostic(
    `${a.scenario}: ${a.acquisitions} sections; live overlaps ${a.overlapsLive} on the resource server's clock ` +
      `(min live handoff gap ${a.minHandoffGapMs} ms), wall-clock diagnostic ${a.wallClockOverlapsLive} ` +
      `(min gap ${a.wallClockMinHandoffGapMs} ms); overlaps with lost holders ${a.overlapsLost}; lost updates ` +
      `live ${a.lostUpdatesLive} / lost holders ${a.lostUpdatesByLostHolders}; fence violations ${a.fenceViolations}`,
  );
}

/** The invariants every scenario must keep, whatever the fault. */
function assertSafe(a: Analysis, minAcquisitions: number): void {
  const ctx = JSON.stringify({ ...a, victims: undefined }, null, 1).slice(0, 4000);
  assert.deepEqual(a.failedWorkers, [], ctx);
  assert.ok(a.acquisitions >= minAcquisitions, `only ${a.acquisitions} acquisitions: ${ctx}`);
  // Every section reached the resource server (never faulted), so the server-clock check covers all of them.
  assert.equal(a.sectionsOffServer, 0, ctx);
  assert.equal(a.overlapsLive, 0, `critical sections of live holders overlapped (resource server clock): ${ctx}`);
  assert.equal(a.lostUpdatesLive, 0, `counter updates lost among live holders: ${ctx}`);
  assert.equal(a.staleAccepted, 0, `stale fenced writes accepted: ${ctx}`);
  assert.equal(a.rejectedLiveWrites, 0, `fenced writes of live holders rejected: ${ctx}`);
  assert.equal(a.fenceViolations, 0, ctx);
  assert.deepEqual(a.problems, [], ctx);
  assert.equal(a.ok, true, ctx);
  // Every increment is accounted for: lost ones only by holders whose lease was lost.
  assert.equal(a.expectedIncrements - a.finalCounter, a.lostUpdatesByLostHolders, ctx);
}

describe("mutual exclusion under faults (chaos subset, node workers)", () => {
  test("a holder SIGSTOPped past its lease: its signal has aborted when it resumes and its late write is rejected", async (t) => {
    const run = await runScenario({
      name: "sigstop",
      fault: "SIGSTOP 1.2 s",
      workers: WORKERS,
      durationMs: 2_800,
      watchdogMs: 300,
      victims: [{ worker: 0, fault: { kind: "pause", atMs: 600, sleepMs: 150 }, stopMs: 1_200 }],
    });
    const a = run.analysis;
    report(t, a);
    assertSafe(a, 30);
    assert.equal(a.faultEvents.SIGSTOP, 1);
    assert.equal(a.victims.length, 1);
    const v = a.victims[0];
    assert.ok(v.tookMs >= 1_200, `the pause landed in the critical section: ${JSON.stringify(v)}`);
    assert.equal(v.remainingAtResume, 0, JSON.stringify(v));
    assert.equal(v.abortedAfterYield, true, `signal aborted once the process ran again: ${JSON.stringify(v)}`);
    assert.equal(v.abortedAtWrite, true, JSON.stringify(v));
    assert.equal(v.why, "unreachable", JSON.stringify(v));
    assert.equal(v.lateWrite, "rejected", `the fenced register rejected the late write: ${JSON.stringify(v)}`);
    assert.equal(v.released, false, JSON.stringify(v));
    // The others went on meanwhile (so the paused holder's section overlaps theirs) and wrote with higher tokens.
    assert.ok(a.overlapsLost > 0, JSON.stringify(a));
    assert.ok(a.lateWritesRejected >= 1);
  });

  test("a holder that blocks its event loop past a fixed lease: signal aborted after one turn, late write rejected", async (t) => {
    const run = await runScenario({
      name: "event-loop-block",
      fault: "1 s synchronous block",
      workers: WORKERS,
      durationMs: 2_600,
      leaseMs: 300,
      victims: [{ worker: 1, fault: { kind: "block", atMs: 600, blockMs: 1_000 } }],
    });
    const a = run.analysis;
    report(t, a);
    assertSafe(a, 30);
    const v = a.victims[0];
    assert.ok(v, JSON.stringify(a));
    assert.ok(v.tookMs >= 1_000, JSON.stringify(v));
    assert.equal(v.abortedAfterYield, true, JSON.stringify(v));
    assert.equal(v.why, "expired", JSON.stringify(v));
    assert.equal(v.lateWrite, "rejected", JSON.stringify(v));
  });

  test("SCRIPT FLUSH every 300 ms: NOSCRIPT is recovered without errors or overlaps", async (t) => {
    const run: ScenarioRun = await runScenario({
      name: "script-flush",
      fault: "SCRIPT FLUSH every 300 ms",
      workers: WORKERS,
      durationMs: 2_500,
      inject: scriptFlush(300),
    });
    const a = run.analysis;
    report(t, a);
    assertSafe(a, 60);
    assert.ok((a.faultEvents["SCRIPT FLUSH"] ?? 0) >= 6, JSON.stringify(a.faultEvents));
    // The flushes did hit the workers' EVALSHAs, and nothing of it reached the callers.
    assert.ok((run.lockStats.errorstat_NOSCRIPT ?? 0) > 0, JSON.stringify(run.lockStats));
    assert.deepEqual(Object.keys(a.errors).filter((k) => k.includes("NOSCRIPT")), [], JSON.stringify(a.errors));
    assert.equal(a.lostSections, 0, JSON.stringify(a.lostByWhy));
  });

  test("CLIENT KILL of normal and pub/sub connections every 400 ms: clients reconnect, exclusion holds", async (t) => {
    const run = await runScenario({
      name: "client-kill",
      fault: "CLIENT KILL every 400 ms",
      workers: WORKERS,
      durationMs: 2_800,
      inject: clientKill(400),
    });
    const a = run.analysis;
    report(t, a);
    assertSafe(a, 40);
    const kills = run.faults.filter((f) => f.event === "CLIENT KILL");
    assert.ok(kills.length >= 5, JSON.stringify(run.faults));
    assert.ok(
      kills.reduce((n, k) => n + Number(k.killed), 0) >= kills.length,
      `connections were killed: ${JSON.stringify(kills)}`,
    );
    // Work went on after the last kill.
    const last = kills.at(-1)!.at;
    assert.ok(
      run.workers.some((w) => w.sections.some((s) => s.start > last)),
      "no critical section after the last kill",
    );
  });
});

describe("the chaos checker", () => {
  // Two live sections of two workers: A then B on the resource server. `skewMs` shifts B's wall clock.
  function twoSections(opts: { serverOverlap: boolean; skewMs: number }): AnalyzeInput {
    const us0 = 1_700_000_000_000_000;
    const a: Section = {
      w: "node-0",
      seq: 0,
      fence: 1,
      start: 1_000,
      end: 1_010,
      read: 0,
      readLen: 0,
      old: 0,
      writeIdx: 1,
      fenced: 1,
      released: true,
    };
    const b: Section = {
      w: "node-1",
      seq: 0,
      fence: 2,
      start: 1_012 + opts.skewMs,
      end: 1_022 + opts.skewMs,
      fenced: 1,
      released: true,
    };
    let counter: number;
    if (opts.serverOverlap) {
      // B read (op 2) before A wrote (op 3): B's write (op 5) overwrote A's increment.
      Object.assign(a, { opStart: 1, opEnd: 4, srvStart: us0 + 1, srvEnd: us0 + 4 });
      Object.assign(b, { opStart: 2, opEnd: 6, srvStart: us0 + 2, srvEnd: us0 + 6, read: 0, readLen: 0 });
      Object.assign(b, { old: 1, writeIdx: 2 });
      counter = 1;
    } else {
      Object.assign(a, { opStart: 1, opEnd: 3, srvStart: us0 + 1_000, srvEnd: us0 + 9_000 });
      Object.assign(b, { opStart: 4, opEnd: 6, srvStart: us0 + 9_500, srvEnd: us0 + 19_000 });
      Object.assign(b, { read: 1, readLen: 1, old: 1, writeIdx: 2 });
      counter = 2;
    }
    return {
      spec: { name: "synthetic", fault: "none", workers: ["node", "node"], durationMs: 100 },
      workers: [
        { id: "node-0", runtime: "node", pid: 1, sections: [a], errors: {} },
        { id: "node-1", runtime: "node", pid: 2, sections: [b], errors: {} },
      ],
      failed: [],
      faults: [],
      startWall: 990,
      endWall: 1_100,
      counter,
      writes: ["node-0:0", "node-1:0"],
      accepted: ["1 node-0:0 1700000000001000", "2 node-1:0 1700000000009500"],
      warnings: [],
    };
  }

  test("a wall-clock skew between worker processes is not reported as an overlap", () => {
    // B's clock runs 3 ms behind: on the wall clocks B starts before A ends; on the server it does not.
    const a = analyze(twoSections({ serverOverlap: false, skewMs: -3 }));
    assert.equal(a.wallClockOverlapsLive, 1, "the diagnostic sees the skew");
    assert.equal(a.overlapsLive, 0, JSON.stringify(a));
    assert.equal(a.minHandoffGapMs, 0.5);
    assert.equal(a.lostUpdatesLive, 0);
    assert.deepEqual(a.problems, []);
    assert.equal(a.ok, true);
  });

  test("a real overlap on the resource server is reported even when the wall clocks hide it", () => {
    // B's clock runs 5 ms ahead: on the wall clocks there is a 7 ms gap; on the server B read before A wrote.
    const a = analyze(twoSections({ serverOverlap: true, skewMs: 5 }));
    assert.equal(a.wallClockOverlapsLive, 0);
    assert.equal(a.overlapsLive, 1, JSON.stringify(a));
    assert.equal(a.lostUpdatesLive, 1, JSON.stringify(a));
    assert.ok(a.problems.some((p) => p.startsWith("live overlap on the resource server")), a.problems.join("\n"));
    assert.equal(a.ok, false);
  });

  test("self-test: workers that skip the lock produce live overlaps and lost updates, and the run fails", async (t) => {
    const run = await runScenario(selfTestScenario(WORKERS, 1_500));
    const a = run.analysis;
    report(t, a);
    const ctx = JSON.stringify({ ...a, problems: a.problems.slice(0, 3) }, null, 1).slice(0, 3000);
    assert.deepEqual(a.failedWorkers, [], ctx);
    assert.ok(a.acquisitions >= 30, ctx);
    assert.equal(a.sectionsOffServer, 0, ctx);
    assert.equal(a.lostSections, 0, `nobody held a lease to lose: ${ctx}`);
    assert.ok(a.overlapsLive > 0, `the checker must see the overlaps: ${ctx}`);
    assert.ok(a.lostUpdatesLive > 0, `the checker must see the lost updates: ${ctx}`);
    assert.ok(a.expectedIncrements - a.finalCounter > 0, ctx);
    assert.equal(a.ok, false, ctx);
  });
});
