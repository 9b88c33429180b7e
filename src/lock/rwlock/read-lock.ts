import type { CallOptions } from "../../gateway/transport.js";
import { HeldKey, type HeldKeyInit } from "../hold/held-key.js";
import type { LeaseSession } from "../session/lease-session.js";

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
}
