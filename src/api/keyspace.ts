import {
  type Bytes,
  concatBytes,
  fromBase64,
  isZeroByte,
  prefixEnd,
  startsWith,
  toBase64,
  toBytes,
  toText,
  ZERO_BYTE,
} from "./bytes.js";
import { invalidArgument } from "../errors/catalogue.js";

/**
 * Which keys an operation touches: one key, a half-open range [key, end), or every key under a prefix.
 * `end: "\0"` means every key from `key` on; `prefix: ""` means every key. The forms do not mix: `{ key,
 * prefix }` or `{ prefix, end }` is refused (in types, and at run time as INVALID_ARGUMENT), since either
 * reading would surprise someone (a delete of one key that took the whole prefix).
 */
export type KeyRange =
  | {
      /** The first key of the range (the only one without `end`). */
      key: Bytes;
      /** The first key after the range; `"\0"` for "every key from `key` on". */
      end?: Bytes | undefined;
      /** Not with `key`: a range is one form or the other. */
      prefix?: never;
    }
  | {
      /** Every key that starts with these bytes; `""` for every key. */
      prefix: Bytes;
      /** Not with `prefix`. */
      key?: never;
      /** Not with `prefix`. */
      end?: never;
    };

export interface WireRange {
  key: string;
  range_end?: string;
}

/**
 * Maps the caller's keys into the client's namespace and back. All key encoding goes through here, so a
 * namespace applies to KV, txn compares, watch and locks alike.
 */
export class Keyspace {
  /**
   * Text keys and prefixes encoded lately: a lock's key and prefix go out in every request it sends, and
   * UTF-8 plus base64 cost more than the rest of building the request. Bounded: cleared when full.
   */
  readonly #keys = new Map<string, string>();
  readonly #prefixes = new Map<string, WireRange>();
  /**
   * Keys received lately, decoded: a lock's line shows the same few keys in every answer, and checking and
   * decoding base64 and UTF-8 cost more than the rest of reading a key-value. Short keys only; bounded.
   */
  readonly #received = new Map<string, ReceivedKey>();

  constructor(readonly namespace: Uint8Array) {}

  /** A single key, which etcd requires to be non-empty. */
  key(key: Bytes, what = "key"): Uint8Array {
    const bytes = toBytes(key);
    if (bytes.length === 0) throw invalidArgument(`${what} must not be empty`);
    return concatBytes(this.namespace, bytes);
  }

  encodeKey(key: Bytes, what?: string): string {
    if (typeof key !== "string") return toBase64(this.key(key, what));
    let encoded = this.#keys.get(key);
    if (encoded === undefined) remember(this.#keys, key, (encoded = toBase64(this.key(key, what))));
    return encoded;
  }

  range(target: Bytes | KeyRange): WireRange {
    if (typeof target === "string" || target instanceof Uint8Array) return { key: this.encodeKey(target) };
    if (typeof target !== "object" || target === null) {
      throw invalidArgument("expected a key, { key, end? } or { prefix }");
    }
    // An option given as undefined is an option not given, as everywhere else in the API.
    const { key: start, end: rangeEnd, prefix: under } = target as { key?: Bytes; end?: Bytes; prefix?: Bytes };
    if (under !== undefined) {
      if (start !== undefined || rangeEnd !== undefined) {
        throw invalidArgument(
          "a range is { key, end? } or { prefix }, not both: `prefix` cannot be given with `key` or `end`",
        );
      }
      const cached = typeof under === "string" ? this.#prefixes.get(under) : undefined;
      if (cached !== undefined) return cached;
      const prefix = concatBytes(this.namespace, toBytes(under));
      const range = Object.freeze(
        prefix.length === 0
          ? { key: toBase64(ZERO_BYTE), range_end: toBase64(ZERO_BYTE) }
          : { key: toBase64(prefix), range_end: toBase64(prefixEnd(prefix)) },
      );
      if (typeof under === "string") remember(this.#prefixes, under, range);
      return range;
    }
    if (start === undefined) throw invalidArgument("expected a key, { key, end? } or { prefix }");
    const key = toBase64(this.key(start));
    if (rangeEnd === undefined) return { key };
    const end = toBytes(rangeEnd);
    if (isZeroByte(end)) {
      // "Every key from here on" stops at the namespace's end, not the keyspace's.
      return { key, range_end: toBase64(this.namespace.length === 0 ? ZERO_BYTE : prefixEnd(this.namespace)) };
    }
    return { key, range_end: toBase64(concatBytes(this.namespace, end)) };
  }

  /**
   * A key as received, with the namespace removed, as bytes and as text. The bytes may be shared with
   * other answers: copy them before handing them to a caller.
   */
  decode(base64: string | undefined): ReceivedKey {
    const cacheable = base64 !== undefined && base64.length <= MAX_REMEMBERED_KEY;
    let key = cacheable ? this.#received.get(base64) : undefined;
    if (key === undefined) {
      const all = fromBase64(base64, "key");
      const bytes =
        this.namespace.length > 0 && startsWith(all, this.namespace) ? all.subarray(this.namespace.length) : all;
      key = { bytes, text: toText(bytes) };
      if (cacheable) remember(this.#received, base64, key);
    }
    return key;
  }

  /**
   * A key as received from a call that is not confined to the namespace (a lease's keys): undefined when it
   * lies outside, else the key with the namespace removed, as Go's namespace wrapper filters them.
   */
  decodeOwn(base64: string | undefined): Uint8Array | undefined {
    const bytes = fromBase64(base64, "key");
    if (this.namespace.length === 0) return bytes;
    return startsWith(bytes, this.namespace) ? bytes.subarray(this.namespace.length) : undefined;
  }
}

/** A key received, decoded. */
export interface ReceivedKey {
  readonly bytes: Uint8Array;
  readonly text: string;
}

const REMEMBERED = 256;
/** The longest base64 key remembered (192 bytes decoded): lock and election keys are far shorter. */
const MAX_REMEMBERED_KEY = 256;

function remember<V>(cache: Map<string, V>, text: string, value: V): void {
  if (cache.size >= REMEMBERED) cache.clear();
  cache.set(text, value);
}
