// The checker: from the sections the workers recorded and what the resource server logged, count overlapping
// critical sections, lost counter updates and stale fenced writes, and split each into what lease loss
// explains (a holder whose lease was lost kept going: expected, and fenced) and what it does not (must be 0).
//
// Overlaps are decided on ONE clock, the resource redis-server's: each section's [first, last] resource command
// in the order that server executed them (with its TIME in µs). The workers' wall clocks (performance.timeOrigin
// + now(), one per process) disagree by a millisecond or two under load, so an overlap computed from them is
// kept only as a diagnostic (wallClockOverlapsLive) and decides nothing.
//
// Two more checks compare a worker's own times with the moment the lock server granted the lease, both on the
// servers' clock (see `timeline` below): holders still unaware of the end of their hold when the lease was granted
// to another worker, and the longest time a free lease sat idle while a non-faulted worker was waiting. And once
// the workers have exited, the lock server must hold nothing of theirs (LeakReport, from chaos/_scenario.ts).
import type { FaultEvent, ScenarioSpec } from "./_scenario.ts";
import type { Section, WorkerResult } from "./_protocol.ts";
import type { ResourceReport } from "./_resource.ts";

/** What the lock server still held after every worker process exited (see `leftovers` in chaos/_scenario.ts). */
export interface LeakReport {
  /** Lease hashes with an owner field: "<key> held by <owner>×<count>". */
  holds: string[];
  /** Wait queues (`redlease:*:q`) still present. */
  queues: string[];
  /** Channels still subscribed (PUBSUB CHANNELS, and PUBSUB SHARDCHANNELS marked "(shard)"). */
  channels: string[];
  /** Connections to the lock server other than the runner's own (diagnostic). */
  clients: number;
  /** Connections still open in the workers' proxies (diagnostic). */
  proxyConnections: number;
  /** How long the runner polled for the leftovers to go (at most 3 s). */
  waitedMs: number;
}

export interface VictimReport {
  worker: string;
  runtime: string;
  kind: string;
  /** How long the pause / block lasted as the worker measured it. */
  tookMs: number;
  /** The lease's TTL (watchdogMs or leaseMs): the fault must outlast it. */
  leaseMs: number;
  abortedAtResume: boolean;
  remainingAtResume: number;
  abortedAfterYield: boolean;
  abortedAtWrite: boolean | undefined;
  why: string | undefined;
  /** The late fenced write: "rejected", "accepted" or "not attempted". */
  lateWrite: string;
  released: boolean | string | undefined;
  ok: boolean;
}

export interface EvictionReport {
  pulses: number;
  evictedKeys: number;
  /** Sections in progress when a pulse evicted keys. */
  holdersHit: number;
  /** …whose signal aborted with LeaseLostError before their section ended / before release. */
  detectedBySignal: number;
  /** …that only found out because release() returned false. */
  detectedAtRelease: number;
  /** …that never found out (must not happen if the key was evicted). */
  undetected: number;
  whys: Record<string, number>;
  /** Pulse → signal abort, ms. */
  latencyMs: { min: number; p50: number; max: number } | null;
  /** Pulse → the next holder's section start, ms (how soon another worker got the lease). */
  nextHolderMs: { min: number; p50: number; max: number } | null;
}

/**
 * The topology scenarios' figures (ScenarioSpec.topology): every change the injector made (fault events with
 * `change: true` and `srvMs`, the servers' clock) with the first grant after it.
 */
export interface TopologyReport {
  changes: Array<{
    event: string;
    /** When the change took effect, ms after the start of the run (servers' clock). */
    atMs: number;
    /**
     * From the change to the first grant after it, ms: the grant time is the fence (the lock server's TIME at the
     * grant); null if no worker was granted the lease after it.
     */
    firstGrantAfterMs: number | null;
    /** From the change to the moment that grant's acquire() returned (the worker's clock mapped), ms. */
    firstAcquiredAfterMs: number | null;
    /**
     * acquire() calls that were waiting when the change took effect and then failed (LockTimeoutError or another
     * error), and the longest of them, ms: waiters that the change left waiting in vain.
     */
    failedAcrossChange: number | null;
    longestFailedAcrossChangeMs: number | null;
  }>;
  /** The change the bound applies to (TopologySpec.firstGrantFrom). */
  firstGrantFrom: string;
  /** The worst first grant after an occurrence of that change, ms; null: none after one of them (never). */
  firstGrantAfterChangeMs: number | null;
  firstGrantBoundMs: number;
  /** Kill → promotion, ms (the kill scenarios). */
  killToPromotionMs: number | null;
}

