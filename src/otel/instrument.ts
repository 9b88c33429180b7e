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
  type LockKind,
  type LockLostMessage,
  type LockReleasedMessage,
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
import {
  compileTemplates,
  ending,
  grpcCodeName,
  lockKind,
  lockOperation,
  rpcOf,
  SCHEMA_URL,
  serverOf,
  templateOf,
} from "./names.js";

/** Where spans and metrics go, and how lock operations may be named. */
export interface InstrumentOptions {
  /** Where the spans go. Default: the global tracer provider (`trace.getTracerProvider()`). */
  tracerProvider?: TracerProvider | undefined;
  /** Where the metrics go. Default: the global meter provider (`metrics.getMeterProvider()`). */
  meterProvider?: MeterProvider | undefined;
  /**
   * Templates of your lock names (`["orders/{id}", "jobs/{queue}/{id}"]`), as `url.template` is for HTTP: a lock
   * whose name matches one has it in its span's name (`mutex.acquire orders/{id}`) and in
   * `etcd_edge.lock.template`. Each `{...}` stands for one or more characters other than `/`. Without a match
   * the span is named by its operation alone. Never in metrics.
   */
  lockTemplates?: readonly string[] | undefined;
}

/** What `instrument()` returns: `disable()` unsubscribes everything it subscribed. */
export interface Instrumentation {
  /** Unsubscribes from every channel: no span or metric is made after it. */
  disable(): void;
}

/** A traced call under way: its span (none for a background call), and when it started, for its metrics. */
interface Open {
  span: Span | undefined;
  startedAt: number;
}

/** How one TracingChannel's calls become spans and metrics. */
interface Mapping<C> {
  kind: SpanKind;
  /**
   * When the call starts: its span's name (`undefined` for a call that makes no span, a background renewal) and
   * the attributes known then.
   */
  start(context: C): { name: string | undefined; attributes?: Attributes };
  /**
   * When it has ended: its span's attributes and final name, whether it failed (`errorType`); records its
   * metrics (`seconds` is its duration).
   */
  end(context: C, seconds: number): { attributes: Attributes; name?: string; errorType?: string | undefined };
}

/** `db.client.operation.duration`'s buckets, as the database conventions advise. */
const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10];

/**
 * Subscribes to etcd-edge's channels and turns them into spans and metrics until `disable()`, after the
 * OpenTelemetry semantic conventions. Logical spans (INTERNAL), named by operation: `mutex.acquire` (or
 * `mutex.try_acquire`), `mutex.release`, `mutex.with_lock` around the acquisition, the caller's function and
 * the release; the same for `semaphore.*`, `rwlock.*`, `lock_all.*`; `election.campaign`, `election.resign`.
 * Each gateway call is a CLIENT span, `{RPC} {server.address}:{server.port}` (`Txn 10.0.0.1:2379`), under
 * whatever span is active when it is made; background renewals make none. A call's span is the active context
 * while the call runs, so nesting needs a context manager (AsyncLocalStorageContextManager in Node). In a runtime
 * without diagnostics_channel this does nothing.
 */
