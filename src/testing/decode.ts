import { bytesToBin, decodeBase64, type BinKey } from "./bytes.js";
import { EtcdError } from "./errors.js";

/** A decoded JSON request object. Field lookups accept the proto name or its lowerCamel form, as the gateway does. */
export type Json = Record<string, unknown>;

function camel(name: string): string {
  return name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

function raw(obj: Json, name: string): unknown {
  const v = obj[name];
  if (v !== undefined) return v;
  return obj[camel(name)];
}

/** Parses a request body the way the gateway does: empty or `null` is an empty message; non-objects are refused. */
export function parseBody(text: string): Json {
  if (text.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    // Go's decoder says "unexpected EOF" for truncated input; other syntax errors keep V8's wording.
    const msg = String((err as Error).message);
    const at = /position (\d+)/.exec(msg)?.[1];
    const truncated = /end of (JSON )?input|Unterminated/i.test(msg) || (at !== undefined && Number(at) >= text.trimEnd().length);
    throw EtcdError.invalidArgument(truncated ? "unexpected EOF" : msg);
  }
  if (value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) {
    throw EtcdError.invalidArgument(
      `json: cannot unmarshal ${Array.isArray(value) ? "array" : typeof value} into Go value of type map[string]json.RawMessage`,
    );
  }
  return value as Json;
}

function goType(v: unknown): string {
  return Array.isArray(v) ? "array" : typeof v === "boolean" ? "bool" : typeof v;
}

export function bytesField(obj: Json, name: string): Uint8Array {
  const v = raw(obj, name);
  if (v === undefined || v === null) return new Uint8Array();
  if (typeof v !== "string") throw EtcdError.invalidArgument(`json: cannot unmarshal ${goType(v)} into Go value of type []uint8`);
  return decodeBase64(v);
}

export function keyField(obj: Json, name: string): BinKey {
  return bytesToBin(bytesField(obj, name));
}

export function int64Field(obj: Json, name: string): bigint {
  const v = raw(obj, name);
  if (v === undefined || v === null) return 0n;
  if (typeof v === "number" && Number.isInteger(v)) return BigInt(v);
  if (typeof v === "string" && /^-?\d+$/.test(v.trim())) return BigInt(v.trim());
  throw EtcdError.invalidArgument(`json: cannot unmarshal ${JSON.stringify(v)} into Go value of type int64`);
}

/** Revisions, TTLs and counts fit a double comfortably; lease IDs do not and stay bigint. */
export function numField(obj: Json, name: string): number {
  return Number(int64Field(obj, name));
}

export function boolField(obj: Json, name: string): boolean {
  const v = raw(obj, name);
  if (v === undefined || v === null) return false;
  if (typeof v === "boolean") return v;
  throw EtcdError.invalidArgument(`json: cannot unmarshal ${goType(v)} into Go value of type bool`);
}

export function enumField(obj: Json, name: string, values: readonly string[], goName: string): number {
  return enumValue(raw(obj, name), values, goName);
}

export function enumValue(v: unknown, values: readonly string[], goName: string): number {
  if (v === undefined || v === null) return 0;
  if (typeof v === "number" && Number.isInteger(v)) return v;
  if (typeof v === "string") {
    const i = values.indexOf(v);
    if (i >= 0) return i;
  }
  throw EtcdError.invalidArgument(`unknown value ${JSON.stringify(v)} for enum ${goName}`);
}

export function objectField(obj: Json, name: string): Json | undefined {
  const v = raw(obj, name);
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) {
    throw EtcdError.invalidArgument(`json: cannot unmarshal ${goType(v)} into Go value of type ${name}`);
  }
  return v as Json;
}

export function arrayField(obj: Json, name: string): unknown[] {
  const v = raw(obj, name);
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw EtcdError.invalidArgument(`json: cannot unmarshal ${goType(v)} into Go value of type []json.RawMessage`);
  return v;
}

export function objectArrayField(obj: Json, name: string): Json[] {
  return arrayField(obj, name).map((item) => {
    if (item === null || typeof item !== "object" || Array.isArray(item)) {
      throw EtcdError.invalidArgument(`json: cannot unmarshal ${goType(item)} into Go value of type map[string]json.RawMessage`);
    }
    return item as Json;
  });
}
