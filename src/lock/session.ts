import type { EtcdClient } from "../api/client.js";
import { Election } from "./election.js";
import { LeaseSession, openLease, type SessionOptions } from "./lease-session.js";
import { lockAll } from "./lock-all.js";
import type { MultiLock } from "./multi-lock.js";
import { Mutex } from "./mutex.js";
import type { LockOptions } from "./queue.js";
import { RWLock } from "./rwlock.js";
import { Semaphore, type SemaphoreOptions } from "./semaphore.js";

/**
 * A {@link LeaseSession} with factories for what is built on it: `session.mutex(name)` is
 * `new Mutex(session, name)`, as Go's `concurrency.NewMutex(session, name)`.
 */
export class Session extends LeaseSession {
  /** @internal Use `etcd.session()`: grants (or adopts) the lease, then starts the session's timers. */
  static async create(client: EtcdClient, options: SessionOptions = {}): Promise<Session> {
    return new Session(client, await openLease(client, options)).start();
  }

  /** A mutex named `name` whose key is bound to this session's lease. */
  mutex(name: string): Mutex<this> {
    return new Mutex(this, name);
  }

  /** A leader election named `name`, campaigning with this session's lease. */
  election(name: string): Election<this> {
    return new Election(this, name);
  }

  /**
   * A counting semaphore named `name`: at most `permits` holders at once, FIFO. Every contender on the name
   * must use the same `permits` (else PERMITS_MISMATCH). Sends nothing.
   */
  semaphore(name: string, options: SemaphoreOptions): Semaphore<this> {
    return new Semaphore(this, name, options);
  }

  /** A read-write lock named `name`: readers share it, a writer excludes everyone, FIFO. Sends nothing. */
  rwlock(name: string): RWLock<this> {
    return new RWLock(this, name);
  }

  /**
   * Takes every lock of `names` at once, joining all their lines in one transaction, so overlapping
   * `lockAll` calls never deadlock; each name is shared with plain `mutex(name)` users. Resolves when
   * first in every line. `options` as for `mutex.lock()`: `timeout: 0` throws LOCKED instead of waiting.
   */
  lockAll(names: readonly string[], options: LockOptions = {}): Promise<MultiLock<this>> {
    return lockAll(this, names, options);
  }
}
