import { isMsg, type Msg, type Value } from "./message.js";
import type { FieldDesc } from "./schema.js";

/**
 * Protobuf encoded sizes, for etcd's two request limits: the gRPC server refuses a message over
 * --max-request-bytes + 512 KiB, and raft refuses a proposal (InternalRaftRequest) over --max-request-bytes.
 * proto3 rules: zero scalars are skipped unless they are a oneof member, sub-messages count when present,
 * repeated enums are packed.
 */

export function varintSize(v: bigint): number {
  // Negative int64s are sign-extended to ten bytes.
  let x = v < 0n ? v + 2n ** 64n : v;
  let n = 1;
  while (x >= 0x80n) {
    x >>= 7n;
    n++;
  }
  return n;
}

const tagSize = (number: number) => varintSize(BigInt(number << 3));
const lengthDelimited = (number: number, length: number) => tagSize(number) + varintSize(BigInt(length)) + length;

function scalarSize(f: FieldDesc, v: Value): number {
  switch (f.kind) {
    case "int64":
    case "uint64":
      return varintSize(v as bigint);
    case "enum":
      return varintSize(BigInt(v as number));
    case "bool":
      return 1;
    case "bytes":
      return (v as Uint8Array).length;
    case "string":
      return new TextEncoder().encode(v as string).length;
    case "message":
      return messageSize(v as Msg);
  }
}

function isZero(f: FieldDesc, v: Value): boolean {
  if (f.kind === "message") return false;
  if (typeof v === "bigint") return v === 0n;
  if (typeof v === "number") return v === 0;
  if (typeof v === "boolean") return !v;
  if (typeof v === "string") return v === "";
  return v instanceof Uint8Array && v.length === 0;
}

const delimited = (f: FieldDesc) => f.kind === "bytes" || f.kind === "string" || f.kind === "message";

export function messageSize(m: Msg): number {
  let size = 0;
  for (const f of m.type.fields) {
    const v = m.fields.get(f.name);
    if (v === undefined) continue;
    if (f.repeated) {
      const items = v as Value[];
      if (items.length === 0) continue;
      if (delimited(f)) {
        for (const item of items) size += lengthDelimited(f.number, scalarSize(f, item));
      } else {
        size += lengthDelimited(
          f.number,
          items.reduce<number>((n, item) => n + scalarSize(f, item), 0),
        );
      }
      continue;
    }
    if (!f.oneof && !isMsg(v) && isZero(f, v)) continue;
    size += delimited(f) ? lengthDelimited(f.number, scalarSize(f, v)) : tagSize(f.number) + scalarSize(f, v);
  }
  return size;
}

/**
 * The size of the InternalRaftRequest etcd proposes for a request: its header (field 100: the request ID, and
 * the user name and auth revision when auth is on) plus the request as field `number`.
 */
export function raftRequestSize(
  requestSize: number,
  field: number,
  header: { id: bigint; username: string; authRevision: bigint },
): number {
  let headerSize = tagSize(1) + varintSize(header.id);
  if (header.username !== "") headerSize += lengthDelimited(2, new TextEncoder().encode(header.username).length);
  if (header.authRevision !== 0n) headerSize += tagSize(3) + varintSize(header.authRevision);
  return lengthDelimited(100, headerSize) + lengthDelimited(field, requestSize);
}
