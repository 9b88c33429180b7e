import type { AnyOp, OpResults } from "../../api/txn.js";
import type { CallOptions } from "../../gateway/transport.js";
import { HeldKey, type HeldKeyInit } from "../hold/held.js";
import type { LeaseSession } from "../lease/lease-session.js";
import type { LockTicket } from "./ticket.js";

export type { LockTicket } from "./ticket.js";

/** What a held lock is made of. */
export interface LockInit<S extends LeaseSession = LeaseSession> extends HeldKeyInit<S> {
  /** The key's mod revision when this handle got it: the handle's own version of the key. */
  modRevision: number;
  /** The key's value: a random secret, the proof of holding a ticket carries. */
  secret: string;
}

/**
 * A held lock. `revision` (the key's create revision) is the fencing token: it strictly increases across
 * successive holders, so storage guarded by `ifHeld()` refuses a stale holder's write.
 */
export class Lock<S extends LeaseSession = LeaseSession> extends HeldKey<S> {
  readonly #secret: string;

  /** @internal Made by `mutex.lock()` and `etcd.resumeLock()`: a resumed lock holds the version its takeover wrote. */
  constructor(init: LockInit<S>) {
    super(init, { kind: "lock", name: init.name }, init.modRevision);
    this.#secret = init.secret;
  }

  /**
   * Releases the lock with one request (resent after a lost answer). LOCK_RELEASED if released already; LOCK_LOST,
   * with the reason, if its key had gone or changed (lease ended, deleted or overwritten, taken over with a ticket).
   * A call that fails unanswered (TIMEOUT, UNAVAILABLE) goes on in the background while the session lives;
   * `unlock()` again sends at once, or reports how the background release ended.
   */
  unlock(options: CallOptions = {}): Promise<void> {
    return this.releaseHeld(options);
  }

  /**
   * Releases it in the same transaction as `ops`, which run only while this handle holds it (its fencing compare):
   * resolves with their results. LOCK_LOST (nothing written or deleted) if it was lost; LOCK_RELEASED if released.
   * Sent once: a lost answer rejects `indeterminate` (the writes may have landed), the release going on.
   */
  unlockWith<Ops extends AnyOp[]>(ops: [...Ops], options: CallOptions = {}): Promise<OpResults<Ops>> {
    return this.releaseHeldWith(ops, options);
  }

  /**
   * The ticket `etcd.resumeLock()` takes to continue this lock elsewhere, once. It carries the lock's secret: a
   * credential. Stop using this handle once it is sent (after the takeover its fenced writes and `unlock()` fail).
   */
  ticket(): LockTicket {
    this.ticketed();
    const { name, key, leaseId, revision } = this;
    return { name, key, leaseId, revision, secret: this.#secret, ttl: this.session.ttl };
  }

  /** What `JSON.stringify(lock)` shows: the lock without its secret (logs must not carry a credential). */
  toJSON(): Omit<LockTicket, "secret" | "ttl"> {
    const { name, key, leaseId, revision } = this;
    return { name, key, leaseId, revision };
  }
}
