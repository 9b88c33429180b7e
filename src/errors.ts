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
  | "LOCK_RELEASED"
  | "LOCK_LOST"
  | "NOT_LEADER";

/** Base of every error the SDK throws. */
export class EtcdError extends Error {
  override name = "EtcdError";
  readonly code: EtcdErrorCode;
  /** The endpoint that produced the error, when one was involved. */
  readonly endpoint: string | undefined;

  constructor(code: EtcdErrorCode, message: string, options: { cause?: unknown; endpoint?: string } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.endpoint = options.endpoint;
  }
}

/** The gateway answered with an etcd error: it carries the gRPC code and HTTP status it came with. */
export class EtcdServerError extends EtcdError {
  override name = "EtcdServerError";
  readonly grpcCode: number;
  readonly httpStatus: number;

  constructor(
    code: EtcdErrorCode,
    message: string,
    details: { grpcCode: number; httpStatus: number; endpoint?: string; cause?: unknown },
  ) {
    super(code, message, details);
    this.grpcCode = details.grpcCode;
    this.httpStatus = details.httpStatus;
  }
}

/** A read or watch asked for history that compaction has removed. */
export class EtcdCompactedError extends EtcdError {
  override name = "EtcdCompactedError";
  /** The oldest revision still available, when the server said it (watch always does). */
  readonly compactRevision: number | undefined;

  constructor(message: string, compactRevision: number | undefined, options: { endpoint?: string; cause?: unknown } = {}) {
    super("COMPACTED", message, options);
    this.compactRevision = compactRevision;
  }
}

/** Whatever answered was not etcd's gateway speaking JSON: a proxy's HTML page, an empty reply, garbage. */
export class EtcdBadResponseError extends EtcdError {
  override name = "EtcdBadResponseError";
  readonly status: number;
  /** The start of the body, for diagnosis. */
  readonly body: string;

  constructor(message: string, details: { status: number; body: string; endpoint?: string; cause?: unknown }) {
    super("BAD_RESPONSE", message, details);
    this.status = details.status;
    this.body = details.body;
  }
}

/** The call's own time budget ran out. */
export class EtcdTimeoutError extends EtcdError {
  override name = "EtcdTimeoutError";
  readonly timeout: number;

  constructor(timeout: number, options: { endpoint?: string; cause?: unknown } = {}) {
    super("TIMEOUT", `request timed out after ${timeout} ms`, options);
    this.timeout = timeout;
  }
}

export function invalidArgument(message: string): EtcdError {
  return new EtcdError("INVALID_ARGUMENT", message);
}

export function isEtcdError(error: unknown, code?: EtcdErrorCode): error is EtcdError {
  return error instanceof EtcdError && (code === undefined || error.code === code);
}
