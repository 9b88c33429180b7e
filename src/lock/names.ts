import { wellFormedText } from "../api/bytes.js";
import { describe, invalidArgument } from "../errors/catalogue.js";

/**
 * A lock, semaphore, election or read-write lock name, checked before anything is sent: a non-empty,
 * well-formed string. `what` names it in the error: "a lock", "an election".
 */
export function nameArg(name: unknown, what: string): string {
  if (typeof name !== "string" || name.length === 0)
    throw invalidArgument(`${what} name must be a non-empty string, got ${describe(name)}`);
  return wellFormedText(name);
}

/** The last lease ID turned into hex, and its hex: a line's keys nearly always name the same few leases. */
let lastLeaseId = "";
let lastLeaseHex = "";

/**
 * A lease ID (decimal) in lowercase hex, as Go's `concurrency` package names a contender's key
 * `<name>/<leaseIdHex>`. The one conversion is remembered: every join checks the keys it saw this way.
 */
export function leaseHex(leaseId: string): string {
  if (leaseId !== lastLeaseId) {
    lastLeaseHex = BigInt(leaseId).toString(16);
    lastLeaseId = leaseId;
  }
  return lastLeaseHex;
}
