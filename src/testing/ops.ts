import type { BinKey } from "./bytes.js";
import {
  boolField,
  bytesField,
  enumField,
  int64Field,
  keyField,
  numField,
  objectArrayField,
  objectField,
  type Json,
} from "./decode.js";
import { Errors } from "./errors.js";

/** Decoded KV requests. Keys are binary strings; `end` "" = single key, "\0" = every key >= key. */
export interface RangeOp {
  kind: "range";
  key: BinKey;
  end: BinKey;
  limit: number;
  revision: number;
  sortOrder: number;
  sortTarget: number;
  keysOnly: boolean;
  countOnly: boolean;
  minMod: number;
  maxMod: number;
  minCreate: number;
  maxCreate: number;
}

export interface PutOp {
  kind: "put";
  key: BinKey;
  value: Uint8Array;
  lease: bigint;
  prevKv: boolean;
  ignoreValue: boolean;
  ignoreLease: boolean;
}

export interface DeleteOp {
  kind: "delete";
  key: BinKey;
  end: BinKey;
  prevKv: boolean;
}

export interface Compare {
  key: BinKey;
  end: BinKey;
  target: number;
  result: number;
  /** Only the union member matching `target` counts; etcd reads the others as zero. */
  number: bigint;
  value: Uint8Array;
}

export interface TxnOp {
  kind: "txn";
  compare: Compare[];
  success: Op[];
  failure: Op[];
}

/** A RequestOp with no request set: etcd refuses it with "key not found". */
export interface EmptyOp {
  kind: "empty";
}

export type Op = RangeOp | PutOp | DeleteOp | TxnOp | EmptyOp;

export const SORT_ORDER = ["NONE", "ASCEND", "DESCEND"] as const;
export const SORT_TARGET = ["KEY", "VERSION", "CREATE", "MOD", "VALUE"] as const;
export const COMPARE_TARGET = ["VERSION", "CREATE", "MOD", "VALUE", "LEASE"] as const;
export const COMPARE_RESULT = ["EQUAL", "GREATER", "LESS", "NOT_EQUAL"] as const;
export const FILTER_TYPE = ["NOPUT", "NODELETE"] as const;

const COMPARE_UNION = ["version", "create_revision", "mod_revision", "value", "lease"] as const;

export function parseRange(j: Json): RangeOp {
  return {
    kind: "range",
    key: keyField(j, "key"),
    end: keyField(j, "range_end"),
    limit: numField(j, "limit"),
    revision: numField(j, "revision"),
    sortOrder: enumField(j, "sort_order", SORT_ORDER, "etcdserverpb.RangeRequest_SortOrder"),
    sortTarget: enumField(j, "sort_target", SORT_TARGET, "etcdserverpb.RangeRequest_SortTarget"),
    keysOnly: boolField(j, "keys_only"),
    countOnly: boolField(j, "count_only"),
    minMod: numField(j, "min_mod_revision"),
    maxMod: numField(j, "max_mod_revision"),
    minCreate: numField(j, "min_create_revision"),
    maxCreate: numField(j, "max_create_revision"),
  };
}

export function parsePut(j: Json): PutOp {
  return {
    kind: "put",
    key: keyField(j, "key"),
    value: bytesField(j, "value"),
    lease: int64Field(j, "lease"),
    prevKv: boolField(j, "prev_kv"),
    ignoreValue: boolField(j, "ignore_value"),
    ignoreLease: boolField(j, "ignore_lease"),
  };
}

export function parseDelete(j: Json): DeleteOp {
  return { kind: "delete", key: keyField(j, "key"), end: keyField(j, "range_end"), prevKv: boolField(j, "prev_kv") };
}

function parseCompare(j: Json): Compare {
  const target = enumField(j, "target", COMPARE_TARGET, "etcdserverpb.Compare_CompareTarget");
  const field = COMPARE_UNION[target];
  return {
    key: keyField(j, "key"),
    end: keyField(j, "range_end"),
    target,
    result: enumField(j, "result", COMPARE_RESULT, "etcdserverpb.Compare_CompareResult"),
    number: field && field !== "value" ? int64Field(j, field) : 0n,
    value: field === "value" ? bytesField(j, "value") : new Uint8Array(),
  };
}

export function parseTxn(j: Json): TxnOp {
  return {
    kind: "txn",
    compare: objectArrayField(j, "compare").map(parseCompare),
    success: objectArrayField(j, "success").map(parseRequestOp),
    failure: objectArrayField(j, "failure").map(parseRequestOp),
  };
}

