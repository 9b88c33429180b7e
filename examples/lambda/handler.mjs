// An AWS Lambda handler that processes one order at a time per order id, under an etcd lock.
//
// - The client lives at module scope: warm invocations reuse it (it holds no connection or timer itself).
// - The lease is short and renewed explicitly ("manual"): a frozen sandbox runs no timers, so nothing may
//   pretend to keep a lock alive between invocations. While this invocation waits for the lock or works
//   under it, `session.renewWhile` renews the lease; it stops when the awaited work settles. A sandbox
//   frozen meanwhile renews nothing and loses the lock after `LEASE_TTL_SECONDS`.
// - Every wait is bounded by the invocation's remaining time, keeping a margin to release in `finally`.
// - The write is fenced: it succeeds only while this invocation's lock key still has its create revision,
//   so a holder that was frozen past its lease cannot overwrite the next holder's work.
import { Etcd, isEtcdError, op } from "etcd-edge";

const etcd = new Etcd({
  endpoints: (globalThis.process?.env.ETCD_ENDPOINTS ?? "http://127.0.0.1:2379").split(","),
  timeout: 2_000,
});

/** Time kept back from the invocation's deadline for the release in `finally`. */
const RELEASE_MARGIN_MS = 1_000;
const LEASE_TTL_SECONDS = 5;

/**
 * event: { orderId: string, status: string, workMs?: number }
 * returns: { ok: true, fencingToken } or { ok: false, reason }
 */
export async function handler(event, context) {
  const budget = () => Math.max(1, context.getRemainingTimeInMillis() - RELEASE_MARGIN_MS);
  const session = await etcd.session({ ttl: LEASE_TTL_SECONDS, keepAlive: "manual", timeout: budget() });
  try {
    const mutex = session.mutex(`orders/${event.orderId}/lock`);
    const lock = await session.renewWhile(() => mutex.lock({ timeout: budget() }));
    console.log(JSON.stringify({ msg: "lock acquired", orderId: event.orderId, fencingToken: lock.revision }));
    await session.renewWhile(() => doWork(event));
    const write = await etcd
      .txn()
      .if(lock.ifHeld())
      .then(
        op.put(`orders/${event.orderId}/status`, event.status),
        op.put(`orders/${event.orderId}/token`, String(lock.revision)),
      )
      .commit({ timeout: budget() });
    if (!write.succeeded) return { ok: false, reason: "LOCK_LOST", fencingToken: lock.revision, held: lock.held };
    await lock.unlock({ timeout: budget() });
    return { ok: true, fencingToken: lock.revision };
  } catch (error) {
    if (isEtcdError(error)) return { ok: false, reason: error.code, message: error.message };
    throw error;
  } finally {
    // Revoking the lease releases anything still held; if it fails, the short lease expires on its own.
    await session.close({ timeout: RELEASE_MARGIN_MS }).catch(() => {});
  }
}

/** Stands in for the real work of processing the order. */
function doWork(event) {
  return new Promise((resolve) => setTimeout(resolve, event.workMs ?? 0));
}
