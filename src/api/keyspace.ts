import {
  type Bytes,
  concatBytes,
  fromBase64,
  isZeroByte,
  prefixEnd,
  startsWith,
  toBase64,
  toBytes,
  ZERO_BYTE,
} from "./bytes.js";
import { invalidArgument } from "../errors/catalogue.js";

/**
 * Which keys an operation touches: one key, a half-open range [key, end), or every key under a prefix.
 * `end: "\0"` means every key from `key` on; `prefix: ""` means every key.
 */
export type KeyRange = { key: Bytes; end?: Bytes | undefined } | { prefix: Bytes };

export interface WireRange {
  key: string;
  range_end?: string;
}

/**
 * Maps the caller's keys into the client's namespace and back. All key encoding goes through here, so a
 * namespace applies to KV, txn compares, watch and locks alike.
 */
export class Keyspace {
  constructor(readonly namespace: Uint8Array) {}

  /** A single key, which etcd requires to be non-empty. */
  key(key: Bytes, what = "key"): Uint8Array {
    const bytes = toBytes(key);
    if (bytes.length === 0) throw invalidArgument(`${what} must not be empty`);
    return concatBytes(this.namespace, bytes);
  }

  encodeKey(key: Bytes, what?: string): string {
    return toBase64(this.key(key, what));
  }

  range(target: Bytes | KeyRange): WireRange {
    if (typeof target === "string" || target instanceof Uint8Array) return { key: this.encodeKey(target) };
    if (typeof target !== "object" || target === null) {
      throw invalidArgument("expected a key, { key, end? } or { prefix }");
    }
    if ("prefix" in target) {
      const prefix = concatBytes(this.namespace, toBytes(target.prefix));
      if (prefix.length === 0) return { key: toBase64(ZERO_BYTE), range_end: toBase64(ZERO_BYTE) };
      return { key: toBase64(prefix), range_end: toBase64(prefixEnd(prefix)) };
    }
    if (!("key" in target)) throw invalidArgument("expected a key, { key, end? } or { prefix }");
    const key = toBase64(this.key(target.key));
    if (target.end === undefined) return { key };
    const end = toBytes(target.end);
    if (isZeroByte(end)) {
      // "Every key from here on" stops at the namespace's end, not the keyspace's.
      return { key, range_end: toBase64(this.namespace.length === 0 ? ZERO_BYTE : prefixEnd(this.namespace)) };
    }
    return { key, range_end: toBase64(concatBytes(this.namespace, end)) };
  }

  /** A key as received, with the namespace removed. */
  decode(base64: string | undefined): Uint8Array {
    const bytes = fromBase64(base64);
    return this.namespace.length > 0 && startsWith(bytes, this.namespace) ? bytes.subarray(this.namespace.length) : bytes;
  }
}
