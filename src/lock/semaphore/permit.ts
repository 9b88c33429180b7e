import type { AnyOp, OpResults } from "../../api/txn.js";
import type { CallOptions } from "../../gateway/transport.js";
import { HeldKey, type HeldKeyInit } from "../hold/held.js";
import type { LeaseSession } from "../lease/lease-session.js";

/**
 * A permit of a semaphore. `revision` (its key's create revision) is its fencing token: distinct for every
 * permit and increasing in the order permits are granted. Several permits are held at once, so a store
 * outside etcd cannot fence with "newest token wins"; `ifHeld()` in an etcd transaction fences exactly.
 */
export class Permit<S extends LeaseSession = LeaseSession> extends HeldKey<S> {
  /** @internal Made by `semaphore.acquire()`; sends nothing. */
  constructor(state: HeldKeyInit<S>) {
    super(state, { kind: "permit", name: state.name });
  }

  /**
   * Gives the permit back with one request (resent after a lost answer), admitting the next waiter.
   * LOCK_RELEASED if released already; LOCK_LOST if its key had gone before (the lease expired under the
   * work). If the call fails (TIMEOUT, UNAVAILABLE) the release goes on in the background while the session
   * lives; `release()` again sends at once.
   */
  release(options: CallOptions = {}): Promise<void> {
    return this.releaseHeld(options);
  }

  /**
   * Releases it in the same transaction as `ops`, which run only while this handle still holds it (its fencing
   * compare): "work, write, release" costs two round trips instead of three. Resolves with the results of
   * `ops`; it is released then. LOCK_LOST, with the reason, if it was lost: nothing is written and nothing
   * deleted. LOCK_RELEASED if released already. Sent once: a lost answer rejects with the error marked
   * `indeterminate` (the writes may have landed) and the release goes on in the background.
   */
  releaseWith<Ops extends AnyOp[]>(ops: [...Ops], options: CallOptions = {}): Promise<OpResults<Ops>> {
    return this.releaseHeldWith(ops, options);
  }
}