export interface Analysis {
  scenario: string;
  fault: string;
  workers: string;
  durationMs: number;
  acquisitions: number;
  acqPerSec: number;
  perWorker: Record<string, number>;
  /** Sections whose lease was lost (signal aborted with LeaseLostError, or release() said it was not held). */
  lostSections: number;
  lostByWhy: Record<string, number>;
  /**
   * Pairs of sections of different workers whose intervals on the resource server's clock intersect, neither
   * holder having lost its lease (must be 0) / at least one of them having lost it (expected, fenced).
   */
  overlapsLive: number;
  overlapsLost: number;
  /**
   * Smallest gap on the resource server's clock between one live section's last resource command and the next
   * live section's first one, ms (release + acquire + one round trip; negative only if they overlapped).
   */
  minHandoffGapMs: number | null;
  /**
   * Diagnostic only, decides nothing: live overlaps and the smallest live handoff gap computed from the workers'
   * own wall clocks (a different clock per process: under load they disagree by a millisecond or two, which
   * shows up here as small negative gaps and spurious overlaps).
   */
  wallClockOverlapsLive: number;
  wallClockMinHandoffGapMs: number | null;
  /** Sections no resource command of which completed (no server interval: they touched nothing there). */
  sectionsOffServer: number;
  /** Longest time nobody was inside a critical section (from the start of the run to its end; wall clocks), ms. */
  maxIdleMs: number;
  expectedIncrements: number;
  finalCounter: number;
  lostUpdates: number;
  lostUpdatesLive: number;
  lostUpdatesByLostHolders: number;
  fencedAccepted: number;
  fencedRejected: number;
  staleAccepted: number;
  lateWritesRejected: number;
  lateWritesAccepted: number;
  rejectedLiveWrites: number;
  fenceViolations: number;
  errors: Record<string, number>;
  victims: VictimReport[];
  eviction?: EvictionReport;
  faultEvents: Record<string, number>;
  failedWorkers: string[];
  /** Warning lines the workers printed on stderr (the library prints none today). */
  warnings: string[];
  /**
   * Holds whose holder still believed it held the lease (its lease.signal had not aborted, by its own clock) when
   * the lease was granted to another worker; null when not measurable (no worker clocks, or fences that are not
   * server timestamps). `unawareLive` must be 0; `unawareExpected` are holders whose process was paused/blocked
   * by the fault, or whose lease the lock server lost (restart, eviction); `unawareTimerLate` counts the live ones
   * whose local deadline (lease.expiresAt) had passed already, so that only the timer that aborts the signal ran
   * late. Details of the first few in `unawareDetails`.
   */
  unawareLive: number | null;
  unawareExpected: number | null;
  unawareTimerLate: number | null;
  unawareDetails: string[];
  /**
   * The least time, over live holds, from the holder's signal abort to the next grant to another worker, ms
   * (servers' clock; negative: unaware by that long). A diagnostic of the margin.
   */
  minRegrantMarginMs: number | null;
  /** The same over the live holds that were lost (their signal aborted with a LeaseLostError, or release() = false). */
  minLostRegrantMarginMs: number | null;
  /**
   * The longest time a free lease sat idle while at least one non-faulted worker was waiting for it, ms (from the
   * earliest moment it can have been freed, by a release or its expiry, to the moment the next holder had it:
   * its acquire() returned); null when not measurable. Must not exceed `idleBoundMs`.
   */
  maxIdleWaitingMs: number | null;
  idleBoundMs: number;
  /**
   * With a lock delay (acquireOptions.lockDelayMs): over the holds that ended without a release (lost, release()
   * false), the least time from the hold's end to the next grant to another worker, ms. The end is taken as the
   * holder's local deadline, which is never later than the server's expiry of the hold (the deadline is counted from
   * before the renewal was sent, less the drift allowance), so a delay kept makes this at least the delay (less the
   * clock error) whatever the timing; a smaller one fails the run. null without a delay or with no such hold.
   */
  lockDelay: { delayMs: number; uncleanEnds: number; minGapMs: number | null } | null;
  /** Where the longest idle interval was. */
  idleWorst: string | null;
  /** The largest error of the wall → server clock mapping over the workers, ms. */
  clockErrMs: number | null;
  /**
   * Overlapping pairs (overlapsLive + overlapsLost, exclusive sections) split by whether the older holder (lower
   * fence) had been told: its lease.signal had aborted, on the servers' clock, no later than the newer holder's
   * grant (within the clock error): aware; otherwise unaware. null when not measurable (no worker clocks).
   */
  overlapsAware: number | null;
  overlapsUnaware: number | null;
  /**
   * Of overlapsUnaware, those whose older holder's being unaware is expected, as for "unaware at re-grant": a
   * process the fault paused or blocked, or a lost lease when the fault loses lease data (spec.losesLeaseData).
   * The others fail the run.
   */
  overlapsUnawareExpected: number | null;
  unawareOverlapDetails: string[];
  /** acquire() calls that did not settle within waitMs + the margin (WorkerResult.hung): must be 0. */
  hungAcquires: number;
  hungDetails: string[];
  /** The topology scenarios' figures (null for the others). */
  topology: TopologyReport | null;
  /** What the lock server held after the workers exited; `leaked` = holds + queues + channels (must be 0). */
  leaks: LeakReport | null;
  leaked: number | null;
  problems: string[];
  ok: boolean;
  /** The resource scenarios: what each resource accepted and refused (set by runScenario, chaos/_resource.ts). */
  resource?: ResourceReport[];
}

export interface AnalyzeInput {
  spec: ScenarioSpec;
  workers: WorkerResult[];
  failed: Array<{ id: string; code: number | null; stderr: string }>;
  faults: FaultEvent[];
  startWall: number;
  endWall: number;
  counter: number;
  writes: string[];
  accepted: string[];
  /** Warning lines the workers printed on stderr. */
  warnings: string[];
  /** What the lock server held after the workers exited (absent: not checked). */
  leaks?: LeakReport;
}

const tag = (s: Section) => `${s.w}:${s.seq}`;

/** A section whose holder lost the lease before it was done with it. */
export function isLost(s: Section): boolean {
  return s.lostAt !== undefined || s.released === false;
}

type OnServer = Section & Required<Pick<Section, "srvStart" | "srvEnd" | "opStart" | "opEnd">>;

/** A section with an interval on the resource server's clock (at least one of its resource commands completed). */
function onServer(s: Section): s is OnServer {
  return s.opStart !== undefined && s.opEnd !== undefined && s.srvStart !== undefined && s.srvEnd !== undefined;
}

