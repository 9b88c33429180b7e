import { wellFormedText } from "../../api/bytes.js";
import { randomBytes } from "../../api/random.js";
import { describe, invalidArgument } from "../../errors/catalogue.js";

/**
 * What the keys in a line look like. Every contender puts one key under `<name>/`: a mutex, an election and
 * `lockAll` use `<name>/<leaseIdHex>`, as Go's `concurrency` package, `etcdctl lock` and the server's v3lock
 * do, so they exclude one another; semaphores and read-write locks add a random part per acquisition.
 */

/**
 * A lock, semaphore, election or read-write lock name, checked before anything is sent: a non-empty,
 * well-formed string. `what` names it in the error: "a lock", "an election".
 */
export function nameArg(name: unknown, what: string): string {
  if (typeof name !== "string" || name.length === 0) {
    throw invalidArgument(`${what} name must be a non-empty string, got ${describe(name)}`);
  }
  return wellFormedText(name);
}

/** A lease ID (decimal) in lowercase hex, as Go's `concurrency` package names a contender's key. */
export function leaseHex(leaseId: string): string {
  return BigInt(leaseId).toString(16);
}

/**
 * A key of its own for one acquisition: `<prefix><leaseHex>-<16 random hex digits>`. The mutex has one key
 * per session and name, so a session's callers take turns for it; semaphores and read-write locks give each
 * acquisition its own key instead, so callers of one session can hold several permits, or read together.
 * The lease stays in the key for whoever inspects the line; the random part keeps two processes sharing a
 * lease from taking each other's key. A join with it is still create-if-absent, so it is safe to resend.
 */
export function uniqueKey(prefix: string, leaseHex: string): string {
  return `${prefix}${leaseHex}-${randomHex(8)}`;
}

/** `bytes` fresh random bytes as lowercase hex (see `randomBytes`). */
export function randomHex(bytes: number): string {
  const random = randomBytes(bytes);
  let hex = "";
  for (const byte of random) hex += byte.toString(16).padStart(2, "0");
  return hex;
}
