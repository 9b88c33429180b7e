import type { CallOptions } from "./gateway/transport.js";
import { EtcdClient } from "./api/client.js";
import { inspectLock, type LockInfo } from "./lock/inspect.js";
import type { Lock, LockTicket } from "./lock/lock.js";
import { resumeLock } from "./lock/resume.js";
import type { KeepAliveMode, SessionOptions } from "./lock/lease-session.js";
import { Session } from "./lock/session.js";
import { SharedLeases } from "./lock/shared-lease.js";
import { withLock, type WithLockOptions } from "./lock/with-lock.js";

/**
 * The front door: the core client ({@link EtcdClient}: KV, txn, lease, watch) plus sessions and locks.
 * Creating one sends nothing.
 */
export class Etcd extends EtcdClient {
  /** The leases one-shot locks share; empty until the first `withLock`. */
  readonly #shared = new SharedLeases(this);

  /** A lease-backed session for locks and elections (one request). See {@link SessionOptions}. */
  session(options: SessionOptions = {}): Promise<Session> {
    return Session.create(this, options);
  }

  /** Runs `fn` holding lock `name`: session, lock, `fn`, release and revoke, all in `finally`. */
  withLock<T>(name: string, fn: (lock: Lock<Session>) => T | Promise<T>, options: WithLockOptions = {}): Promise<T> {
    return withLock(this, this.#shared, name, fn, options);
  }

  /**
   * Revokes the lease this client keeps for `withLock` (see {@link WithLockOptions.lease}), if any. The
   * client stays usable; a later `withLock` grants a new one.
   */
  close(): Promise<void> {
    return this.#shared.close();
  }

  /** For `await using`: {@link Etcd.close}. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** Who holds lock `name` (key, fencing token, lease TTL left) and how many wait, without joining the line. */
  inspectLock(name: string, options: CallOptions = {}): Promise<LockInfo> {
    return inspectLock(this, name, options);
  }

  /** Takes over a lock from its `lock.toJSON()` ticket, after checking it is still held. */
  resumeLock(ticket: LockTicket, options: CallOptions & { keepAlive?: KeepAliveMode | undefined } = {}): Promise<Lock<Session>> {
    return resumeLock(this, ticket, options);
  }
}