/** One line about a section for a problem report: its interval on both clocks. */
function describe(s: Section): string {
  return `${tag(s)} fence ${s.fence} server ops ${s.opStart}..${s.opEnd} (${s.srvStart}..${s.srvEnd} µs), ` +
    `wall ${s.start.toFixed(3)}..${s.end.toFixed(3)}${isLost(s) ? ` lost (${s.why ?? "release-false"})` : ""}`;
}

function spread(xs: number[]): { min: number; p50: number; max: number } | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const r = (x: number) => Math.round(x * 10) / 10;
  return { min: r(s[0]), p50: r(s[Math.floor((s.length - 1) / 2)]), max: r(s[s.length - 1]) };
}

export function analyze(input: AnalyzeInput): Analysis {
  const { spec, workers } = input;
  const problems: string[] = [];
  const sections = workers.flatMap((w) => w.sections).sort((a, b) => a.start - b.start);
  const byTag = new Map(sections.map((s) => [tag(s), s]));
  const runtimeOf = new Map(workers.map((w) => [w.id, w.runtime]));

  // --- overlapping critical sections, on the resource server's clock. The server runs one command at a time, so
  // its command sequence (opStart/opEnd) orders every resource command of every worker exactly; TIME (srv*, µs)
  // gives the same order but can tie within one microsecond. Sorted by first command, section b (later start)
  // overlaps a iff b's first command ran before a's last one.
  const stamped = sections.filter(onServer).sort((a, b) => a.opStart - b.opStart);
  let overlapsLive = 0;
  let overlapsLost = 0;
  const overlapping: Array<[Section, Section]> = [];
  for (let i = 0; i < stamped.length; i++) {
    const a = stamped[i];
    for (let j = i + 1; j < stamped.length && stamped[j].opStart < a.opEnd; j++) {
      const b = stamped[j];
      // Read-only sections (shared holds, permits) may overlap one another; permits are counted below.
      if (b.w === a.w || (a.readOnly && b.readOnly)) continue;
      overlapping.push([a, b]);
      if (isLost(a) || isLost(b)) overlapsLost++;
      else {
        overlapsLive++;
        if (overlapsLive <= 3) problems.push(`live overlap on the resource server: ${describe(a)} / ${describe(b)}`);
      }
    }
  }
  // Permits: never more than n live sections at once, on the resource server's clock (weighted: never more than n
  // permits, each section counting its hold's weight).
  let maxConcurrent = 0;
  if (spec.kind === "permits" || spec.kind === "weighted") {
    const events = stamped.filter((s) => !isLost(s))
      .flatMap((s) => [[s.opStart, s.weight ?? 1], [s.opEnd, -(s.weight ?? 1)]] as const)
      .sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    let now = 0;
    for (const [, d] of events) {
      now += d;
      if (now > maxConcurrent) maxConcurrent = now;
    }
    const n = spec.permits ?? 2;
    if (maxConcurrent > n) {
      overlapsLive += maxConcurrent - n;
      const what = spec.kind === "weighted" ? "permits taken by live holders" : "live permit holders";
      problems.push(`${maxConcurrent} ${what} at once on the resource server (n = ${n})`);
    }
  }
  // Live exclusive sections in server order (for live holders, that is grant order).
  const live = stamped.filter((s) => !isLost(s) && !s.readOnly);
  let minGap: number | null = null;
  for (let i = 1; i < live.length; i++) {
    const gap = (live[i].srvStart - live[i - 1].srvEnd) / 1000;
    if (minGap === null || gap < minGap) minGap = gap;
  }

  // --- the same from the workers' wall clocks: a diagnostic only (one clock per process; they disagree)
  let wallClockOverlapsLive = 0;
  for (let i = 0; i < sections.length; i++) {
    const a = sections[i];
    for (let j = i + 1; j < sections.length && sections[j].start < a.end; j++) {
      const b = sections[j];
      if (b.w !== a.w && !isLost(a) && !isLost(b)) wallClockOverlapsLive++;
    }
  }
  const liveByWall = sections.filter((s) => !isLost(s));
  let wallMinGap: number | null = null;
  for (let i = 1; i < liveByWall.length; i++) {
    const gap = liveByWall[i].start - liveByWall[i - 1].end;
    if (wallMinGap === null || gap < wallMinGap) wallMinGap = gap;
  }

  let maxIdle = 0;
  let busyUntil = input.startWall;
  for (const s of sections) {
    maxIdle = Math.max(maxIdle, s.start - busyUntil);
    busyUntil = Math.max(busyUntil, s.end);
  }
  maxIdle = Math.max(maxIdle, input.endWall - busyUntil);

  // --- lost counter updates. Each write sets counter = read + 1 and reports what it overwrote (old), so the
  // final counter is (number of writes) − Σ (old − read): a section whose old ≠ read had other writes land
  // between its read and its write. Those writers are the write-log entries between the two.
  const written = sections.filter((s) => s.writeIdx !== undefined && s.read !== undefined);
  const expected = input.writes.length;
  if (written.length !== expected) {
    problems.push(`write log has ${expected} entries but workers report ${written.length} writes`);
  }
  let drift = 0;
  let driftLive = 0;
  let lostUpdatesLive = 0;
  for (const s of written) {
    const d = s.old! - s.read!;
    drift += d;
    if (d === 0) continue;
    const between = input.writes.slice(s.readLen!, s.writeIdx! - 1).map((t) => byTag.get(t));
    if (between.some((b) => b === undefined)) problems.push(`write log entry of an unknown section near ${tag(s)}`);
    if (isLost(s) || between.some((b) => b === undefined || isLost(b))) continue;
    driftLive += d;
    lostUpdatesLive += Math.abs(d);
    if (lostUpdatesLive <= 3) {
      problems.push(`lost update among live holders at ${tag(s)}: read ${s.read}, overwrote ${s.old}`);
    }
  }
  const lostUpdates = expected - input.counter;
  if (written.length === expected && drift !== lostUpdates) {
    problems.push(`counter accounting mismatch: Σ(old − read) = ${drift}, expected − final = ${lostUpdates}`);
  }

  // --- fenced register: replay the accepted log in server order
  let staleAccepted = 0;
  let maxToken = 0;
  for (const line of input.accepted) {
    const token = Number(line.split(" ")[0]);
    if (!(token > maxToken)) {
      staleAccepted++;
      problems.push(`stale fenced write accepted: ${line} after token ${maxToken}`);
    }
    maxToken = Math.max(maxToken, token);
  }
  const fencedAccepted = sections.filter((s) => s.fenced === 1).length;
  const fencedRejected = sections.filter((s) => s.fenced === 0).length;
  if (fencedAccepted !== input.accepted.length) {
    problems.push(`register logged ${input.accepted.length} accepted writes, workers saw ${fencedAccepted}`);
  }
  const lateWritesRejected = sections.filter((s) => isLost(s) && s.fenced === 0).length;
  const lateWritesAccepted = sections.filter((s) => isLost(s) && s.fenced === 1).length;
  const rejectedLiveWrites = sections.filter((s) => !isLost(s) && s.fenced === 0).length;
  if (rejectedLiveWrites > 0) problems.push(`${rejectedLiveWrites} fenced writes of live holders rejected`);

  // --- fences: unique per grant, and increasing in grant order (= server order, for live sections)
  let fenceViolations = 0;
  const seen = new Set<number>();
  for (const s of sections) {
    if (seen.has(s.fence)) fenceViolations++;
    seen.add(s.fence);
  }
  for (let i = 1; i < live.length; i++) if (!(live[i].fence > live[i - 1].fence)) fenceViolations++;
  if (fenceViolations > 0) problems.push(`${fenceViolations} fence order violations`);

  // --- errors and losses
  const errors: Record<string, number> = {};
  for (const w of workers) for (const [k, n] of Object.entries(w.errors)) errors[k] = (errors[k] ?? 0) + n;
  const lostByWhy: Record<string, number> = {};
  for (const s of sections) {
    if (!isLost(s)) continue;
    const k = s.why ?? "release-false";
    lostByWhy[k] = (lostByWhy[k] ?? 0) + 1;
  }
  const perWorker: Record<string, number> = {};
  for (const w of workers) perWorker[w.id] = w.sections.length;

  // --- the workers that paused or blocked themselves
  const leaseMs = spec.leaseMs ?? spec.watchdogMs ?? 300;
  const victims: VictimReport[] = sections.filter((s) => s.fault).map((s) => {
    const f = s.fault!;
    const r: VictimReport = {
      worker: s.w,
      runtime: runtimeOf.get(s.w) ?? "?",
      kind: f.kind,
      tookMs: Math.round(f.tookMs),
      leaseMs,
      abortedAtResume: f.abortedAtResume,
      remainingAtResume: Math.round(f.remainingAtResume),
      abortedAfterYield: f.abortedAfterYield,
      abortedAtWrite: s.abortedAtWrite,
      why: f.why ?? s.why,
      lateWrite: s.fenced === 0 ? "rejected" : s.fenced === 1 ? "accepted" : "not attempted",
      released: s.releaseErr ?? s.released,
      ok: false,
    };
    // (Under a lock delay that outlasts the fault nobody else was granted meanwhile, so the fenced register takes
    // the late write: it is no longer stale. Otherwise a newer holder wrote first, and it must be rejected.)
    const lateOk = spec.resource?.lockDelayCovers ? s.fenced === 1 : s.fenced === 0;
    r.ok = f.tookMs > leaseMs && f.abortedAfterYield && s.abortedAtWrite === true && lateOk && isLost(s);
    if (!r.ok) problems.push(`victim not handled as expected: ${JSON.stringify(r)}`);
    return r;
  });
  const expectedVictims = spec.victims?.length ?? 0;
  if (victims.length !== expectedVictims) {
    problems.push(`${expectedVictims} faults planned in workers, ${victims.length} applied`);
  }

  // --- eviction: who was holding when keys were evicted, and how they found out
  let eviction: EvictionReport | undefined;
  const pulses = input.faults.filter((f) => f.event === "eviction pulse" && Number(f.evicted) > 0);
  if (input.faults.some((f) => f.event === "eviction pulse")) {
    const latency: number[] = [];
    const next: number[] = [];
    const whys: Record<string, number> = {};
    let hit = 0, bySignal = 0, atRelease = 0, undetected = 0;
    for (const p of pulses) {
      const from = Number(p.from), to = Number(p.to);
      for (const s of sections) {
        if (!(s.start < from && s.end > to)) continue;
        hit++;
        if (s.lostAt !== undefined) {
          bySignal++;
          latency.push(s.lostAt - from);
          whys[s.why!] = (whys[s.why!] ?? 0) + 1;
        } else if (s.released === false) atRelease++;
        else undetected++;
        const after = sections.find((o) => o.w !== s.w && o.start > from);
        if (after) next.push(after.start - from);
      }
    }
    eviction = {
      pulses: input.faults.filter((f) => f.event === "eviction pulse").length,
      evictedKeys: pulses.reduce((n, p) => n + Number(p.evicted), 0),
      holdersHit: hit,
      detectedBySignal: bySignal,
      detectedAtRelease: atRelease,
      undetected,
      whys,
      latencyMs: spread(latency),
      nextHolderMs: spread(next),
    };
  }

  const faultEvents: Record<string, number> = {};
  for (const f of input.faults) faultEvents[f.event] = (faultEvents[f.event] ?? 0) + 1;
  for (const f of input.failed) {
    problems.push(`worker ${f.id} produced no result (exit ${f.code}): ${f.stderr.slice(-500)}`);
  }
  if (sections.length === 0) problems.push("no critical sections at all");

  // Grant order, idle and unaware checks reason about one holder at a time: exclusive kinds only.
  const tl = spec.kind === "shared" || spec.kind === "permits" || spec.kind === "weighted"
    ? timeline({ ...input, workers: [] }, [], []) // not measured (null)
    : timeline(input, sections, problems);
  if (Number(spec.acquireOptions?.lockDelayMs ?? 0) > 0 && tl.lockDelay === null) {
    problems.push("lock delay set, but the grant times could not be measured: the delay was not checked");
  }
  const leaks = input.leaks ?? null;
  const leaked = leaks ? leaks.holds.length + leaks.queues.length + leaks.channels.length : null;
  if (leaks && leaked! > 0) {
    problems.push(
      `left on the lock server after the workers exited: ${
        [...leaks.holds, ...leaks.queues, ...leaks.channels.map((c) => `channel ${c}`)].join("; ")
      }`,
    );
  }

  const aware = awareness(input, overlapping);
  const unawareUnexpected = (aware.overlapsUnaware ?? 0) - (aware.overlapsUnawareExpected ?? 0);
  if (unawareUnexpected > 0) {
    problems.push(`${unawareUnexpected} overlaps with an older holder not yet told: ${aware.details.join("; ")}`);
  }
  const hung = workers.flatMap((w) =>
    (w.hung ?? []).map((h) =>
      `${w.id} acquire from ${Math.round(h.acqStart - input.startWall)} ms (run time) not settled by ` +
      `${Math.round(h.detectedAt - h.acqStart)} ms: ${
        h.settledAt === undefined ? "never settled" : `settled after ${Math.round(h.settledAt - h.acqStart)} ms`
      } (${h.outcome})`
    )
  );
  if (hung.length > 0) problems.push(`${hung.length} hung acquires: ${hung.slice(0, 3).join("; ")}`);
  const topology = spec.topology ? topologyReport(input, sections, problems) : null;

  const durationMs = input.endWall - input.startWall;
  const ok = overlapsLive === 0 && staleAccepted === 0 && lostUpdatesLive === 0 && rejectedLiveWrites === 0 &&
    fenceViolations === 0 && problems.length === 0;
  void driftLive;
  return {
    scenario: spec.name,
    fault: spec.fault,
    workers: summarizeRuntimes(workers.map((w) => w.runtime).concat(input.failed.map((f) => `${f.id}(failed)`))),
    durationMs,
    acquisitions: sections.length,
    acqPerSec: Math.round(sections.length / (durationMs / 1000)),
    perWorker,
    lostSections: sections.filter(isLost).length,
    lostByWhy,
    overlapsLive,
    overlapsLost,
    minHandoffGapMs: minGap === null ? null : Math.round(minGap * 1000) / 1000,
    wallClockOverlapsLive,
    wallClockMinHandoffGapMs: wallMinGap === null ? null : Math.round(wallMinGap * 1000) / 1000,
    sectionsOffServer: sections.length - stamped.length,
    maxIdleMs: Math.round(maxIdle),
    expectedIncrements: expected,
    finalCounter: input.counter,
    lostUpdates,
    lostUpdatesLive,
    lostUpdatesByLostHolders: lostUpdates - driftLive,
    fencedAccepted,
    fencedRejected,
    staleAccepted,
    lateWritesRejected,
    lateWritesAccepted,
    rejectedLiveWrites,
    fenceViolations,
    errors,
    victims,
    eviction,
    faultEvents,
    failedWorkers: input.failed.map((f) => f.id),
    warnings: input.warnings.slice(0, 20),
    ...tl,
    overlapsAware: aware.overlapsAware,
    overlapsUnaware: aware.overlapsUnaware,
    overlapsUnawareExpected: aware.overlapsUnawareExpected,
    unawareOverlapDetails: aware.details,
    hungAcquires: hung.length,
    hungDetails: hung.slice(0, 10),
    topology,
    leaks,
    leaked,
    problems,
    ok,
  };
}

