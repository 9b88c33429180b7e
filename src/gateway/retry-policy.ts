import { EtcdBadResponseError, EtcdError, EtcdServerError } from "../errors/etcd-error.js";
import { networkFailure } from "./network-failure.js";
import { isProxyUnavailable } from "./status.js";

/**
 * When a failed call may be sent again. `idempotent`: reads, lease keepalive/timetolive, auth, and writes
 * whose repeat is a no-op (a create-if-absent, a guarded delete) — repeating them changes nothing. `write`:
 * put, delete, txn, grant, revoke — repeated only when the request provably never reached etcd, since a
 * lost answer may hide an applied write.
 */
export type RetryPolicy = "idempotent" | "write";

/**
 * What etcd's gateway says when it could not reach its own member's gRPC server: the request went no
 * further than the gateway, so it was never applied.
 */
const GATEWAY_COULD_NOT_CONNECT =
  /Error while dialing|connection refused|there is no address available|all SubConns are in TransientFailure/i;

/** etcd's own words for "the proposal may or may not commit". */
const ETCD_UNDECIDED = /request timed out|leader changed|request cancelled|timed out waiting for read index/i;

/** Whether a thrown fetch error proves the request never reached a server (so even a write may be re-sent). */
export function provablyNotSent(error: unknown): boolean {
  return networkFailure(error).unsent;
}

/** etcd's gateway answered that it could not reach its member: nothing was applied. */
function gatewayCouldNotConnect(error: EtcdError): boolean {
  return error instanceof EtcdServerError && error.grpcCode === 14 && GATEWAY_COULD_NOT_CONNECT.test(error.message);
}

/**
 * Whether a failure after the request was sent leaves a write's outcome unknown: the connection broke, an
 * answer came from something that is not etcd (a proxy's 502/504), or etcd itself said the proposal may
 * still commit. etcd's other error answers mean it refused the request unapplied.
 */
export function outcomeUnknown(thrown: unknown): boolean {
  if (!(thrown instanceof EtcdError)) return !provablyNotSent(thrown);
  // A 404 that is not the gateway's: no such path on that server, so nothing was applied.
  if (thrown instanceof EtcdBadResponseError) return thrown.status !== 404;
  if (thrown instanceof EtcdServerError) {
    return (
      !gatewayCouldNotConnect(thrown) &&
      (thrown.grpcCode === 4 || thrown.grpcCode === 1 || ETCD_UNDECIDED.test(thrown.message))
    );
  }
  return false;
}

/** Whether `error` (made from `thrown`) may be retried on another endpoint under `policy`. */
export function mayRetry(error: EtcdError, thrown: unknown, policy: RetryPolicy): boolean {
  if (gatewayCouldNotConnect(error)) return true;
  // Refused by the runtime itself (a port fetch never connects to): sending again is refused again.
  if (networkFailure(thrown).permanent) return false;
  if (error.code === "UNAVAILABLE" && !(thrown instanceof EtcdError)) {
    // A network failure: the connection broke or never opened.
    return policy === "idempotent" || provablyNotSent(thrown);
  }
  if (policy === "write") return false;
  if (error.code === "UNAVAILABLE") return true;
  return isProxyUnavailable(error);
}

/** Full-jitter exponential backoff: a random wait in [0, min(cap, base * 2^attempt)). */
export function backoff(attempt: number, base = 25, cap = 1_000): number {
  return Math.random() * Math.min(cap, base * 2 ** attempt);
}
