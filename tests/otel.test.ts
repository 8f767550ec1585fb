// redlease/otel with the real OpenTelemetry SDK: a MeterProvider read by a MetricReader, a tracer provider exporting to
// memory, and the AsyncLocalStorage context manager (on Node, Bun and Deno alike). Every kind of lease, a handoff, a
// re-entry, a timeout, an abort, a resume, a grant passed on, a lease lost by expiry, and under the chaos proxy a
// failed renewal and a lease lost as unreachable: instrument names, units, attributes and values, `held` back to 0
// once every lease ended, and the acquire span as the caller's child, timed from the call, with the lease's fence.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  type Attributes,
  context,
  metrics,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  ValueType,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  DataPointType,
  type Histogram,
  MeterProvider,
  type MetricData,
  MetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import {
  acquire,
  campaign,
  configure,
  inspect,
  type Lease,
  type LeaseEventHandler,
  LockTimeoutError,
  release,
  resume,
} from "../mod.ts";
import { otel, type OtelOptions } from "../src/otel.ts";
import { createClient } from "redis";
import { startProxy } from "../chaos/_proxy.ts";
import { type Client, type RedisServer, sleep, startRedis, until } from "./_redis.ts";
import { waitUntil } from "../harness/wait.ts";

let srv: RedisServer;
let a: Client;
let b: Client;
let n = 0;
const fresh = () => `otel-test-${++n}-${Math.random().toString(36).slice(2)}`;
const T = { timeout: 60_000 };

const WAIT = "redlease.lease.wait.duration";
const HOLD = "redlease.lease.hold.duration";
const ACQUISITIONS = "redlease.lease.acquisitions";
const RENEWAL_FAILURES = "redlease.lease.renewal.failures";
const LOST = "redlease.lease.lost";
const PASSED_ON = "redlease.lease.passed_on";
const HELD = "redlease.lease.held";
const NAME = "redlease.lease.name";

/** A reader the test collects from when it likes. */
class Reader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** One SDK setup: a meter provider and a tracer provider of its own, and the handler that records into them. */
interface Setup {
  readonly handler: ReturnType<typeof otel>;
  /** The caller's tracer (same provider as the handler's spans). */
  readonly tracer: ReturnType<BasicTracerProvider["getTracer"]>;
  /** Every finished span, acquire spans and caller spans. */
  spans(): ReadableSpan[];
  /** The acquire spans. */
  acquireSpans(): ReadableSpan[];
  /** Collect every metric now, by name. */
  collect(): Promise<Map<string, MetricData>>;
  shutdown(): Promise<void>;
}

const setups: Setup[] = [];

function setup(options: Omit<OtelOptions, "meterProvider" | "tracerProvider"> = {}): Setup {
  const reader = new Reader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const s: Setup = {
    handler: otel({ ...options, meterProvider, tracerProvider }),
    tracer: tracerProvider.getTracer("test"),
    spans: () => exporter.getFinishedSpans(),
    acquireSpans: () => exporter.getFinishedSpans().filter((sp) => sp.name === "redlease acquire"),
    async collect() {
      const { resourceMetrics, errors } = await reader.collect();
      assert.deepEqual(errors, []);
      const byName = new Map<string, MetricData>();
      for (const scope of resourceMetrics.scopeMetrics) {
        assert.equal(scope.scope.name, "redlease");
        for (const m of scope.metrics) byName.set(m.descriptor.name, m);
      }
      return byName;
    },
    async shutdown() {
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
    },
  };
  setups.push(s);
  return s;
}

/** The data points of `metric` whose attributes include `match`, as [attributes, value]. */
function points<V = number>(
  all: Map<string, MetricData>,
  metric: string,
  match: Attributes = {},
): Array<[Attributes, V]> {
  const m = all.get(metric);
  if (!m) return [];
  return (m.dataPoints as Array<{ attributes: Attributes; value: unknown }>)
    .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
    .map((p) => [p.attributes, p.value as V]);
}

/** The sum of a counter's points matching `match`. */
const sum = (all: Map<string, MetricData>, metric: string, match: Attributes = {}) =>
  points(all, metric, match).reduce((s, [, v]) => s + v, 0);

/** The count of a histogram's recordings matching `match`. */
const count = (all: Map<string, MetricData>, metric: string, match: Attributes = {}) =>
  points<Histogram>(all, metric, match).reduce((s, [, v]) => s + v.count, 0);