/** Maps a worker's wall ms to the servers' clock (null: some worker has no clock sync, e.g. synthetic inputs). */
function serverClock(
  workers: WorkerResult[],
): { srv: (w: string, t: number) => number; err: (w: string) => number } | null {
  if (workers.length === 0 || workers.some((w) => !w.clock)) return null;
  const clocks = new Map(workers.map((w) => [w.id, w.clock!]));
  return { srv: (w, t) => t + clocks.get(w)!.offsetMs, err: (w) => clocks.get(w)!.errMs };
}

/**
 * For each overlapping pair, whether the older holder (lower fence) had been told before the newer grant: its
 * signal's abort (mapped to the servers' clock) no later than the newer fence's grant time + its clock error.
 * Details name the first unexpected ones (see Analysis.overlapsUnawareExpected).
 */
function awareness(
  input: AnalyzeInput,
  pairs: Array<[Section, Section]>,
): {
  overlapsAware: number | null;
  overlapsUnaware: number | null;
  overlapsUnawareExpected: number | null;
  details: string[];
} {
  const clock = serverClock(input.workers);
  if (!clock || input.spec.noLock) {
    return { overlapsAware: null, overlapsUnaware: null, overlapsUnawareExpected: null, details: [] };
  }
  let aware = 0, unaware = 0, expected = 0;
  const details: string[] = [];
  for (const [x, y] of pairs) {
    const [older, newer] = x.fence < y.fence ? [x, y] : [y, x];
    const grant = newer.fence / 1000;
    const told = older.abortAt === undefined ? Infinity : clock.srv(older.w, older.abortAt);
    if (told <= grant + clock.err(older.w)) aware++;
    else {
      unaware++;
      if (pausedOrBlocked(older) || (input.spec.losesLeaseData === true && isLost(older))) {
        expected++;
        continue;
      }
      if (details.length < 3) {
        details.push(
          `${tag(older)} (fence ${older.fence}${isLost(older) ? `, lost: ${older.why ?? "release-false"}` : ""}) ` +
            `told ${told === Infinity ? "never" : `${Math.round((told - grant) * 10) / 10} ms after`} ` +
            `${tag(newer)} was granted`,
        );
      }
    }
  }
  return { overlapsAware: aware, overlapsUnaware: unaware, overlapsUnawareExpected: expected, details };
}

