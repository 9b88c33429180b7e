import type { EtcdClient } from "../api/client.js";
import { Election } from "./election/election.js";
import type { LockOptions } from "./acquire/acquisition.js";
import { lockAll } from "./lock-all/lock-all.js";
import type { MultiLock } from "./lock-all/multi-lock.js";
import { Mutex } from "./mutex/mutex.js";
import { RWLock } from "./rwlock/rwlock.js";
import { Semaphore, type SemaphoreOptions } from "./semaphore/semaphore.js";
import { openLease, type SessionOptions } from "./lease/lease-grant.js";
import { LeaseSession } from "./lease/lease-session.js";

/** How many names' mutexes a session keeps: a session may lock any number of names. */
const MUTEXES_KEPT = 128;

/**
 * A {@link LeaseSession} with factories for what is built on it, as Go's `concurrency.NewMutex(session,
 * name)`: `new Mutex(session, name)` works as well.
 */
export class Session extends LeaseSession {
  /**
   * The mutexes of the names locked lately, each with what its joins found, its join's requests and its released
   * keys (JoinHistory, keys.ts), kept for `mutex(name)` before each lock (every warm `withLock`); the one used
   * least lately goes past the bound.
   */
  readonly #mutexes = new Map<string, Mutex<this>>();

  /** @internal Use `etcd.session()`: grants (or adopts) the lease, then starts the session's timers. */
  static async create(client: EtcdClient, options: SessionOptions = {}): Promise<Session> {
    return new Session(client, await openLease(client, options)).start();
  }

  /** The mutex named `name`, whose acquisitions' keys are bound to this session's lease (the same one each time). */
  mutex(name: string): Mutex<this> {
    const mutexes = this.#mutexes;
    let mutex = mutexes.get(name);
    if (mutex === undefined) {
      mutex = new Mutex(this, name);
      if (mutexes.size >= MUTEXES_KEPT) mutexes.delete(mutexes.keys().next().value!);
    } else {
      // Used again: last to go.
      mutexes.delete(name);
    }
    mutexes.set(name, mutex);
    return mutex;
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
   * `lockAll` calls never deadlock; each name excludes plain `mutex(name)` users. Resolves when
   * first in every line. `options` as for `mutex.lock()`: `timeout: 0` throws LOCKED instead of waiting.
   */
  lockAll(names: readonly string[], options: LockOptions = {}): Promise<MultiLock<this>> {
    return lockAll(this, names, options);
  }
}
