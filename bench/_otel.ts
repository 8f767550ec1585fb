// The OpenTelemetry setup of the `redlease-otel` benchmark rows (bench/_libs.ts, bench/client_cost.ts): redlease's
// handler from `redlease/otel` on the real SDK, as an application would run it, with nothing exported.
import { otel } from "../src/otel.ts";
import type { LeaseEventHandler } from "../src/events.ts";

/**
 * The SDK providers of the benchmarks, as an application would run them, exporting nothing: metrics read every 60 s,
 * every span sampled and batched, then dropped.
 */
export async function benchProviders() {
  const [{ AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader }, trace] =
    await Promise.all([import("@opentelemetry/sdk-metrics"), import("@opentelemetry/sdk-trace-base")]);
  const meterProvider = new MeterProvider({
    readers: [
      new PeriodicExportingMetricReader({
        exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
        exportIntervalMillis: 60_000,
      }),
    ],
  });
  const drop = {
    export: (_spans: unknown, done: (r: { code: number }) => void) => done({ code: 0 }),
    shutdown: () => Promise.resolve(),
  };
  const tracerProvider = new trace.BasicTracerProvider({ spanProcessors: [new trace.BatchSpanProcessor(drop)] });
  return { meterProvider, tracerProvider };
}

/** A handler on benchProviders(): metrics and (unless `metricsOnly`) spans. */
export async function otelHandler(metricsOnly = false): Promise<LeaseEventHandler> {
  const { meterProvider, tracerProvider } = await benchProviders();
  // Metrics only: the API's own tracer provider, which makes no span (no SDK tracer registered).
  return metricsOnly ? otel({ meterProvider }) : otel({ meterProvider, tracerProvider });
}