/** The topology figures: each change (fault events with change/srvMs) and the first grant after it. */
function topologyReport(input: AnalyzeInput, sections: Section[], problems: string[]): TopologyReport {
  const t = input.spec.topology!;
  const clock = serverClock(input.workers);
  const bound = t.firstGrantBoundMs ?? 2_000;
  const r1 = (x: number) => Math.round(x * 10) / 10;
  const runStart = clock ? clock.srv(input.workers[0].id, input.startWall) : NaN;
  const changes = input.faults.filter((f) => f.change === true && typeof f.srvMs === "number").map((f) => {
    const at = f.srvMs as number;
    const after = sections.filter((s) => s.fence / 1000 >= at).sort((a, b) => a.fence - b.fence);
    const first = after[0];
    const across = clock
      ? input.workers.flatMap((w) =>
        (w.failedWaits ?? []).filter(([a, b]) => clock.srv(w.id, a) < at && clock.srv(w.id, b) > at).map(([a, b]) =>
          b - a
        )
      )
      : null;
    return {
      event: f.event,
      atMs: Math.round(at - runStart),
      firstGrantAfterMs: first ? r1(first.fence / 1000 - at) : null,
      firstAcquiredAfterMs: first && clock ? r1(clock.srv(first.w, first.start) - at) : null,
      failedAcrossChange: across ? across.length : null,
      longestFailedAcrossChangeMs: across && across.length > 0 ? Math.round(Math.max(...across)) : null,
    };
  });
  const from = changes.filter((c) => c.event === t.firstGrantFrom);
  let worst: number | null = from.length === 0 ? null : 0;
  for (const c of from) {
    worst = worst === null || c.firstGrantAfterMs === null ? null : Math.max(worst, c.firstGrantAfterMs);
  }
  if (from.length === 0) problems.push(`the topology change "${t.firstGrantFrom}" did not happen`);
  else if (worst === null) problems.push(`no grant after "${t.firstGrantFrom}" until the end of the run`);
  else if (worst > bound) problems.push(`first grant ${worst} ms after "${t.firstGrantFrom}" (bound ${bound} ms)`);
  const k2p = input.faults.find((f) => f.event === "kill to promotion");
  return {
    changes,
    firstGrantFrom: t.firstGrantFrom,
    firstGrantAfterChangeMs: worst,
    firstGrantBoundMs: bound,
    killToPromotionMs: k2p ? Number(k2p.ms) : null,
  };
}

