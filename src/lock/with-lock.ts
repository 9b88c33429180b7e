import type { EtcdClient } from "../api/client.js";
import { lockLost } from "../errors/catalogue.js";
import type { KeepAliveMode } from "./lease-session.js";
import type { Lock } from "./lock.js";
import type { LockOptions } from "./mutex.js";
import { Session } from "./session.js";

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
export async function withLock<T>(
  client: EtcdClient,
  name: string,
  fn: (lock: Lock<Session>) => T | Promise<T>,
  options: WithLockOptions = {},
): Promise<T> {
  const session = await Session.create(client, { ttl: options.ttl, keepAlive: options.keepAlive, signal: options.signal });
  let result: T;
  try {
    const lock = await session.mutex(name).lock(options);
    result = await fn(lock);
  } catch (error) {
    await session.close().catch(() => {});
    throw error;
  }
  const stillHeld = await session.close();
  if (!stillHeld) throw lockLost(name, "its lease had expired before it was released");
  return result;
}
