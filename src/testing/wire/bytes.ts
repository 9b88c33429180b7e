import { fromByteArray } from "base64-js";

/**
 * Keys are held as "binary strings": one char per byte (0..255). JavaScript compares strings by UTF-16 code
 * unit, which for such strings is exactly etcd's bytewise order, and they work as Map keys.
 */
export type BinKey = string;

export function encodeBase64(bytes: Uint8Array): string {
  return fromByteArray(bytes);
}

export function bytesToBin(bytes: Uint8Array): BinKey {
  let out = "";
  for (let i = 0; i < bytes.length; i += 4096) {
    out += String.fromCharCode(...bytes.subarray(i, i + 4096));
  }
  return out;
}

export function binToBytes(bin: BinKey): Uint8Array {
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function binToBase64(bin: BinKey): string {
  return encodeBase64(binToBytes(bin));
}

const encoder = new TextEncoder();

/** Accepts what users naturally pass to inspection helpers: text (UTF-8) or raw bytes. */
export function toBin(key: string | Uint8Array): BinKey {
  return bytesToBin(typeof key === "string" ? encoder.encode(key) : key);
}

/**
 * The smallest key greater than every key with this prefix; "" (unbounded) when none exists,
 * as etcd's clientv3.GetPrefixRangeEnd.
 */
export function prefixEnd(prefix: BinKey): BinKey {
  for (let i = prefix.length - 1; i >= 0; i--) {
    const c = prefix.charCodeAt(i);
    if (c < 0xff) return prefix.slice(0, i) + String.fromCharCode(c + 1);
  }
  return "\0";
}

export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = (a[i] as number) - (b[i] as number);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}
