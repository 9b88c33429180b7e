import {
  type Attributes,
  type Context,
  context,
  type MeterProvider,
  metrics,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TracerProvider,
  trace,
} from "@opentelemetry/api";
import {
  diagnostics,
  type LockContext,
  type LockLostMessage,
  PREFIX,
  type Point,
  type ReleaseContext,
  type RequestContext,
  type SessionLostMessage,
  type Traced,
  type WatchReconnectMessage,
  type WithLockContext,
} from "../events/channels.js";
import { VERSION } from "../version.js";

/** Where spans and metrics go: the global providers (`trace`/`metrics` of @opentelemetry/api) by default. */
export interface InstrumentOptions {
  /** Where the spans go. Default: the global tracer provider (`trace.getTracerProvider()`). */
  tracerProvider?: TracerProvider | undefined;
  /** Where the metrics go. Default: the global meter provider (`metrics.getMeterProvider()`). */
  meterProvider?: MeterProvider | undefined;
}

/** What `instrument()` returns: `disable()` unsubscribes everything it subscribed. */
export interface Instrumentation {
  /** Unsubscribes from every channel: no span or metric is made after it. */
  disable(): void;
}

/** A span a traced call opened, and when, for the duration metrics. */
interface Open {
  span: Span;
  startedAt: number;
}

/** How one TracingChannel's calls become spans and metrics. */
interface Mapping<C> {
  kind: SpanKind;
  name(context: C): string;
  /** The attributes known when the call starts. */
  start(context: C): Attributes;
  /** The attributes known when it has ended; records its metrics (`seconds` is its duration). */
  end(context: C, seconds: number): Attributes;
}

const LOCK_VERBS: Record<LockContext["kind"], string> = {
  lock: "lock",
  lockAll: "lock",
  read: "read lock",
  write: "write lock",
  semaphore: "acquire",
  election: "campaign",
};
const WITH_VERBS: Record<LockContext["kind"], string> = {
  lock: "withLock",
  lockAll: "withLocks",
  read: "withLock",
  write: "withLock",
  semaphore: "withSemaphore",
  election: "withLock",
};

/**
 * Subscribes to etcd-edge's channels and turns them into spans and metrics until `disable()`. Spans:
 * `withLock <name>` around its acquisition (`lock <name>`), the caller's function and its release
 * (`release <name>`); `etcd <path>` for each gateway call, under whatever span is active when it is made (the
 * lock's own while it acquires). A call's span is the active context while the call runs, so nesting needs a
 * context manager (AsyncLocalStorageContextManager in Node). In a runtime without diagnostics_channel this
 * does nothing.
 */
