// handler.mjs in TypeScript: the same handler, typed. See handler.mjs for why each line is as it is.
import { Etcd, isEtcdError, op } from "etcd-edge";

const etcd = new Etcd({
  endpoints: (globalThis.process?.env.ETCD_ENDPOINTS ?? "http://127.0.0.1:2379").split(","),
  timeout: 2_000,
});

const RELEASE_MARGIN_MS = 1_000;
const LEASE_TTL_SECONDS = 5;

export interface OrderEvent {
  orderId: string;
  status: string;
  workMs?: number;
}

export type OrderResult =
  | { ok: true; fencingToken: number }
  | { ok: false; reason: string; message?: string; fencingToken?: number; held?: boolean };

/** The part of Lambda's context the handler reads (`aws-lambda`'s `Context` has it). */
export interface LambdaContext {
  getRemainingTimeInMillis(): number;
}

export async function handler(event: OrderEvent, context: LambdaContext): Promise<OrderResult> {
  const budget = () => Math.max(1, context.getRemainingTimeInMillis() - RELEASE_MARGIN_MS);
  try {
    return await etcd.withLock(
      `orders/${event.orderId}/lock`,
      async (lock): Promise<OrderResult> => {
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
          if (!isEtcdError(error, "LOCK_LOST")) throw error;
          return { ok: false, reason: "LOCK_LOST", fencingToken: lock.revision, held: lock.held };
        }
        return { ok: true, fencingToken: lock.revision };
      },
      { ttl: LEASE_TTL_SECONDS, keepAlive: "manual", timeout: budget() },
    );
  } catch (error) {
    if (isEtcdError(error)) return { ok: false, reason: error.code, message: error.message };
    throw error;
  }
}

function doWork(event: OrderEvent): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, event.workMs ?? 0));
}
