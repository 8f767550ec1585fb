/**
 * `redlease/otel`: OpenTelemetry metrics and spans for redlease's lease events, through `@opentelemetry/api` only (an
 * optional peer dependency: the SDK, its exporters and its context manager are the application's). Nothing here is
 * loaded unless this entry is imported; the core never imports it.
 *
 * {@linkcode otel} makes a {@linkcode LeaseEventHandler} to register with `configure(client, { onEvent })`. It records:
 *
 * | instrument | type | unit | attributes |
 * |---|---|---|---|
 * | `redlease.lease.wait.duration` | histogram | `s` | `redlease.lease.kind`, `redlease.acquire.outcome` |
 * | `redlease.lease.hold.duration` | histogram | `s` | `redlease.lease.kind`, `redlease.lease.end` |
 * | `redlease.lease.acquisitions` | counter | `{acquisition}` | `redlease.lease.kind`, `redlease.acquire.outcome`, and for `acquired`: `redlease.acquire.queued`, `redlease.acquire.handed_off`, `redlease.acquire.reentered` |
 * | `redlease.lease.renewal.failures` | counter | `{failure}` | `redlease.lease.kind`, `error.type` |
 * | `redlease.lease.lost` | counter | `{lease}` | `redlease.lease.kind`, `redlease.lease.loss.reason` |
 * | `redlease.lease.passed_on` | counter | `{grant}` | `redlease.lease.kind` |
 * | `redlease.lease.held` | up-down counter | `{lease}` | `redlease.lease.kind` |
 *
 * and a span `redlease acquire` per acquire (per name of a lease over several names), from the call to its outcome,
 * child of the caller's active span. `redlease.lease.name` goes on spans only unless `leaseName: "all"`.
 *
 * @example Record every lease of a client
 * ```ts
 * import { configure } from "redlease";
 * import { otel } from "redlease/otel";
 * configure(client, { onEvent: otel() });
 * ```
 *
 * @module
 */
import {
  type Attributes,
  context,
  type Histogram,
  type MeterProvider,
  metrics,
  type ObservableResult,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
  type TracerProvider,
  ValueType,
} from "@opentelemetry/api";
import type { AcquiredEvent, AcquireFailedEvent, LeaseEvent, LeaseEventHandler } from "./events.ts";
import { checkKeys, fail } from "./_validate.ts";
import { isRedisUnavailableError } from "./errors.ts";

export type * from "./events.ts";
export type { LeaseKind } from "./lease.ts";
export type { LeaseLossReason, LeaseLostError, RedleaseError } from "./errors.ts";

/** Where the `redlease.lease.name` attribute goes: see {@linkcode OtelOptions.leaseName}. */
export type LeaseNameAttribute = "spans" | "all" | "none";

/**
 * Where metrics go: a `MeterProvider` of `@opentelemetry/api`, as the SDK's `MeterProvider` is, or
 * `metrics.getMeterProvider()`. Declared by the one method redlease calls, so that this entry's types stand without
 * the API's.
 */
export interface MeterProviderLike {
  /** The meter of an instrumentation scope (`MeterProvider.getMeter` of `@opentelemetry/api`). */
  getMeter(name: string): object;
}

/**
 * Where spans go: a `TracerProvider` of `@opentelemetry/api`, as the SDK's tracer providers are, or
 * `trace.getTracerProvider()`. Declared by the one method redlease calls, so that this entry's types stand without
 * the API's.
 */
export interface TracerProviderLike {
  /** The tracer of an instrumentation scope (`TracerProvider.getTracer` of `@opentelemetry/api`). */
  getTracer(name: string): object;
}

