import type { CallOptions } from "../../gateway/transport.js";
import { HeldKey, type HeldKeyInit } from "../hold/held-key.js";
import type { LeaseSession } from "../session/lease-session.js";

/**
 * A held write lock: excludes readers and writers. `revision` is its fencing token, higher than every
 * holder's before it, and `ifHeld()` fails once it is lost.
 */
export class WriteLock<S extends LeaseSession = LeaseSession> extends HeldKey<S> {
  /** @internal Made by `rwlock.writeLock()`. */
  constructor(state: HeldKeyInit<S>) {
    super(state, { kind: "write", name: state.name });
  }

  /** Releases it with one request, as `Lock.unlock()`: LOCK_RELEASED if released already, LOCK_LOST if lost. */
  unlock(options: CallOptions = {}): Promise<void> {
    return this.releaseHeld(options);
  }
}
