import type { AnyOp, OpResults } from "../../api/txn.js";
import type { CallOptions } from "../../gateway/transport.js";
import { HeldKey, type HeldKeyInit } from "../hold/held.js";
import type { LeaseSession } from "../lease/lease-session.js";

/**
 * A held read lock: shared with other readers, excluding writers. `revision` is its fencing token and
 * `ifHeld()` fails once it is lost, as for a mutex; a writer after it always has a higher token.
 */
export class ReadLock<S extends LeaseSession = LeaseSession> extends HeldKey<S> {
  /** @internal Made by `rwlock.readLock()`. */
  constructor(state: HeldKeyInit<S>) {
    super(state, { kind: "read", name: state.name });
  }

  /** Releases it with one request, as `Lock.unlock()`: LOCK_RELEASED if released already, LOCK_LOST if lost. */
  unlock(options: CallOptions = {}): Promise<void> {
    return this.releaseHeld(options);
  }

  /**
   * Releases it in the same transaction as `ops`, which run only while this handle still holds it (its fencing
   * compare): "work, write, release" costs two round trips instead of three. Resolves with the results of
   * `ops`; it is released then. LOCK_LOST, with the reason, if it was lost: nothing is written and nothing
   * deleted. LOCK_RELEASED if released already. Sent once: a lost answer rejects with the error marked
   * `indeterminate` (the writes may have landed) and the release goes on in the background.
   */
  unlockWith<Ops extends AnyOp[]>(ops: [...Ops], options: CallOptions = {}): Promise<OpResults<Ops>> {
    return this.releaseHeldWith(ops, options);
  }
}