/** Options of {@linkcode otel}. */
export interface OtelOptions {
  /**
   * Where the metrics go. Without it, the global meter provider (`metrics.setGlobalMeterProvider`, as the
   * OpenTelemetry SDK's `start()` registers it) is looked up at each event, so a handler made before the SDK starts
   * records once it has.
   * @default {the global meter provider of `@opentelemetry/api`}
   * @example
   * ```ts
   * import { MeterProvider } from "@opentelemetry/sdk-metrics";
   * configure(client, { onEvent: otel({ meterProvider: new MeterProvider({ readers: [reader] }) }) });
   * ```
   */
  readonly meterProvider?: MeterProviderLike;
  /**
   * Where the acquire spans go.
   * @default {the global tracer provider of `@opentelemetry/api`}
   * @example
   * ```ts
   * configure(client, { onEvent: otel({ tracerProvider: provider }) });
   * ```
   */
  readonly tracerProvider?: TracerProviderLike;
  /**
   * Where the lease name goes, as the `redlease.lease.name` attribute. Lease names are often unbounded (`invoice:42`,
   * one per job), and every distinct set of metric attributes is a time series kept until the process ends, so by
   * default the name goes on spans only (`"spans"`, where each span carries its own). `"all"` puts it on the metrics
   * too, for a fixed, small set of names; `"none"` leaves it out everywhere (names that must not leave the process).
   * @default {"spans"}
   * @example A handful of well-known leases: break the metrics down by name
   * ```ts
   * configure(client, { onEvent: otel({ leaseName: "all" }) });
   * ```
   */
  readonly leaseName?: LeaseNameAttribute;
}

// Instrumentation scope: the library's name (its instruments are told apart from the application's by it).
const SCOPE = "redlease";
const SPAN = "redlease acquire";
const KIND = "redlease.lease.kind";
const NAME = "redlease.lease.name";
const OUTCOME = "redlease.acquire.outcome";
const ERROR_TYPE = "error.type";
const QUEUED = "redlease.acquire.queued";
const HANDED_OFF = "redlease.acquire.handed_off";
const REENTERED = "redlease.acquire.reentered";
const END = "redlease.lease.end";
const LOSS_REASON = "redlease.lease.loss.reason";
// Durations in seconds, as OpenTelemetry's conventions want them; the SDK's default buckets (0 to 10,000) are made
// for milliseconds and would put nearly every wait in the first one. A view can replace these.
const WAIT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const HOLD_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600];
/** The most distinct `error.type` values one handler keeps; later ones count as `_OTHER` (bounded cardinality). */
const MAX_ERROR_TYPES = 32;

interface Instruments {
  readonly wait: Histogram;
  readonly hold: Histogram;
}

/** Counts per attribute set (the sets are made once and reused, so they key the map by identity). */
type Tally = Map<Attributes, number>;

/** The counters, kept here and read by the SDK when it collects (an increment per event, nothing recorded). */
interface Tallies {
  readonly acquisitions: Tally;
  readonly renewalFailures: Tally;
  readonly lost: Tally;
  readonly passedOn: Tally;
  readonly held: Tally;
}

function count(tally: Tally, attributes: Attributes, by: number): void {
  tally.set(attributes, (tally.get(attributes) ?? 0) + by);
}

/**
 * The instruments on `provider`'s meter. The histograms are recorded per event; the counters are observable ones
 * that report `tallies` when the SDK collects: a synchronous counter costs the SDK a hash of its attributes per
 * event, about a microsecond each, five times per acquire and release (measured with bench/client_cost.ts).
 */
function instruments(provider: MeterProvider, tallies: Tallies): Instruments {
  const meter = provider.getMeter(SCOPE);
  const observe = (tally: Tally) => (result: ObservableResult) => {
    for (const [attributes, value] of tally) result.observe(value, attributes);
  };
  meter.createObservableCounter("redlease.lease.acquisitions", {
    unit: "{acquisition}",
    valueType: ValueType.INT,
    description: "Acquire calls, by outcome: acquired, timeout, aborted or error.",
  }).addCallback(observe(tallies.acquisitions));
  meter.createObservableCounter("redlease.lease.renewal.failures", {
    unit: "{failure}",
    valueType: ValueType.INT,
    description: "Watchdog renewals that failed (retried until the local deadline).",
  }).addCallback(observe(tallies.renewalFailures));
  meter.createObservableCounter("redlease.lease.lost", {
    unit: "{lease}",
    valueType: ValueType.INT,
    description: "Holds lost before their release, by reason: expired, not-held or unreachable.",
  }).addCallback(observe(tallies.lost));
  meter.createObservableCounter("redlease.lease.passed_on", {
    unit: "{grant}",
    valueType: ValueType.INT,
    description: "Grants their waiter never claimed within its claim window, passed on by another waiter.",
  }).addCallback(observe(tallies.passedOn));
  meter.createObservableUpDownCounter("redlease.lease.held", {
    unit: "{lease}",
    valueType: ValueType.INT,
    description: "Leases held by this process now (a lease over several names counts once per name).",
  }).addCallback(observe(tallies.held));
  return {
    wait: meter.createHistogram("redlease.lease.wait.duration", {
      unit: "s",
      description: "How long acquires took, from the call to the grant or the failure (every kind, every outcome).",
      advice: { explicitBucketBoundaries: WAIT_BUCKETS },
    }),
    hold: meter.createHistogram("redlease.lease.hold.duration", {
      unit: "s",
      description: "How long holds lasted, from the grant to the final release or the loss.",
      advice: { explicitBucketBoundaries: HOLD_BUCKETS },
    }),
  };
}

