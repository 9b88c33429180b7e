import { RESERVED_PREFIX } from "./keys.js";

/**
 * What an operator leaves for a holding (`operator.revokeLock`, `operator.requestRelease`): one record per holding key,
 * `__etcd-edge/requests/<holding key>`, bound to the holding's own lease (so it goes with the holding's session)
 * and naming the holding by its token, since a mutex reuses its keys. It lives outside every line: Go's
 * `concurrency`, `etcdctl lock` and v3lock order contenders by everything under `<name>/`, and a record there
 * would stand in their line. A holding follows its record as it follows its key; a contender whose predecessor
 * left reads it to tell a revocation from a release (`lockDelay`).
 */

/** Every record's prefix: one stream of a client follows the records of all its holdings. */
export const REQUESTS = `${RESERVED_PREFIX}requests/`;

/** The longest reason accepted, in UTF-16 code units: a reason is a sentence for a log, not a payload. */
export const MAX_REASON = 1_024;

/** What was asked of a holding: to release it itself, or that it be revoked (its key was deleted). */
export type RequestKind = "release" | "revoke";

/** One record, as written and read. */
export interface Request {
  kind: RequestKind;
  /** The create revision of the holding's key: a later holding that reuses the key is not asked. */
  token: number;
  reason: string;
}

/** The record key for a holding's `key`. */
export function requestKey(key: string): string {
  return `${REQUESTS}${key}`;
}

export function encodeRequest(request: Request): string {
  return JSON.stringify(request);
}

/** The record in `value` if it is one for the holding at `token`; undefined for anything else. */
export function requestFor(value: string | undefined, token: number): Request | undefined {
  if (value === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (typeof parsed !== "object" || parsed === null) return undefined;
  const { kind, token: for_, reason } = parsed as Record<string, unknown>;
  if ((kind !== "release" && kind !== "revoke") || for_ !== token || typeof reason !== "string") return undefined;
  return { kind, token, reason };
}