export function instrument(options: InstrumentOptions = {}): Instrumentation {
  const dc = diagnostics();
  if (dc === undefined) return { disable() {} };
  const scope = { schemaUrl: SCHEMA_URL };
  const tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer("etcd-edge", VERSION, scope);
  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter("etcd-edge", VERSION, scope);
  const templates = compileTemplates(options.lockTemplates);
  const seconds = (name: string, description: string) =>
    meter.createHistogram(name, { unit: "s", description, advice: { explicitBucketBoundaries: DURATION_BUCKETS } });
  const counter = (name: string, unit: string, description: string) => meter.createCounter(name, { unit, description });
  const operationDuration = seconds(
    "db.client.operation.duration",
    "Duration of database client operations: one gateway call, its retries included",
  );
  const waitDuration = seconds(
    "etcd_edge.lock.wait.duration",
    "From asking for a lock (of any kind) to holding it or giving up",
  );
  const holdDuration = seconds("etcd_edge.lock.hold.duration", "From acquiring a lock to its release or its loss");
  const count = meter.createUpDownCounter("etcd_edge.lock.count", {
    unit: "{lock}",
    description: "Locks of this process being acquired (state waiting) or held (state held)",
  });
  const losses = counter(
    "etcd_edge.lock.losses",
    "{lock}",
    "Holdings lost while held: their lease ended or their key was deleted or changed",
  );
  const sessionLosses = counter("etcd_edge.session.losses", "{session}", "Sessions whose lease was lost");
  const reconnects = counter(
    "etcd_edge.watch.reconnects",
    "{stream}",
    "Watch streams reopened after a break or a silence",
  );

  const undo: Array<() => void> = [];

  const follow = <C extends { outcome?: string; error?: unknown }>(key: Traced, mapping: Mapping<C>) => {
    const channel = dc.tracingChannel(PREFIX + key);
    const open = new WeakMap<object, Open>();
    const begin = (message: C): Context => {
      const parent = context.active();
      const { name, attributes } = mapping.start(message);
      const span = name === undefined ? undefined : tracer.startSpan(name, { kind: mapping.kind, attributes }, parent);
      open.set(message, { span, startedAt: performance.now() });
      return span === undefined ? parent : trace.setSpan(parent, span);
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
        const ended = mapping.end(message, (performance.now() - opened.startedAt) / 1000);
        if (span === undefined) return;
        span.setAttributes(ended.attributes);
        if (ended.name !== undefined) span.updateName(ended.name);
        if (ended.errorType !== undefined) {
          span.setAttribute("error.type", ended.errorType);
          // What the on-call engineer reads: the message (the SDK's carry no secret) and the exception event.
          const error = message.error;
          const text = error instanceof Error ? error.message : undefined;
          span.setStatus({ code: SpanStatusCode.ERROR, ...(text === undefined ? {} : { message: text }) });
          if (error instanceof Error) span.recordException(error);
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
    start: (request) => ({
      name: request.background ? undefined : rpcOf(request.path),
      attributes: { "db.system.name": "etcd", "db.operation.name": rpcOf(request.path), "http.request.method": "POST" },
    }),
    end: (request, duration) => {
      const rpc = rpcOf(request.path);
      const { errorType } = ending(request.outcome, request.error);
      const server = serverOf(request.endpoint, request.path);
      const status = grpcCodeName(request.error);
      const stable: Attributes = {
        "db.system.name": "etcd",
        "db.operation.name": rpc,
        "server.address": server["server.address"],
        "server.port": server["server.port"],
        ...(status === undefined ? {} : { "db.response.status_code": status }),
        ...(errorType === undefined ? {} : { "error.type": errorType }),
      };
      operationDuration.record(duration, stable);
      const attempts = request.attempt ?? 1;
      return {
        name: server["server.port"] === undefined ? rpc : `${rpc} ${server["server.address"]}:${server["server.port"]}`,
        errorType,
        attributes: {
          ...server,
          ...(status === undefined ? {} : { "db.response.status_code": status }),
          ...(request.status === undefined ? {} : { "http.response.status_code": request.status }),
          ...(attempts > 1 ? { "http.request.resend_count": attempts - 1 } : {}),
        },
      };
    },
  });
  /** A lock operation's span name and the attributes that say what it is on (never a metric's). */
  const named = (step: Parameters<typeof lockOperation>[1], lock: { kind: LockKind; name: string }) => {
    const template = templateOf(templates, lock.name);
    const operation = lockOperation(lock.kind, step);
    return {
      name: template === undefined ? operation : `${operation} ${template}`,
      attributes: {
        ...lockKind(lock.kind),
        "etcd_edge.lock.name": lock.name,
        ...(template === undefined ? {} : { "etcd_edge.lock.template": template }),
      },
    };
  };
  const state = (kind: LockKind, is: "waiting" | "held") => ({ ...lockKind(kind), "etcd_edge.lock.state": is });
  /** The holdings counted as held, until they end: a campaign while leading acquires nothing new. */
  const holdings = new Set<string>();
  const holding = (lock: { kind: LockKind; name: string; token?: number | undefined }) =>
    `${lock.kind}\n${lock.name}\n${lock.token}`;

  follow<LockContext>("lock", {
    kind: SpanKind.INTERNAL,
    start: (lock) => {
      count.add(1, state(lock.kind, "waiting"));
      return named(lock.tryOnly ? "try_acquire" : "acquire", lock);
    },
    end: (lock, duration) => {
      const { outcome, errorType } = ending(lock.outcome, lock.error, lock.tryOnly);
      waitDuration.record(duration, { ...lockKind(lock.kind), "etcd_edge.lock.outcome": outcome });
      count.add(-1, state(lock.kind, "waiting"));
      if (outcome === "acquired" && !holdings.has(holding(lock))) {
        holdings.add(holding(lock));
        count.add(1, state(lock.kind, "held"));
      }
      return {
        errorType,
        attributes: {
          "etcd_edge.lock.outcome": outcome,
          "etcd_edge.lock.token": lock.token,
          "etcd_edge.lock.waited": lock.waited ?? false,
          "etcd_edge.lock.position": lock.position,
          "etcd_edge.lease.id": lock.lease,
        },
      };
    },
  });

  follow<ReleaseContext>("release", {
    kind: SpanKind.INTERNAL,
    start: (release) => {
      const { name, attributes } = named("release", release);
      return { name, attributes: { ...attributes, "etcd_edge.lock.token": release.token } };
    },
    end: (release) => {
      const { outcome, errorType } = ending(release.outcome, release.error);
      return { errorType, attributes: { "etcd_edge.lock.outcome": outcome } };
    },
  });

  follow<WithLockContext>("withLock", {
    kind: SpanKind.INTERNAL,
    start: (frame) => named("with_lock", frame),
    end: (frame) => {
      const { outcome, errorType } = ending(frame.outcome, frame.error);
      return { errorType, attributes: { "etcd_edge.lock.outcome": outcome } };
    },
  });

  // A holding ends once, released or lost: its hold time and the held count are counted there.
  const ended = (message: LockLostMessage | LockReleasedMessage, outcome: "released" | "lost") => {
    holdDuration.record(message.heldMs / 1000, { ...lockKind(message.kind), "etcd_edge.lock.outcome": outcome });
    if (holdings.delete(holding(message))) count.add(-1, state(message.kind, "held"));
  };
  point<LockReleasedMessage>("lock.released", (message) => ended(message, "released"));
  point<LockLostMessage>("lock.lost", (message) => {
    losses.add(1, lockKind(message.kind));
    ended(message, "lost");
  });
  point<SessionLostMessage>("session.lost", (message) =>
    sessionLosses.add(1, { "etcd_edge.session.code": message.code }),
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
