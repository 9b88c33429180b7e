import type { Bytes } from "../../api/bytes.js";
import type { CallOptions } from "../../gateway/transport.js";
import { HeldKey, type HeldKeyInit } from "../hold/held.js";
import type { LeaseSession } from "../lease/lease-session.js";

/**
 * An election's leadership, held as any lock is: its key is the leader key, its create revision the fencing
 * token. Internal: `Election` shows it as `isLeader`, `revision`, `ifLeader()` and `resign()`.
 */
export class Leadership<S extends LeaseSession = LeaseSession> extends HeldKey<S> {
  /** @internal Made by `election.campaign()`. */
  constructor(init: HeldKeyInit<S>) {
    super(init, { kind: "leadership", name: init.name });
  }

  /** Writes a new proclamation to the leader key while it is still ours; false when it was not. */
  proclaim(value: Bytes, options: CallOptions): Promise<boolean> {
    return this.rewrite(value, options);
  }

  /** Deletes the leader key (one request, resent after a lost answer). */
  resign(options: CallOptions = {}): Promise<void> {
    return this.releaseHeld(options);
  }
}
