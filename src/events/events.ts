import type { EtcdErrorCode } from "../errors/etcd-error.js";

/**
 * What the SDK tells an `onEvent` handler as it works: plain objects with a `type`, built only when a
 * handler is set. Turn them into metrics, spans or logs (the README shows OpenTelemetry).
 */
export type EtcdEvent =
  | RequestEvent
  | RetryEvent
  | FailoverEvent
  | SessionRenewedEvent
  | SessionRenewFailedEvent
  | SessionLostEvent
  | LockWaitingEvent
  | LockAcquiredEvent
  | LockReleasedEvent
  | LockLostEvent
  | WatchReconnectedEvent;

/** Receives every {@link EtcdEvent}. It runs inline: keep it cheap. What it throws is ignored. */
export type EventHandler = (event: EtcdEvent) => void;

/** What is held or waited for: a lock, a permit, a read or write lock, several locks, leadership. */
export type HoldingKind = "lock" | "permit" | "read" | "write" | "locks" | "leadership";

/** One HTTP request to one endpoint (one attempt of a call), answered or not. */
export interface RequestEvent {
  type: "request";
  /** The gateway path, e.g. `/v3/kv/txn`. */
  path: string;
  endpoint: string;
  /** The HTTP status, when an answer came. */
  status?: number | undefined;
  /** The error's code, when the attempt failed. */
  code?: EtcdErrorCode | undefined;
  /** From sending the request to its answer (for a stream: to its first message) or failure. */
  ms: number;
  /** 1 for the first attempt of the call, 2 for its first retry, ... */
  attempt: number;
}

/** A failed attempt is about to be repeated (after `delayMs`), on `endpoint`. */
export interface RetryEvent {
  type: "retry";
  path: string;
  endpoint: string;
  /** The attempt that failed. */
  attempt: number;
  code: EtcdErrorCode;
  delayMs: number;
}

/** The client moved on from an endpoint that failed or went silent. */
export interface FailoverEvent {
  type: "failover";
  from: string;
  to: string;
  code: EtcdErrorCode;
}

/** A session's lease was renewed; `ttl` is what the server granted. */
export interface SessionRenewedEvent {
  type: "session.renewed";
  leaseId: string;
  ttl: number;
}

/** A background renewal failed; the session keeps trying while its deadline allows. */
export interface SessionRenewFailedEvent {
  type: "session.renewFailed";
  leaseId: string;
  code: EtcdErrorCode;
}

/** A session's lease is gone or can no longer be trusted: everything held on it is lost. */
export interface SessionLostEvent {
  type: "session.lost";
  leaseId: string;
  code: EtcdErrorCode;
}

/** A contender joined a line and must wait; `position` counts the keys ahead of it, when known. */
export interface LockWaitingEvent {
  type: "lock.waiting";
  kind: HoldingKind;
  name: string;
  position?: number | undefined;
}

/** A lock (or permit, ...) was acquired after `waitedMs`; `revision` is its fencing token. */
export interface LockAcquiredEvent {
  type: "lock.acquired";
  kind: HoldingKind;
  name: string;
  revision: number;
  waitedMs: number;
}

/** A holding was released after `heldMs`. */
export interface LockReleasedEvent {
  type: "lock.released";
  kind: HoldingKind;
  name: string;
  revision: number;
  heldMs: number;
}

/** A holding was lost: its lease ended while held, or its key was gone at the release. */
export interface LockLostEvent {
  type: "lock.lost";
  kind: HoldingKind;
  name: string;
  revision: number;
}

/** A watch stream broke or went silent and was reopened from `revision`. */
export interface WatchReconnectedEvent {
  type: "watch.reconnected";
  endpoint: string | undefined;
  code: EtcdErrorCode;
  /** The first revision the reopened watch asks for (undefined before the first was created). */
  revision: number | undefined;
}

/**
 * Delivers events to the handler. With none set, `on` is false and emitters build nothing; a handler that
 * throws (or returns a promise that rejects) never breaks the call that emitted.
 */
export class EventSink {
  readonly on: boolean;
  readonly #handler: EventHandler | undefined;

  constructor(handler: EventHandler | undefined) {
    this.#handler = handler;
    this.on = handler !== undefined;
  }

  emit(event: EtcdEvent): void {
    try {
      const returned = this.#handler?.(event) as unknown;
      if (returned instanceof Promise) returned.catch(() => {});
    } catch {
      // A handler's failure is the handler's business, never the call's.
    }
  }
}
