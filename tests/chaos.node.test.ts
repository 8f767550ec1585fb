// The CI subset of `npm run chaos` (chaos/run.ts): 3 Node worker processes contend for one lease name for a few
// seconds under one fault each, doing a non-atomic read–sleep–write of a counter and a fenced write on a separate
// redis-server inside the critical section. Node only (`*.node.test.ts`): the full run covers Bun and Deno.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Analysis } from "../chaos/_analyze.ts";
import { clientKill, runScenario, type Runtime, type ScenarioRun, scriptFlush } from "../chaos/_scenario.ts";

const WORKERS: Runtime[] = ["node", "node", "node"];

/** The invariants every scenario must keep, whatever the fault. */
function assertSafe(a: Analysis, minAcquisitions: number): void {
  const ctx = JSON.stringify({ ...a, victims: undefined }, null, 1).slice(0, 4000);
  assert.deepEqual(a.failedWorkers, [], ctx);
  assert.ok(a.acquisitions >= minAcquisitions, `only ${a.acquisitions} acquisitions: ${ctx}`);
  assert.equal(a.overlapsLive, 0, `critical sections of live holders overlapped: ${ctx}`);
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
  test("a holder SIGSTOPped past its lease: its signal has aborted when it resumes and its late write is rejected", async () => {
    const run = await runScenario({
      name: "sigstop",
      fault: "SIGSTOP 1.2 s",
      workers: WORKERS,
      durationMs: 2_800,
      watchdogMs: 300,
      victims: [{ worker: 0, fault: { kind: "pause", atMs: 600, sleepMs: 150 }, stopMs: 1_200 }],
    });
    const a = run.analysis;
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

  test("a holder that blocks its event loop past a fixed lease: signal aborted after one turn, late write rejected", async () => {
    const run = await runScenario({
      name: "event-loop-block",
      fault: "1 s synchronous block",
      workers: WORKERS,
      durationMs: 2_600,
      leaseMs: 300,
      victims: [{ worker: 1, fault: { kind: "block", atMs: 600, blockMs: 1_000 } }],
    });
    const a = run.analysis;
    assertSafe(a, 30);
    const v = a.victims[0];
    assert.ok(v, JSON.stringify(a));
    assert.ok(v.tookMs >= 1_000, JSON.stringify(v));
    assert.equal(v.abortedAfterYield, true, JSON.stringify(v));
    assert.equal(v.why, "expired", JSON.stringify(v));
    assert.equal(v.lateWrite, "rejected", JSON.stringify(v));
  });

  test("SCRIPT FLUSH every 300 ms: NOSCRIPT is recovered without errors or overlaps", async () => {
    const run: ScenarioRun = await runScenario({
      name: "script-flush",
      fault: "SCRIPT FLUSH every 300 ms",
      workers: WORKERS,
      durationMs: 2_500,
      inject: scriptFlush(300),
    });
    const a = run.analysis;
    assertSafe(a, 60);
    assert.ok((a.faultEvents["SCRIPT FLUSH"] ?? 0) >= 6, JSON.stringify(a.faultEvents));
    // The flushes did hit the workers' EVALSHAs, and nothing of it reached the callers.
    assert.ok((run.lockStats.errorstat_NOSCRIPT ?? 0) > 0, JSON.stringify(run.lockStats));
    assert.deepEqual(Object.keys(a.errors).filter((k) => k.includes("NOSCRIPT")), [], JSON.stringify(a.errors));
    assert.equal(a.lostSections, 0, JSON.stringify(a.lostByWhy));
  });

  test("CLIENT KILL of normal and pub/sub connections every 400 ms: clients reconnect, exclusion holds", async () => {
    const run = await runScenario({
      name: "client-kill",
      fault: "CLIENT KILL every 400 ms",
      workers: WORKERS,
      durationMs: 2_800,
      inject: clientKill(400),
    });
    const a = run.analysis;
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