/** The metric attributes of one lease kind, made on first use. */
interface PerKind {
  /** Just the kind. */
  readonly base: Attributes;
  /** Kind and acquire outcome. */
  readonly outcome: Record<string, Attributes>;
  /** Kind, `acquired`, and queued × handed off × re-entered, indexed 0 to 7. */
  readonly acquired: Attributes[];
  /** Kind and how the hold ended (`released`, `lost`). */
  readonly end: Record<string, Attributes>;
  /** Kind and loss reason. */
  readonly reason: Record<string, Attributes>;
  /** Kind and `error.type` (a Map: the type is an error's name, any string). */
  readonly errors: Map<string, Attributes>;
}

/**
 * A low-cardinality name for the type of `e`, for `error.type`: its `name` (`LockTimeoutError`, `AbortError`), else
 * its class, else its system error code (`ECONNRESET`: a socket's errors are plain `Error`s), else `Error`, else
 * `_OTHER`. A plain RedisUnavailableError (the wrapper of a Redis client's error) is named by its cause, the more
 * telling (`ECONNRESET`, `ClientOfflineError`); its subclasses (`RedisTimeoutError`, `QuorumError`) by their own.
 */
function errorType(e: unknown): string {
  if (e === null || typeof e !== "object") return "_OTHER";
  if (isRedisUnavailableError(e) && e.name === "RedisUnavailableError" && e.cause !== undefined) {
    return errorType(e.cause);
  }
  const name = (e as { name?: unknown }).name;
  if (typeof name === "string" && name !== "" && name !== "Error") return name;
  const cls = (e as { constructor?: { name?: unknown } }).constructor?.name;
  if (typeof cls === "string" && cls !== "" && cls !== "Error" && cls !== "Object") return cls;
  const code = (e as { code?: unknown }).code;
  if (typeof code === "string" && /^[A-Z][A-Z0-9_]{1,40}$/.test(code)) return code;
  return name === "Error" || cls === "Error" ? "Error" : "_OTHER";
}

/**
 * Make an event handler that records redlease's lease events as OpenTelemetry metrics and spans. Register it with
 * `configure(client, { onEvent })`; one handler may serve several clients (its instruments do not tell them apart).
 *
 * What it records (see the module's table for the attributes):
 * - `redlease.lease.wait.duration` (histogram, s): each acquire, from the call to its outcome.
 * - `redlease.lease.hold.duration` (histogram, s): each hold, from the grant to its final release or its loss.
 * - `redlease.lease.acquisitions` (counter): acquire calls by outcome (`acquired`, `timeout`, `aborted`, `error`).
 * - `redlease.lease.renewal.failures` (counter): failed watchdog renewals, by `error.type`.
 * - `redlease.lease.lost` (counter): holds lost, by reason (`expired`, `not-held`, `unreachable`).
 * - `redlease.lease.passed_on` (counter): grants never claimed by their waiter, passed on.
 * - `redlease.lease.held` (up-down counter): holds of this process now; back to 0 once every lease has ended.
 * - a span `redlease acquire` (internal) per acquire, from its call to its outcome, whose parent is the caller's
 *   active span; attributes: kind, outcome, `redlease.acquire.wait.duration` (s), and on success
 *   `redlease.lease.fence`, `redlease.acquire.queued`, `redlease.acquire.handed_off`, `redlease.acquire.reentered`;
 *   on failure `error.type`, the exception as an event, and status ERROR.
 *
 * `redlease.lease.held` counts the holds the handler was told of: a lease acquired before it was registered is not
 * counted, nor is its end (see {@linkcode LeaseEvent}), so the count never goes below zero.
 *
 * @param options Where metrics and spans go, and where the lease name goes (see {@linkcode OtelOptions}).
 * @returns A handler for `configure(client, { onEvent })`.
 * @throws {TypeError} for an invalid option.
 *
 * @example With the SDK's global providers (NodeSDK, or `@opentelemetry/sdk-node`'s `start()`)
 * ```ts
 * import { configure } from "redlease";
 * import { otel } from "redlease/otel";
 * configure(client, { onEvent: otel() });
 * ```
 *
 * @example Feed your own handler too: call both from one function
 * ```ts
 * const record = otel({ leaseName: "none" });
 * configure(client, {
 *   onEvent: (e) => {
 *     record(e);
 *     if (e.type === "lost") console.warn(`lost ${e.name}: ${e.reason}`);
 *   },
 * });
 * ```
 */
