/** gRPC status codes etcd answers with. */
export const GrpcCode = {
  Unknown: 2,
  InvalidArgument: 3,
  DeadlineExceeded: 4,
  NotFound: 5,
  PermissionDenied: 7,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  OutOfRange: 11,
  Internal: 13,
  Unavailable: 14,
  Unauthenticated: 16,
} as const;

/**
 * A gRPC status as the mock's server answers it; the gateway dialect turns it into an HTTP answer. Not the SDK's
 * EtcdError: this is what the server says, not what a client makes of it.
 */
export class GrpcStatusError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = "GrpcStatusError";
  }

  static invalidArgument(message: string): GrpcStatusError {
    return new GrpcStatusError(GrpcCode.InvalidArgument, message);
  }
}

/**
 * The gateway drops the connection without an answer (3.4 panics on a null element in a repeated message field).
 * mock.fetch rejects as a network failure; the HTTP server destroys the socket.
 */
export class DroppedConnection extends Error {
  constructor(reason: string) {
    super(`etcd-edge/testing: etcd closes the connection without an answer here (${reason})`);
    this.name = "DroppedConnection";
  }
}

/** A request body the gateway could not decode into the request message (wording per dialect). */
export class DecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DecodeError";
  }
}

const e = (code: number, message: string) => () => new GrpcStatusError(code, `etcdserver: ${message}`);

/** Factories rather than shared instances, so a thrown error never carries another request's stack. */
export const Errors = {
  emptyKey: e(3, "key is not provided"),
  invalidSortOption: e(3, "invalid sort option"),
  keyNotFound: e(3, "key not found"),
  valueProvided: e(3, "value is provided"),
  leaseProvided: e(3, "lease is provided"),
  tooManyOps: e(3, "too many operations in txn request"),
  duplicateKey: e(3, "duplicate key given in txn request"),
  requestTooLarge: e(3, "request is too large"),
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
  /** The gRPC server's receive limit (--max-request-bytes plus 512 KiB of overhead). */
  messageTooLarge: (size: number, max: number) =>
    new GrpcStatusError(GrpcCode.ResourceExhausted, `grpc: received message larger than max (${size} vs. ${max})`),
};
