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
  | LockDelayedEvent
  | LockReleasedEvent
  | LockLostEvent
  | WatchReconnectedEvent
  | WatchHeldBackEvent;

/** Receives every {@link EtcdEvent}. It runs inline: keep it cheap. What it throws is ignored. */
export type EventHandler = (event: EtcdEvent) => void;

/** What is held or waited for: a lock, a permit, a read or write lock, several locks, leadership. */
export type HoldingKind = "lock" | "permit" | "read" | "write" | "locks" | "leadership";

/** One HTTP request to one endpoint (one attempt of a call), answered or not. */
export interface RequestEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "request";
  /** The gateway path, e.g. `/v3/kv/txn`. */
  path: string;
  /** The endpoint the request went to. */
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
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "retry";
  /** The gateway path of the call. */
  path: string;
  /** The endpoint the next attempt goes to (another one after a failover). */
  endpoint: string;
  /** The attempt that failed. */
  attempt: number;
  /** Why it failed. */
  code: EtcdErrorCode;
  /** The jittered backoff before the next attempt, in milliseconds. */
  delayMs: number;
}

/** The client moved on from an endpoint that failed or went silent. */
export interface FailoverEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "failover";
  /** The endpoint left behind. */
  from: string;
  /** The endpoint calls go to from now on. */
  to: string;
  /** Why `from` was left. */
  code: EtcdErrorCode;
}

/** A session's lease was renewed; `ttl` is what the server granted. */
export interface SessionRenewedEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "session.renewed";
  /** The session's lease. */
  leaseId: string;
  /** Seconds the lease now has left. */
  ttl: number;
}

/** A background renewal failed; the session keeps trying while its deadline allows. */
export interface SessionRenewFailedEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "session.renewFailed";
  /** The session's lease. */
  leaseId: string;
  /** Why the renewal failed. */
  code: EtcdErrorCode;
}

/** A session's lease is gone or can no longer be trusted: everything held on it is lost. */
export interface SessionLostEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "session.lost";
  /** The lease that is gone. */
  leaseId: string;
  /** Why: SESSION_EXPIRED for a lease past its deadline or found expired. */
  code: EtcdErrorCode;
}

/** A contender joined a line and must wait; `position` counts the keys ahead of it, when known. */
export interface LockWaitingEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "lock.waiting";
  /** What is waited for. */
  kind: HoldingKind;
  /** The name waited on or held; for several locks, their names joined by ", ". */
  name: string;
  /** How many keys are ahead of it in the line, when the join showed it. */
  position?: number | undefined;
}

/** A lock (or permit, ...) was acquired after `waitedMs`; `revision` is its fencing token. */
export interface LockAcquiredEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "lock.acquired";
  /** What was acquired. */
  kind: HoldingKind;
  /** The name waited on or held; for several locks, their names joined by ", ". */
  name: string;
  /** The fencing token: the create revision of the holder's key. */
  revision: number;
  /** From the call to the acquisition, in milliseconds. */
  waitedMs: number;
}

/**
 * The contender ahead of a waiter left uncleanly (its lease ended, or it was revoked): with `lockDelay`, the
 * waiter holds only `delayMs` later, while a stale holder may still be writing to a store that cannot check a
 * fence.
 */
export interface LockDelayedEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "lock.delayed";
  /** What is waited for. */
  kind: HoldingKind;
  /** The name waited on; for several locks, their names joined by ", ". */
  name: string;
  /** The delay, in milliseconds: the `lockDelay` in force. */
  delayMs: number;
  /** How the contender ahead left. */
  why: string;
}

/** A holding was released after `heldMs`. */
export interface LockReleasedEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "lock.released";
  /** What was released. */
  kind: HoldingKind;
  /** The name waited on or held; for several locks, their names joined by ", ". */
  name: string;
  /** The fencing token it was held with. */
  revision: number;
  /** From the acquisition to the release, in milliseconds. */
  heldMs: number;
}

/** A holding was lost: its lease ended while held, or its key was gone at the release. */
export interface LockLostEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "lock.lost";
  /** What was lost. */
  kind: HoldingKind;
  /** The name waited on or held; for several locks, their names joined by ", ". */
  name: string;
  /** The fencing token it was held with: writes fenced with it now fail. */
  revision: number;
}

/** A watch stream broke or went silent and was reopened from `revision`. */
export interface WatchReconnectedEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "watch.reconnected";
  /** The endpoint whose stream ended; undefined if it failed before one answered. */
  endpoint: string | undefined;
  /** Why the stream ended. */
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

/**
 * A watch stream through `endpoint` came back whole, only when it ended: something between (a proxy, a load
 * balancer) holds streamed answers back. Told once per client and endpoint; the client's locks wait and follow
 * their keys on reads through that endpoint for a while (docs/deploying.md says what to change).
 */
export interface WatchHeldBackEvent {
  /** Tells this event from the others of {@link EtcdEvent}. */
  type: "watch.heldBack";
  /** The endpoint whose stream was held back. */
  endpoint: string;
}