// Long: it builds the caches its handler closes over (the instruments per provider, one attribute set per
// combination), then the handler; each part is short.
export function otel(options: OtelOptions = {}): LeaseEventHandler {
  const { leaseName, meterProvider, tracerProvider } = checkOptions(options);
  const nameOnMetrics = leaseName === "all";
  const nameOnSpans = leaseName !== "none";
  // The global tracer provider is a proxy that follows the one registered later; the global meter provider is not,
  // so it is looked up at each event (a read of a global) and the instruments made again when it changes.
  const tracer: Tracer = (tracerProvider ?? trace.getTracerProvider()).getTracer(SCOPE);
  const tallies: Tallies = {
    acquisitions: new Map(),
    renewalFailures: new Map(),
    lost: new Map(),
    passedOn: new Map(),
    held: new Map(),
  };
  let madeOn: MeterProvider | undefined;
  let made: Instruments | undefined;
  const meter = (): Instruments => {
    const provider = meterProvider ?? metrics.getMeterProvider();
    if (provider !== madeOn || made === undefined) {
      madeOn = provider;
      made = instruments(provider, tallies);
    }
    return made;
  };

  // Metric attributes: one object per combination, made on first use and reused (nothing allocated per event),
  // unless the lease name goes on metrics too.
  const kinds: Record<string, PerKind> = {};
  const of = (kind: string): PerKind =>
    kinds[kind] ??= { base: { [KIND]: kind }, outcome: {}, acquired: [], end: {}, reason: {}, errors: new Map() };
  let errorTypes = 0;
  // With the name on metrics, one set per set and name, made once (a tally counts by the set's identity).
  const withName = new Map<Attributes, Map<string, Attributes>>();
  const named = nameOnMetrics
    ? (attributes: Attributes, name: string): Attributes => {
      let byName = withName.get(attributes);
      if (!byName) withName.set(attributes, byName = new Map());
      let both = byName.get(name);
      if (!both) byName.set(name, both = { ...attributes, [NAME]: name });
      return both;
    }
    : (attributes: Attributes) => attributes;

  // Long: one case per event type, each a few lines.
  return (event: LeaseEvent): void => {
    const recorded = meter(); // (on the current provider: its observable counters report the tallies)
    switch (event.type) {
      case "acquired": {
        const perKind = of(event.kind);
        const waited = perKind.outcome.acquired ??= { [KIND]: event.kind, [OUTCOME]: "acquired" };
        recorded.wait.record(event.waitMs / 1000, named(waited, event.name));
        const index = (event.queued ? 4 : 0) + (event.handedOff ? 2 : 0) + (event.reentered ? 1 : 0);
        const acquired = perKind.acquired[index] ??= {
          [KIND]: event.kind,
          [OUTCOME]: "acquired",
          [QUEUED]: event.queued,
          [HANDED_OFF]: event.handedOff,
          [REENTERED]: event.reentered,
        };
        count(tallies.acquisitions, named(acquired, event.name), 1);
        if (!event.reentered) count(tallies.held, named(perKind.base, event.name), 1);
        span(tracer, nameOnSpans, event, "acquired");
        return;
      }
      case "acquire-failed": {
        const outcome = of(event.kind).outcome[event.outcome] ??= { [KIND]: event.kind, [OUTCOME]: event.outcome };
        const failed = named(outcome, event.name);
        recorded.wait.record(event.waitMs / 1000, failed);
        count(tallies.acquisitions, failed, 1);
        span(tracer, nameOnSpans, event, event.outcome);
        return;
      }
      case "released":
      case "lost": {
        if (event.type === "released" && !event.final) return;
        const perKind = of(event.kind);
        count(tallies.held, named(perKind.base, event.name), -1);
        const end = perKind.end[event.type] ??= { [KIND]: event.kind, [END]: event.type };
        recorded.hold.record(event.heldMs / 1000, named(end, event.name));
        if (event.type === "lost") {
          const reason = perKind.reason[event.reason] ??= { [KIND]: event.kind, [LOSS_REASON]: event.reason };
          count(tallies.lost, named(reason, event.name), 1);
        }
        return;
      }
      case "renewal-failed": {
        const perKind = of(event.kind);
        let type = errorType(event.error);
        let failure = perKind.errors.get(type);
        if (failure === undefined) {
          // A new type: counted under its own name while there are few, then as _OTHER (bounded cardinality).
          if (errorTypes >= MAX_ERROR_TYPES) type = "_OTHER";
          else errorTypes++;
          failure = perKind.errors.get(type);
          if (failure === undefined) perKind.errors.set(type, failure = { [KIND]: event.kind, [ERROR_TYPE]: type });
        }
        count(tallies.renewalFailures, named(failure, event.name), 1);
        return;
      }
      case "resumed":
        count(tallies.held, named(of(event.kind).base, event.name), 1);
        return;
      case "passed-on":
        count(tallies.passedOn, named(of(event.kind).base, event.name), 1);
        return;
    }
  };
}