/** Redlock's drift allowance, as the library computes it (src/_hold.ts): 1 % of the lease plus 2 ms. */
const drift = (ms: number) => Math.floor(ms * 0.01) + 2;

/**
 * The default idle bound: a grant handed to a waiter that cannot claim it (deaf, partitioned, dead) passes on
 * when its claim window ends, and a queued waiter that missed a message re-checks on a heartbeat of `claimMs`, so
 * after one fault a free lease waits at most about claimMs + claimMs for a live waiter; plus 500 ms of slack for
 * this 2-core machine shared by ~6 worker processes, two redis-servers and the proxies (scheduling, reconnects).
 */
export function idleBound(spec: ScenarioSpec): number {
  return spec.idleBoundMs ?? 2 * (spec.claimMs ?? 1_000) + 500;
}

type Timeline = Pick<
  Analysis,
  | "unawareLive"
  | "unawareExpected"
  | "unawareTimerLate"
  | "unawareDetails"
  | "minRegrantMarginMs"
  | "minLostRegrantMarginMs"
  | "maxIdleWaitingMs"
  | "idleBoundMs"
  | "lockDelay"
  | "idleWorst"
  | "clockErrMs"
>;

/**
 * The grant-time checks, on ONE clock: the servers'. Both redis-servers run on this host and read the same system
 * clock, and the library stamps every grant with it: a fence is max(lock server TIME in µs, last fence + 1)
 * (lua/_record.lua), so `fence / 1000` is the server ms at which that grant was made, to within a microsecond per
 * grant made in the same microsecond. (Checked below: no grant may postdate the moment its holder learned of it,
 * nor be far off the run; otherwise these metrics are not computed.) A worker's own times (its signal's abort,
 * its release, its waits) are mapped to the servers' clock by its ClockSync: TIME on the resource server,
 * bracketed by two wall-clock reads, best of 12, before and after the run (±errMs, typically well under 1 ms).
 *
 * Holders unaware at re-grant: a hold's belief ends when its lease.signal aborts (a loss, or release(), which
 * aborts it first thing). For each hold, the next grant to ANOTHER worker is the section with the smallest fence
 * above its own; the holder was unaware iff its abort, mapped, is later than that grant by more than its clock
 * error (so a reported case is certain; one within the error, < 1 ms, could be missed). Only grants some worker
 * went on to use are seen (a grant nobody learned of made nobody write).
 *
 * Idle with live waiters: going through the sections in grant (fence) order, the lease is taken to be free from
 * the earliest moment the previous holds can have ended on the server: a release that succeeded ran after the
 * release started; otherwise (lost, or release failed) the lease expired no earlier than its local deadline plus
 * the drift allowance (the deadline is taken that much before the TTL the server set), or was released no
 * earlier than the release started, whichever is earlier. It is idle until the next holder HAS it: its acquire()
 * returned, not merely the grant (a grant handed to a waiter that cannot hear or claim it, or whose reply is
 * lost, leaves the lease idle all the same until someone can use it). So idle is over- rather than
 * under-estimated, except after a "not-held" loss (the lease was gone earlier, at a time no worker saw). Of that
 * interval, only the time during which at least one non-faulted worker was inside an acquire() call counts; the
 * longest such stretch is the metric.
 */
