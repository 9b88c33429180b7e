import type { LeaseId } from "../api/codec.js";
import type { CallOptions } from "../gateway/transport.js";
import { HeldKey, type HeldKeyState } from "./held.js";
import type { LeaseSession } from "./lease-session.js";

/** What another process or invocation needs to take over a held lock: small and JSON-serialisable. */
export interface LockTicket {
  name: string;
  key: string;
  leaseId: LeaseId;
  revision: number;
}

/** What a held lock is made of. */
export type LockState<S extends LeaseSession = LeaseSession> = HeldKeyState<S>;

/**
 * A held lock. `revision` (the key's create revision) is the fencing token: it strictly increases across
 * successive holders, so storage guarded by `ifHeld()` refuses a stale holder's write.
 */
export class Lock<S extends LeaseSession = LeaseSession> extends HeldKey<S> {
  /** Made by `mutex.lock()` and `etcd.resumeLock()`; subscribes to nothing until `signal` is read. */
  constructor(state: LockState<S>) {
    super(state, { kind: "lock", name: state.name });
  }

  /**
   * Releases the lock with one request (resent after a lost answer). LOCK_RELEASED if it was released
   * already; LOCK_LOST if the key had gone before the release (the lease expired under the work, which was
   * then not protected to its end). If the call fails (TIMEOUT, UNAVAILABLE), the lock may still be held:
   * call `unlock()` again; it removes the key.
   */
  unlock(options: CallOptions = {}): Promise<void> {
    return this.releaseHeld(options);
  }

  /** The ticket `etcd.resumeLock()` takes to continue this lock elsewhere. */
  toJSON(): LockTicket {
    return { name: this.name, key: this.key, leaseId: this.leaseId, revision: this.revision };
  }
}
