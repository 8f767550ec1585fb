/**
 * Mutual-exclusion checker under faults: `npm run chaos` (= `node --import tsx chaos/run.ts`).
 *
 * Each scenario (chaos/scenarios.ts) starts a lock redis-server and a separate resource redis-server, runs worker
 * processes on Node, Bun and Deno (chaos/worker.ts) that contend for one lease name for a few seconds while one
 * kind of fault is applied, and checks what they recorded (chaos/_analyze.ts). It prints one markdown row per
 * scenario and writes chaos/results/chaos.md and chaos/results/chaos.json.
 *
 *   npm run chaos                              all scenarios, 2 workers per runtime
 *   npm run chaos -- --only sigstop,client-kill
 *   npm run chaos -- --runtimes node,bun,deno  one worker per listed entry
 *   npm run chaos -- --soak [--cycles 200000]  the soak instead (chaos/soak.ts, run with --expose-gc)
 *   npm run chaos -- --self-test               the checker's self-test: workers skip the lock; exits 0 only if
 *                                              the checker reports the live overlaps and lost updates
 *
 *   npm run chaos -- --only net-latency,net-lost-reply   the network fault scenarios are named net-*
 *   npm run chaos -- --only resource-pg-sigstop,resource-redis-partition --out resource
 *                                              the resource scenarios (issue 28): stale writes accepted at a Redis
 *                                              or PostgreSQL resource through the fence helpers; each has an
 *                                              -unchecked twin (plain writes: stale writes must be seen), which
 *                                              --no-fence-check selects instead. Without PostgreSQL the pg ones
 *                                              are reported as not run (and the exit code is 1).
 *   npm run chaos -- --only topo-slot-migration --out topology
 *                                              the topology scenarios are named topo-*; --out names the result
 *                                              files (chaos/results/<out>.md and .json; default "chaos")
 *
 * Exits non-zero if any scenario shows an overlap, a lost update or a rejected write among live holders, a stale
 * fenced write accepted, a fence out of order, a paused/blocked holder whose late write was not rejected, a live
 * holder unaware of its loss when the lease was granted to another worker, a free lease idle for longer than the
 * scenario's bound while a non-faulted worker waited, or holds, queues or subscriptions left on the lock server
 * after the workers exited; or an overlap whose older holder had not been told by the newer grant (unless the
 * fault explains it), an acquire that hung (not settled within waitMs + 5 s), and for the topology scenarios a
 * first grant later than 2 s after the change the scenario names (or none); for the resource scenarios, a stale
 * write the resource accepted or none refused (check on), no stale write accepted (check off: the count would be
 * blind), or a scenario that could not run here.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Analysis } from "./_analyze.ts";
import type { ResourceReport } from "./_resource.ts";
import { canRun, PG_MISSING, root, runScenario, type Runtime } from "./_scenario.ts";
import { ALL_RUNTIMES, scenarios, selfTestScenario } from "./scenarios.ts";

const argv = process.argv.slice(2);
const opt = (name: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};

if (argv.includes("--soak")) {
  const rest = argv.filter((a) => a !== "--soak");
  const r = spawnSync(process.execPath, ["--expose-gc", "--import", "tsx", join(root, "chaos", "soak.ts"), ...rest], {
    cwd: root,
    stdio: "inherit",
  });
  process.exit(r.status ?? 1);
}

const out = opt("--out") ?? "chaos";
if (!/^[\w.-]+$/.test(out)) {
  console.error(`--out takes a plain file name (chaos/results/<out>.md), not ${JSON.stringify(out)}`);
  process.exit(2);
}
const runtimes = (opt("--runtimes")?.split(",") as Runtime[] | undefined) ?? ALL_RUNTIMES;

if (argv.includes("--self-test")) {
  const spec = selfTestScenario(runtimes);
  console.log(`=== ${spec.name}: ${spec.fault} (${spec.workers.join(", ")}; ${spec.durationMs} ms)`);
  const a = (await runScenario(spec)).analysis;
  const caught = !a.ok && a.overlapsLive > 0 && a.lostUpdatesLive > 0;
  console.log(
    `  ${a.acquisitions} sections: overlaps live ${a.overlapsLive} (resource server clock; wall-clock diagnostic ` +
      `${a.wallClockOverlapsLive}), lost updates live ${a.lostUpdatesLive} of ${a.expectedIncrements}, ` +
      `${a.problems.length} problems, verdict ${a.ok ? "ok" : "FAIL"}`,
  );
  console.log(caught ? "self-test passed: the checker reports the violations" : "SELF-TEST FAILED: not reported");
  process.exit(caught ? 0 : 1);
}
// --no-fence-check: each selected resource scenario runs as its -unchecked twin (plain writes at the resource).
const unchecked = argv.includes("--no-fence-check");
const only = opt("--only")?.split(",").map((n) =>
  unchecked && n.startsWith("resource-") && !n.endsWith("-unchecked") ? `${n}-unchecked` : n
);
const selected = scenarios(runtimes).filter((s) =>
  only ? only.includes(s.name) : !unchecked || (s.resource !== undefined && !s.resource.check)
);
if (selected.length === 0) {
  console.error(`no scenario matches --only ${only}; known: ${scenarios(runtimes).map((s) => s.name).join(", ")}`);
  process.exit(2);
}

const fmt = (o: Record<string, number>) =>
  Object.entries(o).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(", ") || "—";

const analyses: Analysis[] = [];
const raw: unknown[] = [];
/** Scenarios that could not run here (a pg resource without PostgreSQL): reported as not run, never as passed. */
const notRun: string[] = [];
for (const spec of selected) {
  console.log(`\n=== ${spec.name}: ${spec.fault} (${spec.workers.join(", ")}; ${spec.durationMs} ms)`);
  if (!canRun(spec)) {
    console.log(`  NOT RUN: ${PG_MISSING}`);
    notRun.push(spec.name);
    raw.push({ scenario: spec.name, notRun: PG_MISSING });
    continue;
  }
  const run = await runScenario(spec, (l) => console.log(l));
  const a = run.analysis;
  analyses.push(a);
  raw.push({ analysis: a, faults: run.faults, failed: run.failed });
  console.log(
    `  ${a.ok ? "ok" : "FAIL"}: ${a.acquisitions} acquisitions (${a.acqPerSec}/s), overlaps live ${a.overlapsLive} / ` +
      `lost holders ${a.overlapsLost} (resource server clock; min live handoff gap ${a.minHandoffGapMs} ms), ` +
      `wall-clock diagnostic: overlaps live ${a.wallClockOverlapsLive}, min gap ${a.wallClockMinHandoffGapMs} ms; ` +
      `lost updates live ${a.lostUpdatesLive} / lost holders ${a.lostUpdatesByLostHolders}, ` +
      `stale fenced accepted ${a.staleAccepted}, late writes rejected ${a.lateWritesRejected}; ` +
      `unaware at re-grant ${a.unawareLive} (expected ${a.unawareExpected}, min margin ${a.minRegrantMarginMs} ms, ` +
      `lost holders ${a.minLostRegrantMarginMs} ms), ` +
      `idle with live waiters ${a.maxIdleWaitingMs} ms (bound ${a.idleBoundMs}), leaked ${a.leaked}`,
  );
  if (a.topology) console.log(`  topology: ${topologyLine(a)}`);
  for (const r of a.resource ?? []) console.log(`  resource: ${resourceLine(r)}`);
  for (const p of a.problems.slice(0, 10)) console.log(`  problem: ${p.slice(0, 600)}`);
}

