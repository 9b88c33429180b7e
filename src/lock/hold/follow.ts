import type { KeyValue } from "../../api/codec.js";
import type { LeaseSession } from "../lease/lease-session.js";
import { followKey } from "../line/line-watch.js";
import { REQUESTS, type Request, requestFor, requestKey } from "../line/requests.js";
import type { OwnKey } from "./explain.js";

/**
 * How long a holding lasts before it follows its keys on its line's watch. A warm `withLock` is over long before,
 * and pays nothing; a holding that lasts learns of an outside delete, overwrite or revocation within one event,
 * where it would otherwise say `held` until its lease's deadline or its release.
 */
export const FOLLOW_AFTER = 1_000;

/** What following tells a holding. */
export interface Followed {
  /** One of its keys may no longer be the holding's. */
  gone(): void;
  /**
   * An operator left a record for it (line/requests.ts): a request to release it, or the reason it was revoked;
   * `record` is the record's key and version.
   */
  asked(request: Request, record: KeyValue): void;
}

/**
 * Follows `keys` of a holding in `session` until the returned function is called: `gone` when one of them may no
 * longer be the holding's (deleted, made again, moved to another lease, or written at another version than the
 * one the holding has: a leader's own proclamation included, the holding's read tells), `asked` when a record for
 * it appears. On line watches of the session's client (line-watch.ts): one stream per line for every waiter and
 * holding in it, and one for the records of all its holdings.
 */
export function follow(session: LeaseSession, keys: readonly OwnKey[], on: Followed): () => void {
  const client = session.client;
  const leaves = keys.flatMap((own) => [
    followKey(client, {
      key: own.key,
      seen: (kv) => {
        if (changed(own, kv)) on.gone();
      },
    }),
    // Refused by RBAC (no read on the records' prefix): the holding then learns of a request from nobody.
    followKey(client, {
      key: requestKey(own.key),
      line: REQUESTS,
      seen: (kv) => {
        const request = requestFor(kv?.value, own.revision);
        if (request !== undefined) on.asked(request, kv!);
      },
    }),
  ]);
  return () => {
    for (const leave of leaves) leave();
  };
}

/**
 * Whether `kv` (undefined: absent) is no longer the holding's key at the version it holds: the test its release's
 * guard makes. Any write to the key (made again, moved to another lease, rewritten) moves its mod revision.
 */
function changed(own: OwnKey, kv: KeyValue | undefined): boolean {
  return kv === undefined || kv.modRevision !== own.modRevision;
}
