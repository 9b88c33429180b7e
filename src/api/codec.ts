import { fromBase64, toText } from "./bytes.js";
import { badField } from "../errors/catalogue.js";
import type { Keyspace } from "./keyspace.js";
import type { WireHeader, WireKeyValue } from "../gateway/wire.js";

/** A decimal string: lease IDs are int64 and routinely exceed 2^53, so they never pass through `number`. */
export type LeaseId = string;

/** Which member served a response, and the store's revision at the time: every response carries one. */
export interface ResponseHeader {
  /** The cluster's ID, a decimal uint64 string (too large for `number`). */
  clusterId: string;
  /** The ID of the member that answered, a decimal uint64 string. */
  memberId: string;
  /** The store's revision when the request was served. */
  revision: number;
  /** The member's raft term: it grows with every leader election in the cluster. */
  raftTerm: number;
}

/** A key as etcd stores it, in both forms: text for the common case, bytes for binary keys and values. */
export interface KeyValue {
  /** The key as UTF-8 text (without the client's namespace). */
  key: string;
  /** The value as UTF-8 text; bytes that are not UTF-8 read as U+FFFD, so use `valueBytes` for binary. */
  value: string;
  /** The key's bytes, without the client's namespace. */
  keyBytes: Uint8Array;
  /** The value's bytes, exactly as stored. */
  valueBytes: Uint8Array;
  /** Revision of the last creation of this key. */
  createRevision: number;
  /** Revision of the last modification. */
  modRevision: number;
  /** Number of modifications since creation; 0 means deleted. */
  version: number;
  /** The attached lease, "0" when none. */
  lease: LeaseId;
}

/**
 * int64 on the wire: protojson writes a decimal string; a JSON number is accepted too because the proto3 JSON
 * mapping lets any writer use one (a proxy that re-encodes, another gateway), but only while a double holds
 * it exactly: JSON.parse has already rounded anything past 2^53, so such a number is refused, never used.
 * Hex, exponents, signs, spaces and leading zeros are not protojson and are refused.
 */
const SIGNED = /^-?(?:0|[1-9][0-9]{0,18})$/;
const INT64_MAX = "9223372036854775807";
const UINT64_MAX = "18446744073709551615";

/**
 * Whether `text` is an unsigned decimal as protojson writes one: 1 to 20 digits, no sign, no leading zero.
 * A loop rather than a regular expression: every answer has a dozen of these.
 */
function isUnsigned(text: string): boolean {
  const length = text.length;
  if (length === 0 || length > 20 || (length > 1 && text.charCodeAt(0) === 0x30)) return false;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

/** A count or revision from the wire: a whole number >= 0 that a double holds exactly. */
export function int(value: string | number | undefined, field = "value"): number {
  if (value === undefined) return 0;
  if (typeof value === "string" && !isUnsigned(value)) throw badField(field, value, "is not a decimal integer >= 0");
  const number = typeof value === "number" ? value : Number(value);
  if (!Number.isSafeInteger(number) || number < 0) {
    throw badField(field, value, "is not an integer from 0 to Number.MAX_SAFE_INTEGER");
  }
  return number;
}

/** A signed int64 that a double holds exactly: lease TTLs, which are -1 for a lease that does not exist. */
export function signedInt(value: string | number | undefined, field: string): number {
  if (value === undefined) return 0;
  if (typeof value === "string" && !SIGNED.test(value)) throw badField(field, value, "is not a decimal integer");
  const number = typeof value === "number" ? value : Number(value);
  if (!Number.isSafeInteger(number)) throw badField(field, value, "is not an integer within Number.MAX_SAFE_INTEGER");
  return number;
}

/**
 * An identifier kept exactly, as a decimal string: uint64 (cluster and member IDs) or, with `int64`, a
 * lease ID, which is a positive int64 whose hex names lock keys.
 */
export function id(value: string | number | undefined, field = "ID", int64 = false): string {
  if (value === undefined) return "0";
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value) || value < 0) throw badField(field, value, "is not an exact integer >= 0");
    return String(value);
  }
  const max = int64 ? INT64_MAX : UINT64_MAX;
  if (!isUnsigned(value) || (value.length === max.length && value > max) || value.length > max.length) {
    throw badField(field, value, `is not a decimal ${int64 ? "int64" : "uint64"} >= 0`);
  }
  return value;
}

/** A lease ID from the wire ("0": no lease). */
export function leaseIdOf(value: string | number | undefined, field = "lease"): LeaseId {
  return id(value, field, true);
}

export function decodeHeader(wire: WireHeader): ResponseHeader {
  return {
    clusterId: id(wire?.cluster_id, "cluster_id"),
    memberId: id(wire?.member_id, "member_id"),
    revision: int(wire?.revision, "revision"),
    raftTerm: int(wire?.raft_term, "raft_term"),
  };
}

export function decodeKeyValue(keyspace: Keyspace, wire: WireKeyValue): KeyValue {
  const key = keyspace.decode(wire.key);
  const valueBytes = fromBase64(wire.value, "value");
  return {
    key: key.text,
    value: toText(valueBytes),
    // The caller's own copy: the decoded key is kept for the next answer that shows it.
    keyBytes: key.bytes.slice(),
    valueBytes,
    createRevision: int(wire.create_revision, "create_revision"),
    modRevision: int(wire.mod_revision, "mod_revision"),
    version: int(wire.version, "version"),
    lease: leaseIdOf(wire.lease),
  };
}

export function decodeKeyValues(keyspace: Keyspace, wire: WireKeyValue[] | undefined): KeyValue[] {
  return wire === undefined ? [] : wire.map((kv) => decodeKeyValue(keyspace, kv));
}
