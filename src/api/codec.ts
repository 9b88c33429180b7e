import { fromBase64, toText } from "./bytes.js";
import { badField } from "../errors/catalogue.js";
import type { Keyspace } from "./keyspace.js";
import type { WireHeader, WireKeyValue } from "../gateway/wire.js";

/** A decimal string: lease IDs are int64 and routinely exceed 2^53, so they never pass through `number`. */
export type LeaseId = string;

export interface ResponseHeader {
  clusterId: string;
  memberId: string;
  /** The store's revision when the request was served. */
  revision: number;
  raftTerm: number;
}

export interface KeyValue {
  /** The key as UTF-8 text (without the client's namespace). */
  key: string;
  value: string;
  keyBytes: Uint8Array;
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

/** An int64 from the wire as a number, refusing values a double cannot hold exactly. */
export function int(value: string | number | undefined, field = "value"): number {
  if (value === undefined) return 0;
  const number = typeof value === "number" ? value : Number(value);
  if (!Number.isSafeInteger(number)) {
    throw badField(field, value, "is not an integer within Number.MAX_SAFE_INTEGER");
  }
  return number;
}

/** A uint64/int64 identifier kept exactly, as a decimal string. */
export function id(value: string | number | undefined): string {
  return value === undefined ? "0" : String(value);
}

export function decodeHeader(wire: WireHeader): ResponseHeader {
  return {
    clusterId: id(wire?.cluster_id),
    memberId: id(wire?.member_id),
    revision: int(wire?.revision, "revision"),
    raftTerm: int(wire?.raft_term, "raft_term"),
  };
}

export function decodeKeyValue(keyspace: Keyspace, wire: WireKeyValue): KeyValue {
  const keyBytes = keyspace.decode(wire.key);
  const valueBytes = fromBase64(wire.value);
  return {
    key: toText(keyBytes),
    value: toText(valueBytes),
    keyBytes,
    valueBytes,
    createRevision: int(wire.create_revision, "create_revision"),
    modRevision: int(wire.mod_revision, "mod_revision"),
    version: int(wire.version, "version"),
    lease: id(wire.lease),
  };
}

export function decodeKeyValues(keyspace: Keyspace, wire: WireKeyValue[] | undefined): KeyValue[] {
  return wire === undefined ? [] : wire.map((kv) => decodeKeyValue(keyspace, kv));
}
