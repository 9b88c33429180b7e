import { bytesToBin, type BinKey } from "./bytes.js";
import type { MessageDesc } from "./schema.js";

/** A decoded field value: int64/uint64 as bigint, enums as numbers, bytes as Uint8Array. */
export type Value = bigint | number | boolean | string | Uint8Array | Msg | Value[];

/**
 * A decoded request message: the fields that were present, by proto name. Presence matters for oneof members
 * (encoded even when zero) and for sub-messages (an empty one is not an absent one).
 */
export interface Msg {
  readonly type: MessageDesc;
  readonly fields: Map<string, Value>;
}

export function newMsg(type: MessageDesc): Msg {
  return { type, fields: new Map() };
}

export function int(m: Msg, name: string): bigint {
  const v = m.fields.get(name);
  return typeof v === "bigint" ? v : 0n;
}

/** Revisions, limits and TTLs: exact below 2^53, and only compared beyond. */
export function num(m: Msg, name: string): number {
  return Number(int(m, name));
}

export function bool(m: Msg, name: string): boolean {
  return m.fields.get(name) === true;
}

export function enumValue(m: Msg, name: string): number {
  const v = m.fields.get(name);
  return typeof v === "number" ? v : 0;
}

export function bytes(m: Msg, name: string): Uint8Array {
  const v = m.fields.get(name);
  return v instanceof Uint8Array ? v : new Uint8Array();
}

export function bin(m: Msg, name: string): BinKey {
  return bytesToBin(bytes(m, name));
}

export function str(m: Msg, name: string): string {
  const v = m.fields.get(name);
  return typeof v === "string" ? v : "";
}

export function sub(m: Msg, name: string): Msg | undefined {
  const v = m.fields.get(name);
  return isMsg(v) ? v : undefined;
}

export function list(m: Msg, name: string): Value[] {
  const v = m.fields.get(name);
  return Array.isArray(v) ? v : [];
}

export function msgList(m: Msg, name: string): Msg[] {
  return list(m, name).filter(isMsg);
}

export function isMsg(v: Value | undefined): v is Msg {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** The oneof member that is set, if any (the first in declaration order when a decoder set several). */
export function oneofCase(m: Msg, oneof: string): string | undefined {
  return m.type.fields.find((f) => f.oneof === oneof && m.fields.has(f.name))?.name;
}

/** A plain description of a message for build(): scalars as their Value, sub-messages as nested plain objects. */
export interface MsgInit {
  [field: string]: Value | MsgInit | MsgInit[] | undefined;
}

/** Builds a message the server sends itself (v3lock's and v3election's requests through the in-process client). */
export function build(type: MessageDesc, init: MsgInit): Msg {
  const msg = newMsg(type);
  for (const f of type.fields) {
    const v = init[f.name];
    if (v === undefined) continue;
    if (f.kind !== "message") {
      msg.fields.set(f.name, v as Value);
      continue;
    }
    const make = (x: unknown) => build(f.message!(), x as MsgInit);
    msg.fields.set(f.name, f.repeated ? (v as MsgInit[]).map(make) : make(v));
  }
  return msg;
}