const lines: string[] = [];
lines.push(
  `Chaos run ${new Date().toISOString()} — ${process.platform}, Node ${process.version}, 2 cores shared; ` +
    `workers: ${runtimes.join(", ")}`,
);
lines.push("");
lines.push(`Command: \`npm run chaos -- ${argv.join(" ")}\``);
lines.push("");
lines.push(
  "| scenario | fault | acq/s | longest idle | idle with live waiters (bound) | overlaps live / lost holders | lost updates live / lost holders | stale fenced accepted | late writes rejected / accepted | unaware at re-grant live / expected | leaked holds / queues / channels | leases lost (why) | errors by class | verdict |",
);
lines.push("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
const na = (x: number | null | undefined) => (x === null || x === undefined ? "—" : String(x));
for (const a of analyses) {
  const leaks = a.leaks ? `${a.leaks.holds.length} / ${a.leaks.queues.length} / ${a.leaks.channels.length}` : "—";
  lines.push(
    `| ${a.scenario} | ${a.fault} | ${a.acqPerSec} (${a.acquisitions}) | ${a.maxIdleMs} ms | ` +
      `${na(a.maxIdleWaitingMs)} ms (${a.idleBoundMs}) | ${a.overlapsLive} / ${a.overlapsLost} | ` +
      `${a.lostUpdatesLive} / ${a.lostUpdatesByLostHolders} (of ${a.expectedIncrements}) | ${a.staleAccepted} | ` +
      `${a.lateWritesRejected} / ${a.lateWritesAccepted} | ${na(a.unawareLive)} / ${na(a.unawareExpected)}${
        a.minLostRegrantMarginMs === null ? "" : ` (lost holders aborted ≥ ${a.minLostRegrantMarginMs} ms before)`
      } | ` +
      `${leaks} | ${fmt(a.lostByWhy)} | ${fmt(a.errors)} | ${a.ok ? "ok" : "**FAIL**"} |`,
  );
}
lines.push("");
lines.push(
  "acq/s: critical sections per second (total). Longest idle: the longest time nobody was inside a critical " +
    "section. Lost holders: holders whose lease was lost before they were done (signal aborted with LeaseLostError, " +
    "or release() returned false); their overlaps and lost counter updates are expected, and their late fenced " +
    "writes must be rejected once a newer holder has written. Live: everyone else; every live column must be 0. " +
    "Overlaps are decided on the resource redis-server's clock (each section's first to last resource command, in " +
    "the order that server ran them); the overlaps computed from the workers' own wall clocks are in chaos.json " +
    "(wallClockOverlapsLive) as a diagnostic only.",
);
lines.push("");
lines.push(
  "Every worker reaches the lock server through its own fault-injecting proxy (its route); the net-* scenarios " +
    "fault the routes of their victims (the first worker of each runtime), in turn, with a 300 ms claim window " +
    "and a 300 ms watchdog lease. Grant-time columns are on the servers' clock: every fence is the lock server's " +
    "TIME (µs) at the grant, and each worker's wall clock is mapped to the same clock by TIME on the resource " +
    "server (best of 12 round trips, before and after the run). Unaware at re-grant: holds whose lease.signal had " +
    "not aborted yet when the lease was granted to another worker (live must be 0; expected: a process that was " +
    "paused/blocked, or a lease the lock server lost); in brackets, the least time by which a live holder that " +
    "lost its lease had its signal aborted before the re-grant. Idle with live waiters: the longest time from the earliest " +
    "moment a hold can have ended on the server (release started, or local deadline + drift when it was not " +
    "released) to the next grant a worker used, counting only time when a non-faulted worker was in acquire(); " +
    "bound: 2 × claim window + 500 ms (claim window: an unclaimed grant passes on; + heartbeat: a queued waiter " +
    "re-checks that often; + 500 ms for 2 shared cores). Leaked: lease hashes with an owner, wait queues, and " +
    "subscribed channels (plain or sharded) on the lock server after every worker process exited (must be 0).",
);
const topo = analyses.filter((a) => a.topology);
if (topo.length > 0) {
  lines.push("");
  lines.push("Topology scenarios:");
  lines.push("");
  lines.push(
    "| scenario | overlaps aware / unaware | stale fenced accepted | hung acquires | kill → promotion | first grant after change (bound) | each change: at → first grant after it (acquire returned) | errors by class | problems |",
  );
  lines.push("|---|---|---|---|---|---|---|---|---|");
  for (const a of topo) {
    const t = a.topology!;
    const changes = t.changes.map((c) =>
      `${c.event} +${c.atMs} ms → ${c.firstGrantAfterMs === null ? "none" : `${c.firstGrantAfterMs} ms`}` +
      (c.firstAcquiredAfterMs === null ? "" : ` (${c.firstAcquiredAfterMs} ms)`) +
      (c.failedAcrossChange
        ? `, ${c.failedAcrossChange} waiting acquires failed (longest ${c.longestFailedAcrossChangeMs} ms)`
        : "")
    ).join("; ");
    lines.push(
      `| ${a.scenario} | ${na(a.overlapsAware)} / ${na(a.overlapsUnaware)}${
        a.overlapsUnawareExpected ? ` (${a.overlapsUnawareExpected} expected)` : ""
      } | ${a.staleAccepted} | ${a.hungAcquires} | ` +
        `${t.killToPromotionMs === null ? "—" : `${t.killToPromotionMs} ms`} | ` +
        `${
          t.firstGrantAfterChangeMs === null ? "**never**" : `${t.firstGrantAfterChangeMs} ms`
        } after "${t.firstGrantFrom}" (${t.firstGrantBoundMs}) | ${changes} | ${fmt(a.errors)} | ${
          a.problems.length === 0 ? "—" : a.problems.map((p) => p.slice(0, 300).replace(/\|/g, "/")).join("<br>")
        } |`,
    );
  }
  lines.push("");
  lines.push(
    "Overlaps aware / unaware: overlapping critical sections (resource server's clock) whose older holder's " +
      "lease.signal had / had not aborted by the newer holder's grant (servers' clock); expected: the older " +
      "holder's lease was lost with lease data the fault lost (a failover without replicas: 1). Stale fenced " +
      "accepted: must be 0. Hung acquires: acquire() calls not settled within waitMs + 5 s (must be 0). First grant after " +
      "change: from the change (on the servers' clock: TIME of a node right after it took effect; for the kills, " +
      "the replica answering ROLE with master) to the first grant (its fence, the lock server's TIME at the grant), " +
      "the worst over the occurrences of the change named; in brackets, to when that acquire() returned; then the " +
      "acquire() calls that were waiting at the change and failed in the end (waitMs 5 s), and the longest.",
  );
}
const delayed = analyses.filter((a) => a.lockDelay);
if (delayed.length > 0) {
  lines.push("");
  lines.push(
    "Lock delay (issue 28): after each hold that ended without a release, the least time until the lease was " +
      "granted to another worker, on the servers' clock, from the holder's local deadline (never later than the " +
      "server's expiry): it must be at least the delay.",
  );
  lines.push("");
  lines.push("| scenario | lock delay | holds ended without a release | least time to the next grant | verdict |");
  lines.push("|---|---|---|---|---|");
  for (const a of delayed) {
    const d = a.lockDelay!;
    lines.push(
      `| ${a.scenario} | ${d.delayMs} ms | ${d.uncleanEnds} | ${d.minGapMs ?? "—"} ms | ${a.ok ? "ok" : "**FAIL**"} |`,
    );
  }
}
const res = analyses.filter((a) => a.resource);
if (res.length > 0 || notRun.length > 0) {
  lines.push("");
  lines.push("Resource scenarios (stale writes accepted at the resource, chaos/_resource.ts):");
  lines.push("");
  lines.push(
    "| scenario | resource | fence check | faults injected | writes accepted | stale accepted | refused (of live holders) | late writes of the faulted holders | verdict |",
  );
  lines.push("|---|---|---|---|---|---|---|---|---|");
  for (const a of res) {
    for (const r of a.resource!) {
      lines.push(
        `| ${a.scenario} | ${r.target === "redis" ? "Redis, fencedEval" : "PostgreSQL, fencedSqlTransaction"} | ` +
          `${r.check ? "on" : "**off**"} | ${faultsCell(a)} | ${r.accepted} | ${r.staleAccepted} | ` +
          `${r.refused} (${r.refusedLive}) | ${r.lateWrites.join("<br>") || "—"} | ${
            r.ok && a.ok
              ? (r.check ? "ok" : a.lockDelay ? "ok: none stale within the lock delay" : "ok: stale writes seen")
              : "**FAIL**"
          } |`,
      );
    }
  }
  for (const name of notRun) {
    lines.push(`| ${name} | PostgreSQL | — | — | — | — | — | — | **not run**: ${PG_MISSING} |`);
  }
  lines.push("");
  lines.push(
    "Writes accepted and stale accepted are read from the resource's own log, written by the same script (Redis) or " +
      "transaction (PostgreSQL) as the sale, in the resource's order: stale = a fence lower than one accepted " +
      "before it. Refused: StaleFenceError, as the workers saw it. With the check on, stale accepted must be 0 and " +
      "refused > 0; with it off (plain EVAL / BEGIN … COMMIT), stale accepted must be > 0. Late writes: the sections " +
      "of the paused, blocked or partitioned holders, made with their old fence after the fault.",
  );
}
const victims = analyses.flatMap((a) => a.victims.map((v) => ({ scenario: a.scenario, ...v })));
if (victims.length > 0) {
  lines.push("");
  lines.push(
    "Paused / blocked holders (`signal.aborted` read first thing after the pause, then after one `setTimeout(0)`, then before the late write):",
  );
  lines.push("");
  lines.push(
    "| scenario | worker | fault took (lease) | aborted at resume | remainingMs at resume | aborted after yield | aborted before late write | why | late fenced write | release() |",
  );
  lines.push("|---|---|---|---|---|---|---|---|---|---|");
  for (const v of victims) {
    lines.push(
      `| ${v.scenario} | ${v.worker} | ${v.kind} ${v.tookMs} ms (${v.leaseMs} ms) | ${v.abortedAtResume} | ` +
        `${v.remainingAtResume} | ${v.abortedAfterYield} | ${v.abortedAtWrite} | ${
          v.why ?? "—"
        } | ${v.lateWrite} | ${v.released} |`,
    );
  }
}
for (const a of analyses) {
  if (!a.eviction) continue;
  const e = a.eviction;
  lines.push("");
  lines.push(
    `Eviction (${a.scenario}): ${e.pulses} pulses evicted ${e.evictedKeys} keys; ${e.holdersHit} holders were inside ` +
      `their critical section when their key was evicted: ${e.detectedBySignal} learned it from lease.signal ` +
      `(${fmt(e.whys)}; pulse → abort ${
        JSON.stringify(e.latencyMs)
      } ms), ${e.detectedAtRelease} only from release() = false, ` +
      `${e.undetected} never. Another worker started its section ${
        JSON.stringify(e.nextHolderMs)
      } ms after the eviction. ` +
      (a.warnings.length === 0
        ? "Nothing was printed on any worker's stderr: redlease does not warn about the volatile-lru policy."
        : `Warnings printed on stderr: ${groupWarnings(a.warnings)}`),
  );
}
/** The faults a run injected: the runner's events, and the faults the workers applied to themselves (blocks). */
function faultsCell(a: Analysis): string {
  const blocks = a.victims.filter((v) => v.kind === "block").length;
  return [
    ...Object.keys(a.faultEvents).length > 0 ? [fmt(a.faultEvents)] : [],
    ...blocks > 0 ? [`event-loop block ${blocks} (by the worker itself)`] : [],
  ].join("; ") || "—";
}
/** One line of resource figures for the console. */
function resourceLine(r: ResourceReport): string {
  return `${r.target}, check ${
    r.check ? "on" : "OFF"
  }: ${r.accepted} writes accepted (workers saw ${r.workerAccepted}), ` +
    `stale accepted ${r.staleAccepted}, refused ${r.refused} (live ${r.refusedLive}), sold out ${r.soldOut}, ` +
    `errors ${fmt(r.errors)}, stock ${r.stockFinal}; late writes: ${r.lateWrites.join("; ") || "—"}; ` +
    `${r.ok ? (r.check ? "ok" : "ok (self-check: the stale writes were seen)") : "FAIL"}`;
}
/** One line of topology figures for the console. */
function topologyLine(a: Analysis): string {
  const t = a.topology!;
  return `overlaps aware ${a.overlapsAware} / unaware ${a.overlapsUnaware} (expected ${a.overlapsUnawareExpected}), stale accepted ${a.staleAccepted}, ` +
    `hung acquires ${a.hungAcquires}, kill→promotion ${t.killToPromotionMs ?? "—"} ms, first grant ${
      t.firstGrantAfterChangeMs ?? "never"
    } ms after "${t.firstGrantFrom}" (bound ${t.firstGrantBoundMs}); changes: ${JSON.stringify(t.changes)}`;
}
/** "worker: message" lines → each distinct message once, with the workers that printed it. */
function groupWarnings(warnings: string[]): string {
  const by = new Map<string, string[]>();
  for (const w of warnings) {
    const i = w.indexOf(": ");
    const msg = w.slice(i + 2);
    by.set(msg, [...(by.get(msg) ?? []), w.slice(0, i)]);
  }
  return [...by].map(([msg, ws]) => `"${msg}" (by ${ws.length} workers: ${ws.join(", ")})`).join("; ");
}

const table = lines.join("\n");
console.log(`\n${table}`);

const dir = join(root, "chaos", "results");
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, `${out}.md`), `${table}\n`);
writeFileSync(
  join(dir, `${out}.json`),
  JSON.stringify({ at: new Date().toISOString(), runtimes, scenarios: raw }, null, 2),
);
console.log(`\nwrote chaos/results/${out}.md and chaos/results/${out}.json`);
if (notRun.length > 0) console.log(`not run (reported as such, not as passed): ${notRun.join(", ")}`);
process.exit(analyses.every((a) => a.ok) && notRun.length === 0 ? 0 : 1);
