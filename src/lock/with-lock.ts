import type { Etcd } from "../client.js";
import { EtcdError } from "../errors.js";
import type { Lock } from "./lock.js";
import type { LockOptions } from "./mutex.js";
import { type KeepAliveMode, Session } from "./session.js";

export interface WithLockOptions extends LockOptions {
  /** Lease TTL in seconds. Default 60. */
  ttl?: number | undefined;
  /** Default `"auto"`; `"manual"` for runtimes that freeze between invocations. */
  keepAlive?: KeepAliveMode | undefined;
}

/**
 * Session, lock, `fn`, release, all in `finally`. The release is the lease's revocation (one request),
 * which also tells whether the lock survived: if the lease had already expired, the call fails with
 * LOCK_LOST even though `fn` succeeded, because `fn` ran partly unprotected.
 */
export async function withLock<T>(etcd: Etcd, name: string, fn: (lock: Lock) => T | Promise<T>, options: WithLockOptions = {}): Promise<T> {
  const session = await Session.create(etcd, { ttl: options.ttl, keepAlive: options.keepAlive, signal: options.signal });
  let result: T;
  try {
    const lock = await session.mutex(name).lock(options);
    result = await fn(lock);
  } catch (error) {
    await session.close().catch(() => {});
    throw error;
  }
  const stillHeld = await session.close();
  if (!stillHeld) {
    throw new EtcdError("LOCK_LOST", `lock ${name} was lost before it was released: its lease had expired`);
  }
  return result;
}