function parseRequestOp(j: Json): Op {
  const range = objectField(j, "request_range");
  if (range) return parseRange(range);
  const put = objectField(j, "request_put");
  if (put) return parsePut(put);
  const del = objectField(j, "request_delete_range");
  if (del) return parseDelete(del);
  const txn = objectField(j, "request_txn");
  if (txn) return parseTxn(txn);
  return { kind: "empty" };
}

/** etcd's --max-txn-ops default. */
export const MAX_TXN_OPS = 128;

/** The gRPC layer's request checks (v3rpc/key.go), done before anything is applied. */
export function validateOp(op: Op, maxTxnOps = MAX_TXN_OPS): void {
  switch (op.kind) {
    case "range":
    case "delete":
      if (op.key === "") throw Errors.emptyKey();
      return;
    case "put":
      if (op.key === "") throw Errors.emptyKey();
      if (op.ignoreValue && op.value.length > 0) throw Errors.valueProvided();
      if (op.ignoreLease && op.lease !== 0n) throw Errors.leaseProvided();
      return;
    case "txn": {
      const opc = Math.max(op.compare.length, op.success.length, op.failure.length);
      if (opc > maxTxnOps) throw Errors.tooManyOps();
      for (const c of op.compare) if (c.key === "") throw Errors.emptyKey();
      for (const sub of [...op.success, ...op.failure]) validateOp(sub, maxTxnOps - opc);
      return;
    }
    case "empty":
      throw Errors.keyNotFound();
  }
}

/** A [begin, end) interval over binary keys; a point when end is undefined. */
interface Interval {
  begin: BinKey;
  end: BinKey | undefined;
}

function intersectsPoint(ivs: readonly Interval[], k: BinKey): boolean {
  // Literal string intervals as etcd's adt tree: a "\0" end is not special here, so a from-key delete never clashes.
  return ivs.some((iv) => (iv.end === undefined ? iv.begin === k : iv.begin <= k && k < iv.end));
}

/** etcd's checkIntervals: a key may be written once per txn path (then/else branches may repeat a key). */
export function checkIntervals(reqs: readonly Op[]): { puts: Set<BinKey>; dels: Interval[] } {
  const dels: Interval[] = [];
  for (const r of reqs) {
    if (r.kind === "delete") dels.push({ begin: r.key, end: r.end === "" ? undefined : r.end });
  }
  const puts = new Set<BinKey>();
  for (const r of reqs) {
    if (r.kind !== "txn") continue;
    const then = checkIntervals(r.success);
    const other = checkIntervals(r.failure);
    for (const k of then.puts) {
      if (puts.has(k) || intersectsPoint(dels, k)) throw Errors.duplicateKey();
      puts.add(k);
    }
    for (const k of other.puts) {
      if ((puts.has(k) && !then.puts.has(k)) || intersectsPoint(dels, k)) throw Errors.duplicateKey();
      puts.add(k);
    }
    dels.push(...then.dels, ...other.dels);
  }
  for (const r of reqs) {
    if (r.kind !== "put") continue;
    if (puts.has(r.key) || intersectsPoint(dels, r.key)) throw Errors.duplicateKey();
    puts.add(r.key);
  }
  return { puts, dels };
}

export function isReadOnly(op: TxnOp): boolean {
  return [...op.success, ...op.failure].every((o) => o.kind === "range" || (o.kind === "txn" && isReadOnly(o)));
}

/** Every [key, end) an op touches and how, for the auth check (3.4 checks all branches, taken or not). */
export function accessedRanges(op: Op): { key: BinKey; end: BinKey; write: boolean }[] {
  switch (op.kind) {
    case "range":
      return [{ key: op.key, end: op.end, write: false }];
    case "put":
      return [{ key: op.key, end: "", write: true }, ...(op.prevKv ? [{ key: op.key, end: "", write: false }] : [])];
    case "delete":
      return [{ key: op.key, end: op.end, write: true }, ...(op.prevKv ? [{ key: op.key, end: op.end, write: false }] : [])];
    case "txn":
      return [
        ...op.compare.map((c) => ({ key: c.key, end: c.end, write: false })),
        ...[...op.success, ...op.failure].flatMap(accessedRanges),
      ];
    case "empty":
      return [];
  }
}
