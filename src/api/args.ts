import { describe, invalidArgument } from "../errors/catalogue.js";
import { wholeArg } from "../gateway/config.js";
import type { LeaseId } from "./codec.js";

const INT64_MAX = 9223372036854775807n;

/** A lease ID from the caller: a decimal string or a bigint in int64 range, kept as a decimal string. */
export function leaseIdArg(value: unknown, name = "lease"): LeaseId {
  if (typeof value === "bigint") {
    if (value < 0n || value > INT64_MAX) throw invalidArgument(`${name} ${value} is outside the int64 range`);
    return value.toString();
  }
  if (typeof value === "string") {
    // Canonical (no leading zero) and plainly below 2^63, as a granted ID nearly always is: sent as it is.
    if (/^(?:[1-9][0-9]{0,17}|[1-8][0-9]{18}|0)$/.test(value)) return value;
    if (/^[0-9]{1,19}$/.test(value) && BigInt(value) <= INT64_MAX) return BigInt(value).toString();
  }
  throw invalidArgument(
    `${name} must be a lease ID as a decimal string (as returned by lease.grant), got ${describe(value)}`,
  );
}

/**
 * A lease to act on (renew, revoke, look up, grant under a chosen ID): any lease ID but 0, which etcd reads
 * as "no lease". Sent, it would be answered with a lease-less body (BAD_RESPONSE), a random new ID (a grant)
 * or LEASE_NOT_FOUND, none of which says the argument was wrong.
 */
export function leaseToUse(value: unknown, name = "lease"): LeaseId {
  const id = leaseIdArg(value, name);
  if (id === "0") {
    throw invalidArgument(`${name} 0 is no lease (etcd reads ID 0 as "none"): pass the ID lease.grant returned`);
  }
  return id;
}

/** etcd's largest lease TTL in seconds (`lease.MaxLeaseTTL`); the server refuses a grant above it. */
export const MAX_LEASE_TTL = 9_000_000_000;

/**
 * A lease TTL in seconds, within what etcd grants: 1 to {@link MAX_LEASE_TTL}. (etcd raises anything below
 * its minimum, about 2 s, silently.)
 */
export function ttlArg(value: unknown, name = "ttl"): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1 || value > MAX_LEASE_TTL) {
    throw invalidArgument(
      `${name} must be a whole number of seconds from 1 to ${MAX_LEASE_TTL}, got ${describe(value)}`,
    );
  }
  return value;
}

/** A revision, count or limit: a whole number >= 0 that a double holds exactly. */
export function countArg(value: unknown, name: string): number {
  return wholeArg(value, name, 0);
}

export function optionalCount(value: unknown, name: string): number | undefined {
  return value === undefined ? undefined : countArg(value, name);
}

/** int64 fields go out as strings, and zero values are left out, as protojson does. */
export function int64Field(value: number | undefined): string | undefined {
  return value === undefined || value === 0 ? undefined : String(value);
}
