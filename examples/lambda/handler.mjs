// An AWS Lambda handler that processes one order at a time per order id, under an etcd lock.
//
// - The client lives at module scope: warm invocations reuse it, and with it the lease `withLock` keeps
//   (`lease: "shared"`, the default), so a warm invocation costs two requests: the lock, and the fenced write
//   that releases it (`unlockWith`). A cold one grants the lease first: three.
// - The lease is short and renewed explicitly (`keepAlive: "manual"`): a frozen sandbox runs no timers, so
//   nothing may pretend to keep a lock alive between invocations. `withLock` renews it while it waits for the
//   lock; `session.renewWhile` while the work runs, and it stops when the work settles. A sandbox frozen
//   meanwhile renews nothing and loses the lock after `LEASE_TTL_SECONDS`.
// - Every wait is bounded by the invocation's remaining time, keeping a margin for the release.
// - The write is fenced and releases the lock in one transaction: it lands only while this invocation's lock
//   key is still its own, so a holder that was frozen past its lease cannot overwrite the next holder's work.
import { Etcd, isEtcdError, op } from "etcd-edge";

const etcd = new Etcd({
  endpoints: (globalThis.process?.env.ETCD_ENDPOINTS ?? "http://127.0.0.1:2379").split(","),
  timeout: 2_000,
});

/** Time kept back from the invocation's deadline for the release. */
const RELEASE_MARGIN_MS = 1_000;
const LEASE_TTL_SECONDS = 5;

/**
 * event: { orderId: string, status: string, workMs?: number }
 * returns: { ok: true, fencingToken } or { ok: false, reason }
 */
export async function handler(event, context) {
  const budget = () => Math.max(1, context.getRemainingTimeInMillis() - RELEASE_MARGIN_MS);
  const options = { ttl: LEASE_TTL_SECONDS, keepAlive: "manual", timeout: budget() };
  try {
    return await etcd.withLock(
      `orders/${event.orderId}/lock`,
      async (lock) => {
        console.log(JSON.stringify({ msg: "lock acquired", orderId: event.orderId, fencingToken: lock.revision }));
        await lock.session.renewWhile(() => doWork(event));
        try {
          await lock.unlockWith(
            [
              op.put(`orders/${event.orderId}/status`, event.status),
              op.put(`orders/${event.orderId}/token`, String(lock.revision)),
            ],
            { timeout: budget() },
          );
        } catch (error) {
          // The lease ran out under the work: the write was refused, nothing of it landed.
          if (!isEtcdError(error, "LOCK_LOST")) throw error;
          return { ok: false, reason: "LOCK_LOST", fencingToken: lock.revision, held: lock.held };
        }
        return { ok: true, fencingToken: lock.revision };
      },
      options,
    );
  } catch (error) {
    if (isEtcdError(error)) return { ok: false, reason: error.code, message: error.message };
    throw error;
  }
}

/** Stands in for the real work of processing the order. */
function doWork(event) {
  return new Promise((resolve) => setTimeout(resolve, event.workMs ?? 0));
}
