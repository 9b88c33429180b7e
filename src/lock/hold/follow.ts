import type { KeyValue } from "../../api/codec.js";
import type { LeaseSession } from "../lease/lease-session.js";
import { followKey } from "../line/line-watch.js";
import type { OwnKey } from "./explain.js";

/**
 * How long a holding lasts before it follows its keys on its line's watch. A warm `withLock` is over long before,
 * and pays nothing; a holding that lasts learns of an outside delete, overwrite or revocation within one event,
 * where it would otherwise say `held` until its lease's deadline or its release.
 */
export const FOLLOW_AFTER = 1_000;

/**
 * Follows `keys` of a holding in `session` until the returned function is called, and calls `gone` when one of
 * them may no longer be the holding's: deleted, made again, moved to another lease, or written at another
 * version than the one the holding has (a leader's own proclamation included: the holding's read tells). On the
 * line's watch of the session's client (line-watch.ts), one stream per line for every waiter and holding in it.
 */
export function follow(session: LeaseSession, keys: readonly OwnKey[], gone: () => void): () => void {
  const leaves = keys.map((own) =>
    followKey(session.client, {
      key: own.key,
      seen: (kv) => {
        if (changed(own, session.leaseId, kv)) gone();
      },
    }),
  );
  return () => {
    for (const leave of leaves) leave();
  };
}

/** Whether `kv` (undefined: absent) is no longer the holding's key at the version it holds. */
function changed(own: OwnKey, leaseId: string, kv: KeyValue | undefined): boolean {
  return (
    kv === undefined || kv.createRevision !== own.revision || kv.lease !== leaseId || kv.modRevision !== own.modRevision
  );
}
