/**
 * The OpenTelemetry SDK's own cost of what `redlease/otel` must do per uncontended acquire + release, whatever
 * redlease does: two histogram records (the wait and the hold, two attributes each) and, with tracing, one span with
 * the acquire's attributes, started and ended. It is the floor under the `redlease-metrics` and `redlease-otel` rows
 * of B1/B2 (bench/run.ts) and under `bench/client_cost.ts . .+metrics .+otel`: the SDK hashes a record's attributes
 * (sorted keys, JSON) on every record, about a microsecond each on Node 20 here. Prints; never asserts.
 *
 *   node --import tsx bench/otel_floor.ts [--cycles 200000] [--reps 5]
 */
import { context, SpanKind } from "@opentelemetry/api";
import { benchProviders } from "./_otel.ts";

const args = process.argv.slice(2);
const flag = (name: string, def: number) => {
  const i = args.indexOf(name);
  return i < 0 ? def : Number(args[i + 1]);
};
const CYCLES = flag("--cycles", 200_000), REPS = flag("--reps", 5);

// As the benchmark rows set them up (bench/_otel.ts): metrics read every 60 s; every span sampled, batched, dropped.
const { meterProvider, tracerProvider } = await benchProviders();
const meter = meterProvider.getMeter("redlease"), tracer = tracerProvider.getTracer("redlease");
const wait = meter.createHistogram("redlease.lease.wait.duration", { unit: "s" });
const hold = meter.createHistogram("redlease.lease.hold.duration", { unit: "s" });
const waitAttrs = { "redlease.lease.kind": "exclusive", "redlease.acquire.outcome": "acquired" };
const holdAttrs = { "redlease.lease.kind": "exclusive", "redlease.lease.end": "released" };

function histograms(n: number): number {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    wait.record(0.0002, waitAttrs);
    hold.record(0.0001, holdAttrs);
  }
  return (performance.now() - t0) * 1000 / n;
}

function spans(n: number): number {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const now = Date.now();
    tracer.startSpan("redlease acquire", {
      kind: SpanKind.INTERNAL,
      startTime: now,
      attributes: {
        "redlease.lease.kind": "exclusive",
        "redlease.acquire.outcome": "acquired",
        "redlease.acquire.wait.duration": 0.0002,
        "redlease.lease.name": "n",
        "redlease.lease.fence": 1_732_420_000_000_000 + i,
        "redlease.acquire.queued": false,
        "redlease.acquire.handed_off": false,
        "redlease.acquire.reentered": false,
      },
    }, context.active()).end(now);
  }
  return (performance.now() - t0) * 1000 / n;
}

const h: number[] = [], s: number[] = [];
histograms(CYCLES);
spans(CYCLES);
for (let r = 0; r < REPS; r++) {
  h.push(histograms(CYCLES));
  s.push(spans(CYCLES));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(`OpenTelemetry SDK per acquire + release, ${CYCLES} cycles × ${REPS} reps, Node ${process.version}`);
console.log(`two histogram records: ${median(h).toFixed(2)} µs (reps ${h.map((x) => x.toFixed(2)).join(", ")})`);
console.log(`one span with 8 attributes: ${median(s).toFixed(2)} µs (reps ${s.map((x) => x.toFixed(2)).join(", ")})`);
await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
