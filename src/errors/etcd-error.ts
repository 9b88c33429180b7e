/**
 * Stable machine-readable error codes. Match on `error.code`, never on the message text.
 */
export type EtcdErrorCode =
  | "INVALID_ARGUMENT"
  | "LEASE_NOT_FOUND"
  | "NOT_FOUND"
  | "COMPACTED"
  | "FUTURE_REVISION"
  | "FAILED_PRECONDITION"
  | "ALREADY_EXISTS"
  | "RESOURCE_EXHAUSTED"
  | "UNAUTHENTICATED"
  | "PERMISSION_DENIED"
  | "UNAVAILABLE"
  | "TIMEOUT"
  | "ABORTED"
  | "BAD_RESPONSE"
  | "INTERNAL"
  | "UNKNOWN"
  | "LOCKED"
  | "SESSION_EXPIRED"
  | "SESSION_CLOSED"
  | "LOCK_RELEASED"
  | "LOCK_LOST"
  | "NOT_LEADER"
  | "PERMITS_MISMATCH"
  | "LOCK_NAME_CONFLICT"
  | "STREAM_HELD_BACK"
  | "RELEASE_REQUESTED";

/** Context every error may carry. */
export interface EtcdErrorDetails {
  /** The underlying error or abort reason. */
  cause?: unknown;
  /** The endpoint that produced the error, when one was involved. */
  endpoint?: string | undefined;
  /**
   * The request was sent and its answer lost: a write may or may not have been applied. Re-read before
   * acting on the assumption that it was not.
   */
  indeterminate?: boolean | undefined;
}

/**
 * Marks errors of this family across realms (an iframe, a vm context) and across duplicate copies of the
 * package in one bundle, where `instanceof` fails. `Symbol.for` is shared by every realm of an agent.
 */
const BRAND = Symbol.for("etcd-edge.EtcdError");

/** Base of every error the SDK throws. */
export class EtcdError extends Error {
  /**
   * `"EtcdError"`. Each class of the family sets its own, so `String(error)` and stack traces tell them apart
   * (an Error subclass is otherwise named "Error").
   */
  override name = "EtcdError";
  /** What went wrong, as a stable string: match on it, never on the message. */
  readonly code: EtcdErrorCode;
  /** The endpoint that produced the error, when one was involved. */
  readonly endpoint: string | undefined;
  /** True when a write was sent and its answer lost: it may have been applied. */
  readonly indeterminate: boolean;

  constructor(code: EtcdErrorCode, message: string, details: EtcdErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.code = code;
    this.endpoint = details.endpoint;
    this.indeterminate = details.indeterminate ?? false;
  }

  /** @internal */
  get [BRAND](): true {
    return true;
  }
}

/** The gateway answered with an etcd error: it carries the gRPC code and HTTP status it came with. */
export class EtcdServerError extends EtcdError {
  /** `"EtcdServerError"`; its `code` comes from etcd's error: its message when known, else its gRPC code. */
  override name = "EtcdServerError";
  /** The gRPC status code etcd reported. */
  readonly grpcCode: number;
  /** The HTTP status of the answer. */
  readonly httpStatus: number;

  constructor(
    code: EtcdErrorCode,
    message: string,
    details: EtcdErrorDetails & { grpcCode: number; httpStatus: number },
  ) {
    super(code, message, details);
    this.grpcCode = details.grpcCode;
    this.httpStatus = details.httpStatus;
  }
}

/** A read or watch asked for history that compaction has removed. */
export class EtcdCompactedError extends EtcdError {
  /** `"EtcdCompactedError"`; its `code` is always COMPACTED. */
  override name = "EtcdCompactedError";
  /** The oldest revision still available, when the server said it (watch always does). */
  readonly compactRevision: number | undefined;

  constructor(message: string, compactRevision: number | undefined, details: EtcdErrorDetails = {}) {
    super("COMPACTED", message, details);
    this.compactRevision = compactRevision;
  }
}

/** Whatever answered was not etcd's gateway speaking JSON: a proxy's HTML page, an empty reply, garbage. */
export class EtcdBadResponseError extends EtcdError {
  /** `"EtcdBadResponseError"`; its `code` is always BAD_RESPONSE. */
  override name = "EtcdBadResponseError";
  /** The HTTP status of the answer. */
  readonly status: number;
  /** The start of the body, for diagnosis. */
  readonly body: string;

  constructor(message: string, details: EtcdErrorDetails & { status: number; body: string }) {
    super("BAD_RESPONSE", message, details);
    this.status = details.status;
    this.body = details.body;
  }
}

/** The call's own time budget ran out. */
export class EtcdTimeoutError extends EtcdError {
  /** `"EtcdTimeoutError"`; its `code` is always TIMEOUT. */
  override name = "EtcdTimeoutError";
  /** The budget that ran out, in milliseconds. */
  readonly timeout: number;

  /** `details.what`: what timed out (a call, a lock's wait); `details.hint`: what to do about it. */
  constructor(
    timeout: number,
    details: EtcdErrorDetails & { what?: string | undefined; hint?: string | undefined } = {},
  ) {
    super("TIMEOUT", `${details.what ?? "request"} timed out after ${timeout} ms${details.hint ?? ""}`, details);
    this.timeout = timeout;
  }
}

/**
 * A failure that says nothing of the server's state: no answer (a timeout, a cut connection, an abort) or
 * none that refused the request. Sending the same idempotent request again may succeed.
 */
export function unanswered(error: unknown): boolean {
  return !isEtcdError(error) || error.indeterminate || ["UNAVAILABLE", "TIMEOUT", "ABORTED"].includes(error.code);
}

/**
 * Whether `error` is an error of this SDK, optionally with a given code. Works across realms and across
 * duplicate copies of the package, where `instanceof EtcdError` would not.
 */
export function isEtcdError(error: unknown, code?: EtcdErrorCode): error is EtcdError {
  if (
    !(error instanceof EtcdError) &&
    !(typeof error === "object" && error !== null && (error as Record<symbol, unknown>)[BRAND] === true)
  ) {
    return false;
  }
  return code === undefined || (error as EtcdError).code === code;
}
