import { type AnyOp, cmp, type Compare, type OpResults } from "../../api/txn.js";
import type { CallOptions } from "../../gateway/transport.js";
import { Held, type HeldInit } from "../hold/held.js";
import type { LeaseSession } from "../lease/lease-session.js";

/** What a held multi-lock is made of. */
export interface MultiLockInit<S extends LeaseSession = LeaseSession> extends HeldInit<S> {
  names: readonly string[];
  keys: readonly string[];
  revision: number;
}

/**
 * Several locks held at once, taken by `session.lockAll(names)`. All its keys were created in one
 * transaction, so they share one create revision: `revision`, the fencing token of every one of them.
 */
export class MultiLock<S extends LeaseSession = LeaseSession> extends Held<S> {
  /** The lock names, in the order given to `lockAll`. */
  readonly names: readonly string[];
  /** Our key in each lock's line (a mutex's, `<name>/<leaseIdHex>_<16 hex>`), in the order of `names`. */
  readonly keys: readonly string[];
  /** The fencing token: the create revision shared by all its keys. */
  readonly revision: number;

  /** @internal Made by `session.lockAll()`; sends nothing. */
  constructor(state: MultiLockInit<S>) {
    // Its keys are written once, by its join, all at one revision.
    const keys = state.keys.map((key) => ({ key, revision: state.revision, modRevision: state.revision }));
    super(state, { kind: "locks", name: state.names.join(", ") }, keys);
    this.names = Object.freeze([...state.names]);
    this.keys = Object.freeze([...state.keys]);
    this.revision = state.revision;
  }

  /**
   * One compare per lock, "our key is still as our join wrote it": spread them into a fenced transaction,
   * `txn().if(...multi.ifHeld())`, so the write lands only while every one of the locks is still ours.
   */
  ifHeld(): Compare[] {
    return this.keys.map((key) => cmp.modRevision(key, "==", this.revision));
  }

  /**
   * Releases every lock with one request (resent after a lost answer), as `Lock.unlock()`: LOCK_RELEASED if
   * released already; LOCK_LOST if the keys had gone before the release. If the call fails (TIMEOUT,
   * UNAVAILABLE) the release goes on in the background while the session lives; `unlock()` again sends at once.
   */
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
