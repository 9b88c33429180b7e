import { EtcdError } from "../errors/etcd-error.js";
import { isProxyUnavailable } from "./status.js";

/**
 * When a failed call may be sent again. `idempotent`: reads, lease keepalive/timetolive, auth — repeating
 * them changes nothing. `write`: put, delete, txn, grant, revoke — repeated only when the request provably
 * never reached a server, since a lost answer may hide an applied write.
 */
export type RetryPolicy = "idempotent" | "write";

const NEVER_SENT = /ECONNREFUSED|connection refused|ConnectionRefused|ENOTFOUND|EAI_AGAIN|failed to lookup|dns error/i;

/** Whether a thrown fetch error proves the request never reached a server (so even a write may be re-sent). */
export function provablyNotSent(error: unknown): boolean {
  for (let current = error, depth = 0; current !== undefined && current !== null && depth < 6; depth++) {
    const { code, message, cause } = current as { code?: unknown; message?: unknown; cause?: unknown };
    if ((typeof code === "string" && NEVER_SENT.test(code)) || (typeof message === "string" && NEVER_SENT.test(message))) {
      return true;
    }
    current = cause;
  }
  return false;
}

/** Whether `error` (made from `thrown`) may be retried on another endpoint under `policy`. */
export function mayRetry(error: EtcdError, thrown: unknown, policy: RetryPolicy): boolean {
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