function timeline(input: AnalyzeInput, sections: Section[], problems: string[]): Timeline {
  const { spec, workers } = input;
  const none: Timeline = {
    unawareLive: null,
    unawareExpected: null,
    unawareTimerLate: null,
    unawareDetails: [],
    minRegrantMarginMs: null,
    minLostRegrantMarginMs: null,
    maxIdleWaitingMs: null,
    idleBoundMs: idleBound(spec),
    lockDelay: null,
    idleWorst: null,
    clockErrMs: null,
  };
  if (spec.noLock || workers.length === 0) return none;
  const clocks = new Map(workers.map((w) => [w.id, w.clock]));
  if (workers.some((w) => !w.clock)) {
    if (workers.some((w) => w.clock)) problems.push("some workers reported no clock sync");
    return none;
  }
  const off = (w: string) => clocks.get(w)!.offsetMs;
  const err = (w: string) => clocks.get(w)!.errMs;
  const srv = (w: string, t: number) => t + off(w);
  const clockErrMs = Math.max(...workers.map((w) => w.clock!.errMs));
  const r1 = (x: number) => Math.round(x * 10) / 10;
  const at = (ms: number) => `+${Math.round(ms - srv(workers[0].id, input.startWall))} ms`;

  // Fences must be grant times on the servers' clock.
  const runStart = srv(workers[0].id, input.startWall);
  const bad = sections.filter((s) => {
    const g = s.fence / 1000;
    return !(g <= srv(s.w, s.start) + err(s.w) + 1) || g < runStart - 60_000;
  });
  if (bad.length > 0) {
    problems.push(
      `fences are not grant times on the servers' clock (${bad.length} sections, e.g. ${describe(bad[0])}): ` +
        "unaware/idle not measured",
    );
    return { ...none, clockErrMs };
  }
  const untimed = sections.filter((s) => s.abortAt === undefined || s.deadlineAt === undefined);
  if (untimed.length > 0) {
    problems.push(`${untimed.length} sections without abort/deadline times, e.g. ${tag(untimed[0])}`);
  }
  const byFence = sections.filter((s) => s.abortAt !== undefined && s.deadlineAt !== undefined)
    .sort((a, b) => a.fence - b.fence);

  // --- holders unaware at re-grant
  let live = 0, expected = 0, timerLate = 0;
  let minMargin: number | null = null;
  let minLostMargin: number | null = null;
  const details: string[] = [];
  for (let i = 0; i < byFence.length; i++) {
    const s = byFence[i];
    let j = i + 1;
    while (j < byFence.length && (byFence[j].w === s.w || byFence[j].fence <= s.fence)) j++;
    if (j === byFence.length) continue;
    const next = byFence[j];
    const g = next.fence / 1000;
    // The holder stops believing it holds the lease when it calls release() (`end`), or when its signal aborts, which
    // release() does only after it has sent the command: a client that writes at once (ioredis) can have the release
    // run, and the lease handed over, before the abort is seen.
    const belief = srv(s.w, s.end > 0 ? Math.min(s.abortAt!, s.end) : s.abortAt!);
    const margin = g - belief;
    const isExpected = pausedOrBlocked(s) || (spec.losesLeaseData === true && isLost(s));
    if (!isExpected && (minMargin === null || margin < minMargin)) minMargin = margin;
    if (!isExpected && isLost(s) && (minLostMargin === null || margin < minLostMargin)) minLostMargin = margin;
    if (margin >= -err(s.w)) continue;
    const deadlinePassed = srv(s.w, s.deadlineAt!) < g;
    if (isExpected) expected++;
    else {
      live++;
      if (deadlinePassed) timerLate++;
    }
    if (details.length < 5 && !isExpected) {
      details.push(
        `${tag(s)} (fence ${s.fence}${isLost(s) ? `, lost: ${s.why ?? "release-false"}` : ""}) still held by its ` +
          `own account ${r1(-margin)} ms after ${tag(next)} was granted at ${at(g)} (its local deadline ` +
          `${deadlinePassed ? "had passed" : "had not passed"}: ${r1(srv(s.w, s.deadlineAt!) - g)} ms)`,
      );
    }
  }
  if (live > 0) problems.push(`${live} holders unaware at re-grant: ${details.join("; ")}`);

  // --- lock delay: no grant to another worker within the delay after a hold that ended without a release
  const delayMs = Number(spec.acquireOptions?.lockDelayMs ?? 0);
  let lockDelay: Timeline["lockDelay"] = null;
  if (delayMs > 0) {
    let unclean = 0;
    let minGap: number | null = null;
    for (let i = 0; i < byFence.length; i++) {
      const s = byFence[i];
      if (!isLost(s) || s.released === true) continue;
      unclean++;
      let j = i + 1;
      while (j < byFence.length && (byFence[j].w === s.w || byFence[j].fence <= s.fence)) j++;
      if (j === byFence.length) continue;
      const next = byFence[j];
      const gap = next.fence / 1000 - srv(s.w, s.deadlineAt!);
      if (minGap === null || gap < minGap) minGap = gap;
      if (gap < delayMs - err(s.w) - 1) {
        problems.push(
          `${tag(next)} was granted ${r1(gap)} ms after ${tag(s)}'s hold ended without a release ` +
            `(lock delay ${delayMs} ms)`,
        );
      }
    }
    if (unclean === 0) problems.push("lock delay: no hold ended without a release, so the delay was not tested");
    lockDelay = { delayMs, uncleanEnds: unclean, minGapMs: minGap === null ? null : r1(minGap) };
  }

  // --- idle with live waiters
  const leaseMs = spec.leaseMs ?? spec.watchdogMs ?? 300;
  const faulted = new Set([...(spec.faulted ?? []), ...(spec.victims ?? []).map((v) => v.worker)]);
  const ids = workers.map((w) => w.id);
  // Worker ids are "<runtime>-<n>" in spec order; map an index to its id the same way the runner does.
  const counts: Record<string, number> = {};
  const idOf = spec.workers.map((rt) => `${rt}-${(counts[rt] = (counts[rt] ?? -1) + 1)}`);
  const faultedIds = new Set([...faulted].map((i) => idOf[i]));
  const waits: Array<[number, number]> = [];
  for (const w of workers) {
    if (faultedIds.has(w.id)) continue;
    for (const s of w.sections) if (s.acqStart !== undefined) waits.push([srv(w.id, s.acqStart), srv(w.id, s.start)]);
    for (const [a, b] of w.failedWaits ?? []) waits.push([srv(w.id, a), srv(w.id, b)]);
  }
  waits.sort((a, b) => a[0] - b[0]);
  const union: Array<[number, number]> = [];
  for (const [a, b] of waits) {
    const last = union[union.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else union.push([a, b]);
  }
  // (With a lock delay, a hold whose release() said false was not freed by it: free once the delay after it ends.)
  const freeAt = (s: Section) =>
    s.released === true
      ? srv(s.w, s.end)
      : delayMs > 0 && s.released === false
      ? srv(s.w, s.deadlineAt!) + drift(leaseMs) + delayMs
      : Math.min(srv(s.w, s.end), srv(s.w, s.deadlineAt!) + drift(leaseMs));
  let maxIdle = 0;
  let idleWorst: string | null = null;
  let busy = -Infinity;
  let busyBy: Section | undefined;
  for (const t of byFence) {
    const g = srv(t.w, t.start);
    if (busyBy && g > busy) {
      for (const [a, b] of union) {
        if (a >= g) break;
        const len = Math.min(b, g) - Math.max(a, busy);
        if (len > maxIdle) {
          maxIdle = len;
          idleWorst = `free from ${at(busy)} (end of ${tag(busyBy)}) until ${tag(t)} had it at ${at(g)} ` +
            `(granted at ${at(t.fence / 1000)}); ` +
            `non-faulted waiters throughout ${at(Math.max(a, busy))}..${at(Math.min(b, g))}`;
        }
      }
    }
    const f = freeAt(t);
    if (f > busy) {
      busy = f;
      busyBy = t;
    }
  }
  if (ids.length > 0 && faultedIds.size >= ids.length) idleWorst = "every worker is faulted: not measured";
  const bound = idleBound(spec);
  if (maxIdle > bound) problems.push(`a free lease sat idle ${Math.round(maxIdle)} ms (bound ${bound}): ${idleWorst}`);

  return {
    unawareLive: live,
    unawareExpected: expected,
    unawareTimerLate: timerLate,
    unawareDetails: details,
    minRegrantMarginMs: minMargin === null ? null : r1(minMargin),
    minLostRegrantMarginMs: minLostMargin === null ? null : r1(minLostMargin),
    maxIdleWaitingMs: Math.round(maxIdle),
    idleBoundMs: bound,
    lockDelay,
    idleWorst,
    clockErrMs: r1(clockErrMs),
  };
}

function summarizeRuntimes(names: string[]): string {
  const counts = new Map<string, number>();
  for (const n of names) counts.set(n, (counts.get(n) ?? 0) + 1);
  return [...counts].map(([n, c]) => `${c}×${n}`).join(" ");
}

/**
 * A section whose process the fault paused (SIGSTOP) or blocked (event loop): it cannot have been told of a re-grant
 * in time, so its being unaware is expected. A partitioned holder's process runs: it must have been told.
 */
function pausedOrBlocked(s: Section): boolean {
  return s.fault !== undefined && s.fault.kind !== "partition";
}
