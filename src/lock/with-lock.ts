import type { EtcdClient } from "../api/client.js";
import { describe, heldLost, invalidArgument, lockLost } from "../errors/catalogue.js";
import type { EtcdError } from "../errors/etcd-error.js";
import type { KeepAliveMode } from "./lease-session.js";
import { namesArg } from "./lock-all.js";
import type { Lock } from "./lock.js";
import type { MultiLock } from "./multi-lock.js";
import type { LockOptions } from "./mutex.js";
import type { Permit } from "./permit.js";
import { permitsArg } from "./semaphore.js";
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
export async function withLock<T>(client: EtcdClient, name: string, fn: (lock: Lock<Session>) => T | Promise<T>, options: WithLockOptions = {}): Promise<T> {
  // Refused before a lease is granted for nothing.
  if (typeof name !== "string" || name.length === 0) throw invalidArgument("a lock name must be a non-empty string");
  checkFn("withLock", fn);
  return withHeld(client, (session) => session.mutex(name).lock(options), fn, options, () => lockLost(name, "its lease had expired before it was released"));
}

/** As `withLock`, holding a permit of semaphore `name` (of `permits`) while `fn` runs. */
export async function withSemaphore<T>(
  client: EtcdClient,
  name: string,
  permits: number,
  fn: (permit: Permit<Session>) => T | Promise<T>,
  options: WithLockOptions = {},
): Promise<T> {
  if (typeof name !== "string" || name.length === 0) throw invalidArgument("a semaphore name must be a non-empty string");
  permitsArg(permits);
  checkFn("withSemaphore", fn);
  const lost = () => heldLost(`permit of semaphore ${name}`, "its lease had expired before it was released");
  return withHeld(client, (session) => session.semaphore(name, { permits }).acquire(options), fn, options, lost);
}

/** As `withLock`, holding every lock of `names` at once (`session.lockAll`) while `fn` runs. */
export async function withLocks<T>(client: EtcdClient, names: readonly string[], fn: (locks: MultiLock<Session>) => T | Promise<T>, options: WithLockOptions = {}): Promise<T> {
  const checked = namesArg(names);
  checkFn("withLocks", fn);
  const lost = () => heldLost(`locks ${checked.join(", ")}`, "their lease had expired before they were released");
  return withHeld(client, (session) => session.lockAll(checked, options), fn, options, lost);
}

function checkFn(what: string, fn: unknown): void {
  if (typeof fn !== "function") throw invalidArgument(`${what} needs a function to run under the lock, got ${describe(fn)}`);
}

/** The frame of withLock and its siblings: a session of its own, `acquire`, `fn`, and the lease revoked. */
async function withHeld<H, T>(
  client: EtcdClient,
  acquire: (session: Session) => Promise<H>,
  fn: (held: H) => T | Promise<T>,
  options: WithLockOptions,
  lost: () => EtcdError,
): Promise<T> {
  const session = await Session.create(client, { ttl: options.ttl, keepAlive: options.keepAlive, signal: options.signal });
  let result: T;
  try {
    // A manual lease cannot outlast its TTL by itself: renew it while waiting, so `timeout` means what it says.
    const held = session.keepAlive === "manual" ? await session.renewWhile(() => acquire(session)) : await acquire(session);
    result = await fn(held);
  } catch (error) {
    await session.close().catch(() => {});
    throw error;
  }
  const stillHeld = await session.close();
  if (!stillHeld) throw lost();
  return result;
}
