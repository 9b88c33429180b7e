import { badField, describe, invalidArgument } from "../errors/catalogue.js";

/** A key or value as the caller gives it: text (encoded as UTF-8) or raw bytes. */
export type Bytes = string | Uint8Array;

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const EMPTY = new Uint8Array(0);
/** etcd's marker for "no upper bound" in range_end: every key >= key. */
export const ZERO_BYTE = new Uint8Array([0]);

/** A lone surrogate: UTF-8 cannot encode it, so TextEncoder would silently turn it into U+FFFD. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * `text` unchanged if it is well-formed UTF-16. Otherwise "x\uD800" and "x\uDFFF" would both become
 * "x\uFFFD" on the wire: one key (one lock) for two names. One search is the check and finds the index the
 * message gives.
 */
export function wellFormedText(text: string): string {
  const at = text.search(LONE_SURROGATE);
  if (at >= 0) {
    throw invalidArgument(
      `a string with a lone surrogate (at index ${at}) is not well-formed UTF-16 and cannot be sent`,
    );
  }
  return text;
}

export function toBytes(input: Bytes): Uint8Array {
  if (typeof input === "string") return input.length === 0 ? EMPTY : encoder.encode(wellFormedText(input));
  if (input instanceof Uint8Array) return input;
  throw invalidArgument(`expected a string or Uint8Array, got ${describe(input)}`);
}

export function toText(bytes: Uint8Array): string {
  return bytes.length === 0 ? "" : decoder.decode(bytes);
}

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/**
 * Bytes in padded standard base64, three bytes to four characters. Written out rather than through `btoa`, which
 * takes a string: building one from the bytes costs more than the encoding (twice as much as this for a key).
 */
export function toBase64(bytes: Uint8Array): string {
  let out = "";
  let at = 0;
  for (; at + 2 < bytes.length; at += 3) {
    const word = (bytes[at]! << 16) | (bytes[at + 1]! << 8) | bytes[at + 2]!;
    out += ALPHABET[word >> 18]! + ALPHABET[(word >> 12) & 63]! + ALPHABET[(word >> 6) & 63]! + ALPHABET[word & 63]!;
  }
  if (at < bytes.length) {
    const word = (bytes[at]! << 16) | ((bytes[at + 1] ?? 0) << 8);
    const third = at + 1 < bytes.length ? ALPHABET[(word >> 6) & 63]! : "=";
    out += `${ALPHABET[word >> 18]!}${ALPHABET[(word >> 12) & 63]!}${third}=`;
  }
  return out;
}

/** Only code points below 128: their UTF-8 bytes are their char codes, which `btoa` reads as Latin-1. */
const ASCII = /^[\0-\x7f]*$/;

/**
 * A value's UTF-8 bytes (or the bytes given) in base64, as the gateway takes them. ASCII text (a lock's
 * secret, most values) skips the trip through bytes: `TextEncoder` calls into the runtime for each string.
 */
export function encodeBytes(value: Bytes): string {
  return typeof value === "string" && ASCII.test(value) ? btoa(value) : toBase64(toBytes(value));
}

/** Padded standard base64, the only form the gateway writes. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Bytes from the wire; anything but padded standard base64 is BAD_RESPONSE (the decoder would guess). */
export function fromBase64(text: string | undefined, field = "bytes"): Uint8Array {
  if (text === undefined || text.length === 0) return EMPTY;
  if (!BASE64.test(text)) throw badField(field, text, "is not padded standard base64");
  // `atob` gives one char code per byte; the pattern above leaves it nothing to guess.
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

export function startsWith(bytes: Uint8Array, prefix: Uint8Array): boolean {
  if (prefix.length > bytes.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[i] !== prefix[i]) return false;
  return true;
}

export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = a[i]! - b[i]!;
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && compareBytes(a, b) === 0;
}

/**
 * The smallest key greater than every key that starts with `prefix`, as etcd's clientv3 computes it:
 * increment the last byte below 0xff and cut after it. A prefix of only 0xff bytes has no such key, so
 * the range is open-ended ("\0" means every key >= start).
 */
export function prefixEnd(prefix: Uint8Array): Uint8Array {
  for (let i = prefix.length - 1; i >= 0; i--) {
    const byte = prefix[i]!;
    if (byte < 0xff) {
      const end = prefix.slice(0, i + 1);
      end[i] = byte + 1;
      return end;
    }
  }
  return ZERO_BYTE;
}

export function isZeroByte(bytes: Uint8Array): boolean {
  return bytes.length === 1 && bytes[0] === 0;
}
