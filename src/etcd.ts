import { EtcdClient } from "./api/client.js";
import type { MultiLock } from "./lock/lock-all/multi-lock.js";
import type { Lock, LockTicket } from "./lock/mutex/lock.js";
import { type ResumeOptions, resumeLock } from "./lock/mutex/resume.js";
import type { Permit } from "./lock/semaphore/permit.js";
import { Session } from "./lock/session.js";
import type { SessionOptions } from "./lock/lease/lease-grant.js";
import { SharedLeases } from "./lock/shared-leases.js";
import { withLock, withLocks, withSemaphore, type WithLockOptions } from "./lock/with-lock.js";

/**
 * The front door: the core client ({@link EtcdClient}: KV, txn, lease, watch) plus sessions and locks.
 * Creating one sends nothing.
 */
export class Etcd extends EtcdClient {
  /** The leases one-shot locks share; empty until the first `withLock`. */
  readonly #shared = new SharedLeases(this);
  readonly #on = { client: this, shared: this.#shared };

  /** A lease-backed session for locks and elections (one request). See {@link SessionOptions}. */
  session(options: SessionOptions = {}): Promise<Session> {
    return Session.create(this, options);
  }

  /**
   * Runs `fn` holding lock `name`, and releases it however `fn` ends. By default on the client's shared lease
   * (`lease: "shared"`, kept for the next call: a warm call costs two requests, the lock and its release);
   * `lease: "per-call"` grants a lease for this call and revokes it. The lock waits at most `timeout` (the
   * client's by default). LOCK_LOST after `fn` if the lock was lost before its release. `waitUntil` hands the
   * release to the runtime. See {@link WithLockOptions}.
   */
  withLock<T>(name: string, fn: (lock: Lock<Session>) => T | Promise<T>, options: WithLockOptions = {}): Promise<T> {
    return withLock(this.#on, name, fn, options);
  }

  /**
   * Revokes the lease this client keeps for `withLock` (see {@link WithLockOptions.lease}), if any. The
   * client stays usable; a later `withLock` grants a new one.
   */
  close(): Promise<void> {
    return this.#shared.close();
  }

  /**
   * For `await using`: {@link Etcd.close}, never throwing (a lease it could not revoke expires within its TTL),
   * as a session's disposal: an error of its own must not wrap the one that matters in a SuppressedError.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close().catch(() => {});
  }

  /**
   * Runs `fn` holding a permit of semaphore `name` (of `permits`, as every contender on the name must use), and
   * releases it however `fn` ends, as `withLock`.
   */
  withSemaphore<T>(
    name: string,
    permits: number,
    fn: (permit: Permit<Session>) => T | Promise<T>,
    options: WithLockOptions = {},
  ): Promise<T> {
    return withSemaphore(this.#on, name, permits, fn, options);
  }

  /**
   * Runs `fn` holding every lock of `names` at once (`session.lockAll`), and releases them however `fn` ends,
   * as `withLock`.
   */
  withLocks<T>(
    names: readonly string[],
    fn: (locks: MultiLock<Session>) => T | Promise<T>,
    options: WithLockOptions = {},
  ): Promise<T> {
    return withLocks(this.#on, names, fn, options);
  }

  /**
   * Takes over a lock from its `lock.ticket()` ticket, after checking it is still held: the lock moves to a
   * lease of this client's own (see {@link ResumeOptions}), so it outlives the sender's session.
   */
  resumeLock(ticket: LockTicket, options: ResumeOptions = {}): Promise<Lock<Session>> {
    return resumeLock(this, ticket, options, (grant) => new Session(this, grant));
  }
}
