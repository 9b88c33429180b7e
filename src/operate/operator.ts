import { Etcd } from "../etcd.js";
import type { CallOptions } from "../gateway/transport.js";
import { inspectLock, inspectSemaphore, type LockInfo, type SemaphoreInfo } from "../lock/operate/inspect.js";
import { requestRelease, type RevokeOptions, type Revoked, revokeLock } from "../lock/operate/revoke.js";

/**
 * The `Etcd` front door with an operator's calls: use it where locks are watched over and taken away (an admin
 * endpoint, a script, `npx etcd-edge`); it takes locks as `Etcd` does. Creating one sends nothing.
 */
export class EtcdOperator extends Etcd {
  /** Who holds lock `name` (key, fencing token, lease TTL left) and who waits, in order, without joining the line. */
  inspectLock(name: string, options: CallOptions = {}): Promise<LockInfo> {
    return inspectLock(this, name, options);
  }

  /** Who holds a permit of semaphore `name` and who waits, in order, and the permits they agree on, without joining. */
  inspectSemaphore(name: string, options: CallOptions = {}): Promise<SemaphoreInfo> {
    return inspectSemaphore(this, name, options);
  }

  /**
   * Ends the holding of lock `name` (a mutex's, an election's leader, a semaphore's oldest permit or a read-write
   * lock's writer or oldest reader; `options.key` picks one of several holders): deletes its key, guarded by its
   * fencing token, so its fenced writes are refused from then on, and tells its holder why (LOCK_LOST with
   * `options.reason`). Resolves with what it revoked, or undefined when nothing held it. See {@link RevokeOptions}.
   */
  revokeLock(name: string, options: RevokeOptions = {}): Promise<Revoked | undefined> {
    return revokeLock(this, name, options);
  }

  /**
   * Asks the holder of lock `name` (as {@link EtcdOperator.revokeLock} picks it) to release it: its
   * `releaseRequested` signal aborts with `options.reason`, and nothing else changes. Resolves with the holding
   * asked, or undefined.
   */
  requestRelease(name: string, options: RevokeOptions = {}): Promise<Revoked | undefined> {
    return requestRelease(this, name, options);
  }
}
