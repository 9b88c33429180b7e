/** gRPC status codes used by etcd, with the HTTP status Debian's etcd 3.4.23 gateway maps each to (observed). */
export const GrpcCode = {
  InvalidArgument: 3,
  NotFound: 5,
  PermissionDenied: 7,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  OutOfRange: 11,
  Unavailable: 14,
  Unauthenticated: 16,
} as const;

const HTTP_STATUS: Record<number, number> = {
  3: 400,
  5: 404,
  7: 403,
  8: 429,
  9: 412,
  11: 400,
  14: 503,
  16: 401,
};

const HTTP_TEXT: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  412: "Precondition Failed",
  429: "Too Many Requests",
  503: "Service Unavailable",
};

export class EtcdError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = "EtcdError";
  }

  get httpStatus(): number {
    return HTTP_STATUS[this.code] ?? 500;
  }

  get httpStatusText(): string {
    return HTTP_TEXT[this.httpStatus] ?? "Internal Server Error";
  }

  static invalidArgument(message: string): EtcdError {
    return new EtcdError(GrpcCode.InvalidArgument, message);
  }
}

const e = (code: number, message: string) => () => new EtcdError(code, `etcdserver: ${message}`);

/** Factories rather than shared instances, so a thrown error never carries another request's stack. */
export const Errors = {
  emptyKey: e(3, "key is not provided"),
  keyNotFound: e(3, "key not found"),
  valueProvided: e(3, "value is provided"),
  leaseProvided: e(3, "lease is provided"),
  tooManyOps: e(3, "too many operations in txn request"),
  duplicateKey: e(3, "duplicate key given in txn request"),
  compacted: e(11, "mvcc: required revision has been compacted"),
  futureRev: e(11, "mvcc: required revision is a future revision"),
  leaseNotFound: e(5, "requested lease not found"),
  leaseExists: e(9, "lease already exists"),
  leaseTTLTooLarge: e(11, "too large lease TTL"),
  authNotEnabled: e(9, "authentication is not enabled"),
  authFailed: e(3, "authentication failed, invalid user ID or password"),
  userEmpty: e(3, "user name is empty"),
  invalidAuthToken: e(16, "invalid auth token"),
  permissionDenied: e(7, "permission denied"),
  noLeader: e(14, "no leader"),
};
