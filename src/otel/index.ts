/**
 * etcd-edge/otel: OpenTelemetry spans and metrics from etcd-edge's diagnostics channels. `@opentelemetry/api`
 * is its only dependency (an optional peer of the package); the client itself knows nothing of it.
 *
 *     import { instrument } from "etcd-edge/otel";
 *     const handle = instrument(); // the global tracer and meter providers, or { tracerProvider, meterProvider }
 *     ...
 *     handle.disable();
 *
 * @module etcd-edge/otel
 */
export { type Instrumentation, type InstrumentOptions, instrument } from "./instrument.js";
export { SCHEMA_URL } from "./names.js";
export type {
  LockContext,
  LockKind,
  LockLostMessage,
  LockReleasedMessage,
  Outcome,
  ReleaseContext,
  RequestContext,
  SessionLostMessage,
  WatchReconnectMessage,
  WithLockContext,
} from "../events/channels.js";
