import type { EtcdClient } from "../api/client.js";
import { describe, invalidArgument, lockLost } from "../errors/catalogue.js";
import { isEtcdError } from "../errors/etcd-error.js";
import { DEFAULT_SESSION_TTL, type KeepAliveMode } from "./lease-session.js";
import type { Lock } from "./lock.js";
import type { LockOptions } from "./mutex.js";
import { Session } from "./session.js";
import type { SharedLeases } from "./shared-lease.js";

/** Where a one-shot lock's lease comes from. */
export type LeaseMode = "shared" | "per-call";

export interface WithLockOptions extends LockOptions {
  /** Lease TTL in seconds. Default 60. */
  ttl?: number | undefined;
  /**
   * `"auto"` (default): the lease is renewed while `fn` runs. `"manual"` for runtimes that freeze between
   * invocations: the lease is renewed only while `withLock` waits for the lock (so `timeout` may exceed the
   * TTL), never while `fn` runs and never in the background.
   */
  keepAlive?: KeepAliveMode | undefined;
  /**
   * `"shared"` (default): the client keeps one lease for its one-shot locks and reuses it while it is
   * valid, so a warm call costs two requests (take, release); the lease outlives the last call by up to its
   * TTL, holding no key. `"per-call"`: a lease of its own for this call, granted and revoked (three
   * requests), for when nothing may outlive the call.
   */
  lease?: LeaseMode | undefined;
}

/**
 * Runs `fn` holding lock `name`; takes and releases everything in `finally`. If the lock was lost before
 * the release (its lease expired under `fn`), the call fails with LOCK_LOST even though `fn` succeeded,
 * because `fn` ran partly unprotected.
 */
export async function withLock<T>(
  client: EtcdClient,
  shared: SharedLeases,
  name: string,
  fn: (lock: Lock<Session>) => T | Promise<T>,
  options: WithLockOptions = {},
): Promise<T> {
  // Refused before a lease is granted for nothing.
  if (typeof name !== "string" || name.length === 0) throw invalidArgument("a lock name must be a non-empty string");
  if (typeof fn !== "function") throw invalidArgument(`withLock needs a function to run under the lock, got ${describe(fn)}`);
  const mode = options.lease ?? "shared";
  if (mode !== "shared" && mode !== "per-call") throw invalidArgument(`lease must be "shared" or "per-call", got ${describe(mode)}`);
  const keepAlive = options.keepAlive ?? "auto";
  if (keepAlive !== "auto" && keepAlive !== "manual") throw invalidArgument(`keepAlive must be "auto" or "manual", got ${describe(keepAlive)}`);
  return mode === "shared" ? withSharedLease(shared, name, fn, options, keepAlive) : withOwnLease(client, name, fn, options);
}

/** Grant, take, `fn`, revoke: the revocation is the release and says whether the lock survived. */
async function withOwnLease<T>(client: EtcdClient, name: string, fn: (lock: Lock<Session>) => T | Promise<T>, options: WithLockOptions): Promise<T> {
  const session = await Session.create(client, { ttl: options.ttl, keepAlive: options.keepAlive, signal: options.signal });
  let result: T;
  try {
    result = await fn(await take(session, name, options));
  } catch (error) {
    await session.close().catch(() => {});
    throw error;
  }
  const stillHeld = await session.close();
  if (!stillHeld) throw lockLost(name, "its lease had expired before it was released");
  return result;
}

/** Take on the client's shared lease, `fn`, release the key: two requests when the lease is warm. */
async function withSharedLease<T>(
  shared: SharedLeases,
  name: string,
  fn: (lock: Lock<Session>) => T | Promise<T>,
  options: WithLockOptions,
  keepAlive: KeepAliveMode,
): Promise<T> {
  const ttl = options.ttl ?? DEFAULT_SESSION_TTL;
  for (let grants = 0; ; grants++) {
    const session = await shared.use(ttl, options.signal);
    try {
      let lock: Lock<Session>;
      try {
        // Renewing while waiting also renews at once, beside the take, when the lease has little left.
        lock = await session.renewWhile(() => session.mutex(name).lock(options));
      } catch (error) {
        // The lease ended while the process was frozen: the server refused our key. One fresh grant.
        if (grants === 0 && (isEtcdError(error, "LEASE_NOT_FOUND") || isEtcdError(error, "SESSION_EXPIRED"))) {
          shared.forget(ttl, session);
          continue;
        }
        throw error;
      }
      let result: T;
      try {
        result = await (keepAlive === "auto" ? session.renewWhile(async () => fn(lock)) : fn(lock));
      } catch (error) {
        await lock.unlock().catch(() => {});
        throw error;
      }
      await lock.unlock();
      return result;
    } finally {
      shared.done(ttl, session);
    }
  }
}

/** Takes the lock; a manual lease is renewed while waiting, so `timeout` means what it says. */
function take(session: Session, name: string, options: LockOptions): Promise<Lock<Session>> {
  const mutex = session.mutex(name);
  return session.keepAlive === "manual" ? session.renewWhile(() => mutex.lock(options)) : mutex.lock(options);
}