function checkOptions(options: OtelOptions): {
  leaseName: LeaseNameAttribute;
  meterProvider: MeterProvider | undefined;
  tracerProvider: TracerProvider | undefined;
} {
  const op = "make an OpenTelemetry handler";
  if (options === null || typeof options !== "object") fail(op, "options", "must be an object", options);
  checkKeys(op, options, ["meterProvider", "tracerProvider", "leaseName"]);
  const { leaseName = "spans" } = options;
  const meterProvider = options.meterProvider as MeterProvider | undefined;
  const tracerProvider = options.tracerProvider as TracerProvider | undefined;
  if (leaseName !== "spans" && leaseName !== "all" && leaseName !== "none") {
    fail(op, "leaseName", `must be "spans", "all" or "none"`, leaseName);
  }
  if (meterProvider !== undefined && typeof meterProvider?.getMeter !== "function") {
    fail(op, "meterProvider", "must be a MeterProvider (with getMeter)", meterProvider);
  }
  if (tracerProvider !== undefined && typeof tracerProvider?.getTracer !== "function") {
    fail(op, "tracerProvider", "must be a TracerProvider (with getTracer)", tracerProvider);
  }
  return { leaseName, meterProvider, tracerProvider };
}

/** The span of one acquire, from its call to its outcome, child of the caller's active span. */
function span(
  tracer: Tracer,
  nameOnSpans: boolean,
  event: AcquiredEvent | AcquireFailedEvent,
  outcome: string,
): void {
  const now = Date.now();
  const attributes: Attributes = {
    [KIND]: event.kind,
    [OUTCOME]: outcome,
    "redlease.acquire.wait.duration": event.waitMs / 1000,
  };
  if (nameOnSpans) attributes[NAME] = event.name;
  if (event.type === "acquired") {
    attributes["redlease.lease.fence"] = event.fence;
    attributes[QUEUED] = event.queued;
    attributes[HANDED_OFF] = event.handedOff;
    attributes[REENTERED] = event.reentered;
  } else {
    attributes[ERROR_TYPE] = errorType(event.error);
  }
  // Wall-clock times on both ends (the span's duration is the wait): `performance.timeOrigin + startedAt` would
  // drift from Date.now(), which the SDK stamps its own spans with, by however much the system clock moved since
  // the process started, and could place the span outside its parent.
  const started = tracer.startSpan(
    SPAN,
    { kind: SpanKind.INTERNAL, startTime: now - event.waitMs, attributes },
    context.active(),
  );
  if (event.type === "acquire-failed") {
    const err = event.error;
    started.recordException(
      err !== null && typeof err === "object" ? err as Error : String(err),
      now,
    );
    started.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
  }
  started.end(now);
}