/** The names some acquire queued for (the handler records nothing for `queued`; the tests wait for it). */
const queued = new Set<string>();
/** `handler`, seeing `queued` events first. */
const spy = (handler: LeaseEventHandler): LeaseEventHandler => (e) => {
  if (e.type === "queued") queued.add(e.name);
  handler(e);
};

/** Every held-lease point is back to 0. */
function assertNoneHeld(all: Map<string, MetricData>): void {
  for (const [attrs, v] of points(all, HELD)) assert.equal(v, 0, `held ${JSON.stringify(attrs)}`);
}

/** Epoch ms of an HrTime. */
const ms = ([s, ns]: [number, number]) => s * 1e3 + ns / 1e6;

/** Run `fn` inside a caller span (made active), and end it. */
async function inCaller<T>(s: Setup, fn: (span: Span) => Promise<T>): Promise<T> {
  return await s.tracer.startActiveSpan("caller", async (span) => {
    try {
      return await fn(span);
    } finally {
      span.end();
    }
  });
}

describe("redlease/otel", () => {
  before(async () => {
    // Without a context manager the API has no active context to give (every span a root): the SDK's
    // AsyncLocalStorage one, which Bun and Deno provide through node:async_hooks too.
    assert.ok(context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()));
    srv = await startRedis();
    a = await srv.client();
    b = await srv.client();
  });
  after(async () => {
    for (const s of setups) await s.shutdown();
    context.disable();
    metrics.disable();
    trace.disable();
    await srv.stop();
  });

  test("bad options are refused", () => {
    for (
      const bad of [
        { leaseName: "some" },
        { leaseName: true },
        { meterProvider: {} },
        { tracerProvider: 42 },
      ] as never[]
    ) {
      assert.throws(
        () => otel(bad),
        (e: unknown) => e instanceof TypeError && /Cannot make an OpenTelemetry/.test(String(e)),
      );
    }
    assert.throws(() => otel(null as never), TypeError);
  });

  test(
    "exclusive: instruments and units; the acquire span is the caller's child, from the call, with the fence",
    T,
    async () => {
      const s = setup();
      configure(a, { onEvent: s.handler });
      const name = fresh();
      let t0 = 0;
      let lease!: Lease;
      const caller = await inCaller(s, async (span) => {
        t0 = Date.now();
        lease = await acquire(a, name);
        return span;
      });
      const t1 = Date.now();
      let m = await s.collect();
      assert.deepEqual(points(m, HELD), [[{ "redlease.lease.kind": "exclusive" }, 1]], "one lease held");
      await release(lease);
      m = await s.collect();

      // Instruments: name, type (histogram; counter: a monotonic sum; up-down counter: a non-monotonic one), unit.
      const want: Array<[string, DataPointType, boolean | undefined, string]> = [
        [WAIT, DataPointType.HISTOGRAM, undefined, "s"],
        [HOLD, DataPointType.HISTOGRAM, undefined, "s"],
        [ACQUISITIONS, DataPointType.SUM, true, "{acquisition}"],
        [HELD, DataPointType.SUM, false, "{lease}"],
      ];
      for (const [metric, type, monotonic, unit] of want) {
        const data = m.get(metric);
        assert.ok(data, `${metric} recorded`);
        assert.equal(data.dataPointType, type, metric);
        assert.equal((data as { isMonotonic?: boolean }).isMonotonic, monotonic, metric);
        assert.equal(data.descriptor.unit, unit, metric);
        assert.equal(data.descriptor.valueType, monotonic === undefined ? ValueType.DOUBLE : ValueType.INT, metric);
        assert.ok(data.descriptor.description.length > 10, `${metric} has a description`);
      }
      // Buckets in seconds, not the SDK's millisecond defaults.
      const [[, wait]] = points<Histogram>(m, WAIT);
      assert.equal(wait.buckets.boundaries[0], 0.001);
      assert.equal(wait.count, 1);
      assert.ok(wait.sum! >= 0 && wait.sum! < (t1 - t0) / 1000 + 0.01, `wait ${wait.sum} s`);

      assert.deepEqual(points(m, WAIT).map(([attrs]) => attrs), [
        { "redlease.lease.kind": "exclusive", "redlease.acquire.outcome": "acquired" },
      ]);
      assert.deepEqual(points(m, ACQUISITIONS), [[{
        "redlease.lease.kind": "exclusive",
        "redlease.acquire.outcome": "acquired",
        "redlease.acquire.queued": false,
        "redlease.acquire.handed_off": false,
        "redlease.acquire.reentered": false,
      }, 1]]);
      assert.deepEqual(points(m, HOLD).map(([attrs, v]) => [attrs, (v as unknown as Histogram).count]), [
        [{ "redlease.lease.kind": "exclusive", "redlease.lease.end": "released" }, 1],
      ]);
      assertNoneHeld(m);
      for (const [metric, data] of m) {
        for (const p of data.dataPoints) assert.ok(!(NAME in p.attributes), `${metric}: no lease name by default`);
      }

      // The span.
      const [sp] = s.acquireSpans();
      assert.equal(s.acquireSpans().length, 1);
      assert.equal(sp.kind, SpanKind.INTERNAL);
      assert.equal(sp.instrumentationScope.name, "redlease");
      assert.equal(sp.parentSpanContext?.spanId, caller.spanContext().spanId, "child of the caller's active span");
      assert.equal(sp.spanContext().traceId, caller.spanContext().traceId);
      const start = ms(sp.startTime), end = ms(sp.endTime);
      assert.ok(start >= t0 - 2 && start <= t1 + 1, `starts at the call: ${start - t0} ms after it`);
      assert.ok(end >= start && end <= t1 + 1, `ends at the grant: ${end - start} ms`);
      assert.equal(sp.status.code, SpanStatusCode.UNSET);
      assert.deepEqual({ ...sp.attributes, "redlease.acquire.wait.duration": 0 }, {
        "redlease.lease.kind": "exclusive",
        "redlease.lease.name": name,
        "redlease.lease.fence": lease.fence,
        "redlease.acquire.outcome": "acquired",
        "redlease.acquire.queued": false,
        "redlease.acquire.handed_off": false,
        "redlease.acquire.reentered": false,
        "redlease.acquire.wait.duration": 0,
      });
      const w = sp.attributes["redlease.acquire.wait.duration"] as number;
      assert.ok(Math.abs(w * 1000 - (end - start)) < 2, `wait ${w} s is the span's duration ${end - start} ms`);
    },
  );

  test(
    "a re-entry and a queued waiter handed the lease: attributes of each, held 1 throughout, then 0",
    T,
    async () => {
      const s = setup();
      const handler = spy(s.handler); // one handler, two clients
      configure(a, { onEvent: handler });
      configure(b, { onEvent: handler });
      const name = fresh();
      const first = await acquire(a, name);
      const again = await acquire(a, name, { owner: first });
      assert.deepEqual(points(await s.collect(), HELD), [[{ "redlease.lease.kind": "exclusive" }, 1]], "re-entry: 1");
      let waiterSpan!: Span;
      const waiting = inCaller(s, (span) => {
        waiterSpan = span;
        // A claim window the busiest run meets: the handoff is to come by the release's message.
        return acquire(b, name, { waitMs: 10_000, claimMs: 5_000 });
      });
      await until("b queued", () => queued.has(name));
      // The `queued` event comes before the entry is in Redis: wait for the entry, or the release may free it.
      await waitUntil(
        "b's entry in the queue",
        10_000,
        async () => (await inspect(a, name)).waiters === 1 || "not yet",
      );
      await sleep(40); // a wait of at least 40 ms, which the span and the metric record
      await release(again);
      assert.equal(sum(await s.collect(), HELD), 1, "a non-final release leaves it held");
      await release(first);
      const second = await waiting;
      assert.equal(sum(await s.collect(), HELD), 1, "handed over: held by b");
      await release(second);
      const m = await s.collect();
      assertNoneHeld(m);
      const acq = (q: boolean, h: boolean, r: boolean) =>
        sum(m, ACQUISITIONS, {
          "redlease.acquire.queued": q,
          "redlease.acquire.handed_off": h,
          "redlease.acquire.reentered": r,
        });
      assert.equal(acq(false, false, false), 1, "a's first");
      assert.equal(acq(false, false, true), 1, "a's re-entry");
      assert.equal(acq(true, true, false), 1, "b's, handed over after a wait");
      assert.equal(count(m, WAIT), 3);
      assert.equal(count(m, HOLD, { "redlease.lease.end": "released" }), 2, "a's hold and b's");
      const bSpan = s.acquireSpans().find((sp) => sp.attributes["redlease.lease.fence"] === second.fence)!;
      assert.equal(
        bSpan.parentSpanContext?.spanId,
        waiterSpan.spanContext().spanId,
        "the waiter's caller, after a wait",
      );
      assert.equal(bSpan.attributes["redlease.acquire.handed_off"], true);
      assert.ok((bSpan.attributes["redlease.acquire.wait.duration"] as number) >= 0.04, "it waited");
      assert.ok(ms(bSpan.endTime) - ms(bSpan.startTime) >= 40);
    },
  );

  test("a timeout and an abort: outcomes, error.type, spans with status ERROR and the exception", T, async () => {
    const s = setup();
    configure(a, { onEvent: s.handler });
    configure(b, { onEvent: spy(s.handler) });
    const name = fresh();
    const holder = await acquire(a, name);
    const timedOut = await inCaller(s, () => acquire(b, name, { waitMs: 0 }).catch((e) => e));
    assert.ok(timedOut instanceof LockTimeoutError);
    const ac = new AbortController();
    const aborted = acquire(b, name, { waitMs: 10_000, signal: ac.signal }).catch((e) => e);
    await until("b queued", () => queued.has(name));
    const reason = new DOMException("no longer needed", "AbortError");
    ac.abort(reason);
    assert.equal(await aborted, reason);
    await release(holder);
    const m = await s.collect();
    assert.equal(sum(m, ACQUISITIONS, { "redlease.acquire.outcome": "timeout" }), 1);
    assert.equal(sum(m, ACQUISITIONS, { "redlease.acquire.outcome": "aborted" }), 1);
    assert.equal(sum(m, ACQUISITIONS, { "redlease.acquire.outcome": "acquired" }), 1);
    assert.equal(count(m, WAIT, { "redlease.acquire.outcome": "timeout" }), 1);
    assert.equal(count(m, WAIT, { "redlease.acquire.outcome": "aborted" }), 1);
    assert.deepEqual(
      points(m, ACQUISITIONS, { "redlease.acquire.outcome": "timeout" }).map(([attrs]) => attrs),
      [{ "redlease.lease.kind": "exclusive", "redlease.acquire.outcome": "timeout" }],
      "no queued/handed_off on a failure",
    );
    assertNoneHeld(m);
    const failed = s.acquireSpans().filter((sp) => sp.status.code === SpanStatusCode.ERROR);
    assert.deepEqual(failed.map((sp) => [sp.attributes["redlease.acquire.outcome"], sp.attributes["error.type"]]), [
      ["timeout", "LockTimeoutError"],
      ["aborted", "AbortError"],
    ]);
    assert.equal(failed[0].status.message, timedOut.message);
    assert.equal(
      failed[0].parentSpanContext?.spanId,
      s.spans().find((sp) => sp.name === "caller")!.spanContext().spanId,
    );
    assert.equal(failed[1].parentSpanContext, undefined, "no caller span: a root span");
    for (const sp of failed) {
      assert.equal(sp.events.length, 1);
      assert.equal(sp.events[0].name, "exception");
      assert.equal(sp.events[0].attributes?.["exception.message"], sp.status.message);
      assert.equal("redlease.lease.fence" in sp.attributes, false);
    }
  });

  test("shared, permit, several names and a leadership: per kind, a span per name, held back to 0", T, async () => {
    const s = setup();
    configure(a, { onEvent: s.handler });
    const sh = fresh(), p = fresh(), x = fresh(), y = fresh(), l = fresh();
    const s1 = await acquire(a, sh, { shared: true });
    const s2 = await acquire(a, sh, { shared: true });
    const p1 = await acquire(a, p, { permits: 3 });
    const both = await acquire(a, [x, y]);
    const leader = await campaign(a, l);
    let m = await s.collect();
    const held = (kind: string) => sum(m, HELD, { "redlease.lease.kind": kind });
    assert.deepEqual([held("shared"), held("permit"), held("exclusive"), held("leader")], [2, 1, 2, 1]);
    for (const lease of [s1, s2, p1, both, leader]) await release(lease);
    m = await s.collect();
    assertNoneHeld(m);
    for (const [kind, n] of [["shared", 2], ["permit", 1], ["exclusive", 2], ["leader", 1]] as const) {
      assert.equal(sum(m, ACQUISITIONS, { "redlease.lease.kind": kind }), n, kind);
      assert.equal(count(m, WAIT, { "redlease.lease.kind": kind }), n, kind);
      assert.equal(count(m, HOLD, { "redlease.lease.kind": kind, "redlease.lease.end": "released" }), n, kind);
    }
    const byName = (name: string) => s.acquireSpans().filter((sp) => sp.attributes[NAME] === name);
    assert.deepEqual(byName(x).map((sp) => sp.attributes["redlease.lease.fence"]), [both.fences[0]]);
    assert.deepEqual(byName(y).map((sp) => sp.attributes["redlease.lease.fence"]), [both.fences[1]]);
    assert.deepEqual(byName(l).map((sp) => sp.attributes["redlease.lease.kind"]), ["leader"]);
    assert.deepEqual(byName(p).map((sp) => sp.attributes["redlease.lease.kind"]), ["permit"]);
    assert.deepEqual(byName(sh).map((sp) => sp.attributes["redlease.lease.kind"]), ["shared", "shared"]);
  });

  test('leaseName: "all" names the metrics too, "none" names nothing', T, async () => {
    const all = setup({ leaseName: "all" });
    configure(a, { onEvent: all.handler });
    const name = fresh();
    await release(await acquire(a, name));
    const m = await all.collect();
    for (const metric of [WAIT, HOLD, ACQUISITIONS, HELD]) {
      assert.deepEqual(points(m, metric).map(([attrs]) => attrs[NAME]), [name], metric);
    }
    assertNoneHeld(m);
    assert.equal(all.acquireSpans()[0].attributes[NAME], name);

    const none = setup({ leaseName: "none" });
    configure(a, { onEvent: none.handler });
    await release(await acquire(a, fresh()));
    assert.equal(NAME in none.acquireSpans()[0].attributes, false);
    for (const [, data] of await none.collect()) {
      for (const p of data.dataPoints) assert.equal(NAME in p.attributes, false);
    }
  });

  test("resume counts the hold it takes over; a grant never claimed is passed on", T, async () => {
    const s = setup();
    configure(a, { onEvent: spy(s.handler) });
    configure(b, { onEvent: null }); // "another process": b's own hold is not this handler's
    const name = fresh();
    const original = await acquire(b, name);
    const moved = await resume(a, original.token);
    assert.deepEqual(points(await s.collect(), HELD), [[{ "redlease.lease.kind": "exclusive" }, 1]]);
    await release(moved);
    await release(original).catch(() => {});
    let m = await s.collect();
    assertNoneHeld(m);
    assert.equal(count(m, HOLD, { "redlease.lease.end": "released" }), 1);

    // A waiter that is subscribed but never claims its grant (a raw queue entry ahead of a's waiter).
    const other = fresh();
    const holder = await acquire(b, other);
    const ghost = await srv.client();
    const cid = "ghost0client";
    await ghost.subscribe(`redlease:{${other}}:w:${cid}`, () => {});
    await b.zAdd(`redlease:{${other}}:q`, { score: 1, value: `${cid}|ghostattempt|30000|200|x|ghost-owner` });
    const waiting = acquire(a, other, { waitMs: 10_000, claimMs: 300 });
    await until("a queued", () => queued.has(other));
    await waitUntil(
      "a's entry behind the ghost's",
      10_000,
      async () => (await inspect(b, other)).waiters === 2 || "not yet",
    );
    await release(holder);
    await release(await waiting);
    await ghost.unsubscribe();
    m = await s.collect();
    assert.equal(m.get(PASSED_ON)?.descriptor.unit, "{grant}");
    assert.deepEqual(points(m, PASSED_ON), [[{ "redlease.lease.kind": "exclusive" }, 1]]);
    assertNoneHeld(m);
  });

  test("a fixed lease that runs out: lost (expired), its hold recorded as lost, held back to 0", T, async () => {
    const s = setup();
    configure(a, { onEvent: s.handler });
    const lease = await acquire(a, fresh(), { leaseMs: 100 });
    await until("lost", () => lease.signal.aborted);
    await release(lease).catch(() => {});
    const m = await s.collect();
    assert.equal(m.get(LOST)?.descriptor.unit, "{lease}");
    assert.deepEqual(points(m, LOST), [[
      { "redlease.lease.kind": "exclusive", "redlease.lease.loss.reason": "expired" },
      1,
    ]]);
    assert.equal(count(m, HOLD, { "redlease.lease.end": "lost" }), 1);
    assert.equal(count(m, HOLD, { "redlease.lease.end": "released" }), 0, "a lost hold is not released too");
    assertNoneHeld(m);
  });

  test(
    "under the chaos proxy: a failed renewal (reset) counted by error.type, then lost as unreachable",
    T,
    async () => {
      const s = setup();
      const proxy = await startProxy({ port: srv.port });
      const c = createClient({ url: `redis://127.0.0.1:${proxy.port}`, socket: { reconnectStrategy: 20 } });
      c.on("error", () => {});
      try {
        await c.connect();
        let renewed = 0;
        configure(c, {
          onEvent: (e) => {
            if (e.type === "renewed") renewed++;
            s.handler(e);
          },
        });
        const lease = await acquire(c, fresh(), { watchdogMs: 600 });
        await until("a renewal", () => renewed > 0);
        await proxy.resetNext({ kind: "command" }); // the next renewal's connection is reset under it
        let m = await s.collect();
        for (const end = performance.now() + 10_000; sum(m, RENEWAL_FAILURES) === 0; m = await s.collect()) {
          if (performance.now() > end) throw new Error("timed out waiting for a failed renewal");
          await sleep(20);
        }
        const [[failure, failures]] = points(m, RENEWAL_FAILURES);
        assert.equal(m.get(RENEWAL_FAILURES)!.descriptor.unit, "{failure}");
        assert.equal(failure["redlease.lease.kind"], "exclusive");
        assert.equal(typeof failure["error.type"], "string");
        // The proxy resets the connection under the renewal: the socket's error, a plain Error with its code.
        assert.equal(failure["error.type"], "ECONNRESET");
        assert.ok(failures >= 1);
        assert.equal(sum(m, LOST), 0, "a renewal retried in time keeps the lease");
        assert.equal(sum(m, HELD), 1);
        proxy.blackhole({ kind: "command" });
        await until("lost", () => lease.signal.aborted, 5_000);
        proxy.heal();
        await release(lease).catch(() => {});
        m = await s.collect();
        assert.deepEqual(points(m, LOST), [[{
          "redlease.lease.kind": "exclusive",
          "redlease.lease.loss.reason": "unreachable",
        }, 1]]);
        const [[, hold]] = points<Histogram>(m, HOLD, { "redlease.lease.end": "lost" });
        assert.equal(hold.count, 1);
        assert.ok(hold.sum! >= 0.5, `held ${hold.sum} s`);
        assertNoneHeld(m);
      } finally {
        await c.disconnect().catch(() => {});
        await proxy.close();
      }
    },
  );

  test(
    "by default, the global providers: registered after the handler was made, they still get its records",
    T,
    async () => {
      const handler = otel();
      configure(a, { onEvent: handler });
      await release(await acquire(a, fresh())); // no SDK yet: no-op instruments, a non-recording span
      const reader = new Reader();
      const meterProvider = new MeterProvider({ readers: [reader] });
      const exporter = new InMemorySpanExporter();
      const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
      assert.ok(metrics.setGlobalMeterProvider(meterProvider));
      assert.ok(trace.setGlobalTracerProvider(tracerProvider));
      try {
        const name = fresh();
        const lease = await trace.getTracer("test").startActiveSpan("caller", async (span) => {
          try {
            return await acquire(a, name);
          } finally {
            span.end();
          }
        });
        await release(lease);
        const { resourceMetrics } = await reader.collect();
        const all = new Map(
          resourceMetrics.scopeMetrics.flatMap((sc) => sc.metrics.map((m) => [m.descriptor.name, m])),
        );
        // The counters count from the handler's making: the acquire before the SDK is counted too (a histogram
        // recorded then went to the no-op meter).
        assert.equal(sum(all, ACQUISITIONS), 2);
        assertNoneHeld(all);
        const [acq] = exporter.getFinishedSpans().filter((sp) => sp.name === "redlease acquire");
        const caller = exporter.getFinishedSpans().find((sp) => sp.name === "caller")!;
        assert.equal(acq.attributes[NAME], name);
        assert.equal(acq.parentSpanContext?.spanId, caller.spanContext().spanId);
      } finally {
        configure(a, { onEvent: null });
        metrics.disable();
        trace.disable();
        await meterProvider.shutdown();
        await tracerProvider.shutdown();
      }
    },
  );
});
