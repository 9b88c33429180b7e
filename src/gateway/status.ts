import { badResponse, commonNameRefused, compacted, serverError } from "../errors/catalogue.js";
import { EtcdBadResponseError, type EtcdError, type EtcdErrorCode } from "../errors/etcd-error.js";
import { streamError, unaryError, type WireStreamError } from "./wire.js";

/** gRPC status codes by number, as etcd's gateway reports them. */
const CODE_BY_GRPC: Record<number, EtcdErrorCode> = {
  // Cancelled, from the server, means its side of the connection is closing (a member shutting down).
  1: "UNAVAILABLE",
  3: "INVALID_ARGUMENT",
  4: "TIMEOUT",
  5: "NOT_FOUND",
  6: "ALREADY_EXISTS",
  7: "PERMISSION_DENIED",
  8: "RESOURCE_EXHAUSTED",
  9: "FAILED_PRECONDITION",
  10: "ABORTED",
  11: "INVALID_ARGUMENT",
  12: "INTERNAL",
  13: "INTERNAL",
  14: "UNAVAILABLE",
  15: "INTERNAL",
  16: "UNAUTHENTICATED",
};

/** The plain-text refusal of a client certificate with a CN (auth and --client-cert-auth on), 3.4 to 3.7. */
const COMMON_NAME_REFUSED = "CommonName of client sending a request against gateway";

/** Used only when a non-200 JSON body carries no gRPC code. */
const CODE_BY_HTTP: Record<number, EtcdErrorCode> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  412: "FAILED_PRECONDITION",
  429: "RESOURCE_EXHAUSTED",
  503: "UNAVAILABLE",
  504: "TIMEOUT",
};

/**
 * Codes decided by etcd's message text, for errors whose gRPC code is too generic to act on (compaction is
 * OutOfRange, a missing lease NotFound, a request without a token on an auth-enabled cluster
 * InvalidArgument "user name is empty"), and for a watch's `cancel_reason`, which has only the text.
 */
const CODE_BY_MESSAGE: Array<[string, EtcdErrorCode]> = [
  ["required revision is a future revision", "FUTURE_REVISION"],
  ["requested lease not found", "LEASE_NOT_FOUND"],
  ["lease already exists", "ALREADY_EXISTS"],
  ["user name is empty", "UNAUTHENTICATED"],
  ["authentication failed", "UNAUTHENTICATED"],
  ["invalid auth token", "UNAUTHENTICATED"],
  ["auth token is expired", "UNAUTHENTICATED"],
  ["permission denied", "PERMISSION_DENIED"],
  ["no leader", "UNAVAILABLE"],
];

/** What etcd's "user name is empty" means: the request carried no token, so the client has no `auth`. */
const NO_AUTH =
  ": the cluster has auth enabled and this client sent no token: pass auth: { username, password } to new Etcd()";

/** What etcd's "database space exceeded" means, and what brings the cluster back. */
const NOSPACE =
  ": the cluster raised its NOSPACE alarm (its backend reached --quota-backend-bytes) and refuses every write " +
  "(reads, deletes and lease renewals still work) until an operator frees space: compact the history " +
  "(etcdctl compact), defragment every member (etcdctl defrag), then disarm the alarm (etcdctl alarm disarm)";

/** The error for a gRPC status from etcd. */
export function statusError(grpcCode: number, message: string, httpStatus: number, endpoint?: string): EtcdError {
  let text = message.length > 0 ? message : `gRPC status ${grpcCode}`;
  if (text.includes("required revision has been compacted")) return compacted(text, undefined, endpoint);
  if (text.includes("database space exceeded")) text += NOSPACE;
  if (text.includes("user name is empty")) text += NO_AUTH;
  const code = CODE_BY_MESSAGE.find(([needle]) => text.includes(needle))?.[1] ?? CODE_BY_GRPC[grpcCode] ?? "UNKNOWN";
  return serverError(code, text, { grpcCode, httpStatus, endpoint });
}

/** The error for a non-200 answer: etcd's JSON error body if it is one, else "that wasn't the gateway". */
export function errorFromBody(status: number, text: string, endpoint?: string): EtcdError {
  if (status === 400 && text.startsWith(COMMON_NAME_REFUSED)) return commonNameRefused(endpoint);
  const json = parseJson(text);
  // A stream that fails before its first result answers with the mapped status and an error line.
  const streamLine = json as { error?: unknown } | undefined;
  if (typeof streamLine?.error === "object" && streamLine.error !== null) {
    return errorFromStreamLine(streamLine.error, status, endpoint);
  }
  const checked = json === undefined ? undefined : unaryError.safeParse(json);
  if (checked?.success) {
    const { code, message, error } = checked.data;
    const detail = message ?? error ?? "";
    if (code !== undefined && code !== null) return statusError(code, detail, status, endpoint);
    const byStatus = CODE_BY_HTTP[status];
    if (byStatus)
      return serverError(byStatus, detail || `HTTP ${status}`, { grpcCode: 2, httpStatus: status, endpoint });
  }
  return badResponse(status, text, endpoint);
}

/** The error carried by a stream's `{"error": ...}` line (3.4/3.5 and 3.6 shapes). */
export function errorFromStreamLine(value: unknown, httpStatus: number, endpoint?: string): EtcdError {
  const checked = streamError.safeParse(value);
  const wire: WireStreamError = checked.success ? checked.data : {};
  const grpcCode = wire.grpc_code ?? wire.code ?? 2;
  return statusError(grpcCode, wire.message ?? "", wire.http_code ?? httpStatus, endpoint);
}

/** A proxy or load balancer in front of etcd said the upstream is unavailable: worth another endpoint. */
export function isProxyUnavailable(error: EtcdError): boolean {
  return error instanceof EtcdBadResponseError && [502, 503, 504].includes(error.status);
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
