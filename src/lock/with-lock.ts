import type { EtcdClient } from "../api/client.js";
import { describe, invalidArgument, lockLost } from "../errors/catalogue.js";
import type { KeepAliveMode } from "./lease-session.js";
import type { Lock } from "./lock.js";
import type { LockOptions } from "./mutex.js";
import { Session } from "./session.js";

export interface WithLockOptions extends LockOptions {
  /** Lease TTL in seconds. Default 60. */
  ttl?: number | undefined;
  /**
   * Default `"auto"`; `"manual"` for runtimes that freeze between invocations: the lease is renewed only
   * while `withLock` waits for the lock (so `timeout` may exceed the TTL), never in the background.
   */
  keepAlive?: KeepAliveMode | undefined;
}

/**
 * Session, lock, `fn`, release, all in `finally`. The release is the lease's revocation (one request,
 * resent after a lost answer), which also tells whether the lock survived: if the lease had already
 * expired, the call fails with LOCK_LOST even though `fn` succeeded, because `fn` ran partly unprotected.
 */
export async function withLock<T>(
  client: EtcdClient,
  name: string,
  fn: (lock: Lock<Session>) => T | Promise<T>,
  options: WithLockOptions = {},
): Promise<T> {
  // Refused before a lease is granted for nothing.
  if (typeof name !== "string" || name.length === 0) throw invalidArgument("a lock name must be a non-empty string");
  if (typeof fn !== "function") throw invalidArgument(`withLock needs a function to run under the lock, got ${describe(fn)}`);
  const session = await Session.create(client, { ttl: options.ttl, keepAlive: options.keepAlive, signal: options.signal });
  let result: T;
  try {
    const mutex = session.mutex(name);
    // A manual lease cannot outlast its TTL by itself: renew it while waiting, so `timeout` means what it says.
    const lock = session.keepAlive === "manual" ? await session.renewWhile(() => mutex.lock(options)) : await mutex.lock(options);
    result = await fn(lock);
  } catch (error) {
    await session.close().catch(() => {});
    throw error;
  }
  const stillHeld = await session.close();
  if (!stillHeld) throw lockLost(name, "its lease had expired before it was released");
  return result;
}