export function instrument(options: InstrumentOptions = {}): Instrumentation {
  const dc = diagnostics();
  if (dc === undefined) return { disable() {} };
  const tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer("etcd-edge", VERSION);
  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter("etcd-edge", VERSION);
  const seconds = { unit: "s" };
  const waitDuration = meter.createHistogram("etcd_edge.lock.wait.duration", {
    ...seconds,
    description: "From asking for a lock (of any kind) to holding it or giving up",
  });
  const holdDuration = meter.createHistogram("etcd_edge.lock.hold.duration", {
    ...seconds,
    description: "From acquiring a lock to its release or its loss",
  });
  const acquisitions = meter.createCounter("etcd_edge.lock.acquisitions", {
    description: "Acquisitions by kind and outcome (acquired, or the error's code)",
  });
  const lost = meter.createCounter("etcd_edge.lock.lost", { description: "Holdings lost while held" });
  const requestDuration = meter.createHistogram("etcd_edge.request.duration", {
    ...seconds,
    description: "One gateway call, its retries included, by path and outcome",
  });
  const sessionsLost = meter.createCounter("etcd_edge.session.lost", { description: "Sessions whose lease was lost" });
  const reconnects = meter.createCounter("etcd_edge.watch.reconnects", { description: "Watch streams reopened" });

  const undo: Array<() => void> = [];

  const follow = <C extends { outcome?: string; error?: unknown }>(key: Traced, mapping: Mapping<C>) => {
    const channel = dc.tracingChannel(PREFIX + key);
    const open = new WeakMap<object, Open>();
    const begin = (message: C): Context => {
      const parent = context.active();
      const span = tracer.startSpan(
        mapping.name(message),
        { kind: mapping.kind, attributes: mapping.start(message) },
        parent,
      );
      open.set(message, { span, startedAt: performance.now() });
      return trace.setSpan(parent, span);
    };
    // The span is the active context while the call runs, so the calls it makes nest under it: bindStore takes
    // any store with `run`, and OpenTelemetry's `context.with` is one, whatever the context manager.
    const store = { run: (active: Context, fn: () => unknown) => context.with(active, fn) };
    let bound = false;
    try {
      (channel.start as unknown as BindableChannel).bindStore(store, begin);
      bound = true;
    } catch {
      // workerd's bindStore takes only its own AsyncLocalStorage: spans still open under the caller's span.
    }
    const handlers = {
      start: (message: C) => {
        if (!bound) begin(message);
      },
      asyncEnd: (message: C) => {
        const opened = open.get(message);
        if (opened === undefined) return;
        open.delete(message);
        const { span } = opened;
        span.setAttributes(mapping.end(message, (performance.now() - opened.startedAt) / 1000));
        if (message.error !== undefined) {
          span.setAttribute("error.type", message.outcome ?? "error");
          span.setStatus({ code: SpanStatusCode.ERROR });
        }
        span.end();
      },
    };
    (channel as unknown as SubscribableTracingChannel).subscribe(handlers);
    undo.push(() => {
      (channel as unknown as SubscribableTracingChannel).unsubscribe(handlers);
      if (bound) (channel.start as unknown as BindableChannel).unbindStore(store);
    });
  };

  const point = <M>(key: Point, handler: (message: M) => void) => {
    const channel = dc.channel(PREFIX + key) as unknown as SubscribableChannel;
    const listener = (message: unknown) => handler(message as M);
    channel.subscribe(listener);
    undo.push(() => channel.unsubscribe(listener));
  };

  follow<RequestContext>("request", {
    kind: SpanKind.CLIENT,
    name: (request) => `etcd ${request.path}`,
    start: (request) => ({ "etcd_edge.request.path": request.path }),
    end: (request, duration) => {
      const outcome = request.outcome ?? "error";
      requestDuration.record(duration, {
        "etcd_edge.request.path": request.path,
        "etcd_edge.request.outcome": outcome,
      });
      return {
        "etcd_edge.request.outcome": outcome,
        "etcd_edge.request.attempts": request.attempt,
        ...server(request.endpoint),
      };
    },
  });

  follow<LockContext>("lock", {
    kind: SpanKind.INTERNAL,
    name: (lock) => `${LOCK_VERBS[lock.kind]} ${lock.name}`,
    start: (lock) => ({ "etcd_edge.lock.kind": lock.kind, "etcd_edge.lock.name": lock.name }),
    end: (lock, duration) => {
      const outcome = lock.outcome ?? "error";
      const metric = { "etcd_edge.lock.kind": lock.kind, "etcd_edge.lock.outcome": outcome };
      waitDuration.record(duration, metric);
      acquisitions.add(1, metric);
      return {
        "etcd_edge.lock.outcome": outcome,
        "etcd_edge.lock.token": lock.token,
        "etcd_edge.lock.waited": lock.waited ?? false,
        "etcd_edge.lock.position": lock.position,
      };
    },
  });

  follow<ReleaseContext>("release", {
    kind: SpanKind.INTERNAL,
    name: (release) => `release ${release.name}`,
    start: (release) => ({
      "etcd_edge.lock.kind": release.kind,
      "etcd_edge.lock.name": release.name,
      "etcd_edge.lock.token": release.token,
    }),
    end: (release) => {
      const outcome = release.outcome ?? "error";
      if (release.heldMs !== undefined)
        holdDuration.record(release.heldMs / 1000, {
          "etcd_edge.lock.kind": release.kind,
          "etcd_edge.lock.outcome": outcome,
        });
      return { "etcd_edge.lock.outcome": outcome };
    },
  });

  follow<WithLockContext>("withLock", {
    kind: SpanKind.INTERNAL,
    name: (frame) => `${WITH_VERBS[frame.kind]} ${frame.name}`,
    start: (frame) => ({ "etcd_edge.lock.kind": frame.kind, "etcd_edge.lock.name": frame.name }),
    end: (frame) => ({ "etcd_edge.lock.outcome": frame.outcome ?? "error" }),
  });

  point<LockLostMessage>("lock.lost", (message) => {
    const attributes = { "etcd_edge.lock.kind": message.kind };
    lost.add(1, attributes);
    holdDuration.record(message.heldMs / 1000, { ...attributes, "etcd_edge.lock.outcome": "lost" });
  });
  point<SessionLostMessage>("session.lost", (message) =>
    sessionsLost.add(1, { "etcd_edge.session.code": message.code }),
  );
  point<WatchReconnectMessage>("watch.reconnect", (message) =>
    reconnects.add(1, { "etcd_edge.watch.code": message.code }),
  );

  let enabled = true;
  return {
    disable() {
      if (!enabled) return;
      enabled = false;
      for (const step of undo.splice(0)) step();
    },
  };
}

/** `server.address` and `server.port` of an endpoint URL: never its path, query or user info. */
function server(endpoint: string | undefined): Attributes {
  if (endpoint === undefined) return {};
  try {
    const url = new URL(endpoint);
    const port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port);
    return { "server.address": url.hostname, "server.port": port };
  } catch {
    return {};
  }
}

/** What the subscriber side uses of diagnostics_channel, beyond what the client publishes with. */
interface SubscribableChannel {
  subscribe(listener: (message: unknown) => void): void;
  unsubscribe(listener: (message: unknown) => void): void;
}
interface BindableChannel {
  bindStore(store: object, transform: (message: never) => unknown): void;
  unbindStore(store: object): void;
}
interface SubscribableTracingChannel {
  subscribe(handlers: object): void;
  unsubscribe(handlers: object): void;
}
