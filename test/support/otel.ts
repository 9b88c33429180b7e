// An OpenTelemetry SDK kept in memory: spans in an InMemorySpanExporter, metrics read on demand, and the
// AsyncLocalStorage context manager, so that what etcd-edge/otel makes can be checked span by span.
import { context, type Attributes } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { type DataPoint, MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";

class TestReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

export interface Point {
  attributes: Attributes;
  /** A counter's sum, or a histogram's count. */
  value: number;
}

export interface MemoryTelemetry {
  tracerProvider: TracerProvider;
  meterProvider: MeterProvider;
  /** Every span ended so far. */
  spans(): ReadableSpan[];
  /** The span named `name` (the only one: it fails otherwise). */
  span(name: string): ReadableSpan;
  /** The names of the spans whose parent is `parent`, in the order they started. */
  children(parent: ReadableSpan): string[];
  /** The data points of metric `name` as read now. */
  points(name: string): Promise<Point[]>;
  /** Every attribute of every metric as read now. */
  metricAttributes(): Promise<Attributes[]>;
  close(): Promise<void>;
}

export function memoryTelemetry(): MemoryTelemetry {
  const manager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(manager);
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const reader = new TestReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const read = async () => (await reader.collect()).resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
  const spans = () => exporter.getFinishedSpans();
  return {
    tracerProvider,
    meterProvider,
    spans,
    span(name) {
      const found = spans().filter((span) => span.name === name);
      if (found.length !== 1) throw new Error(`${found.length} spans named ${name}: ${spans().map((s) => s.name)}`);
      return found[0]!;
    },
    children(parent) {
      return spans()
        .filter((span) => span.parentSpanContext?.spanId === parent.spanContext().spanId)
        .sort((a, b) => hr(a.startTime) - hr(b.startTime))
        .map((span) => span.name);
    },
    async points(name) {
      const metric = (await read()).find((m) => m.descriptor.name === name);
      return (metric?.dataPoints ?? []).map((point: DataPoint<unknown>) => ({
        attributes: point.attributes,
        value: typeof point.value === "number" ? point.value : (point.value as { count: number }).count,
      }));
    },
    async metricAttributes() {
      return (await read()).flatMap((metric) => metric.dataPoints.map((point) => point.attributes));
    },
    async close() {
      await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]);
      context.disable();
      manager.disable();
    },
  };
}

function hr([seconds, nanos]: [number, number]): number {
  return seconds * 1e9 + nanos;
}
