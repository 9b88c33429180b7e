import type { BinKey } from "./wire/bytes.js";
import { bin, bool, bytes, enumValue, int, msgList, num, oneofCase, sub, type Msg } from "./wire/message.js";
import type { Rbac } from "./wire/dialect.js";
import { Errors } from "./wire/errors.js";

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

const COMPARE_UNION = ["version", "create_revision", "mod_revision", "value", "lease"] as const;

export function parseRange(m: Msg): RangeOp {
  return {
    kind: "range",
    key: bin(m, "key"),
    end: bin(m, "range_end"),
    limit: num(m, "limit"),
    revision: num(m, "revision"),
    sortOrder: enumValue(m, "sort_order"),
    sortTarget: enumValue(m, "sort_target"),
    keysOnly: bool(m, "keys_only"),
    countOnly: bool(m, "count_only"),
    minMod: num(m, "min_mod_revision"),
    maxMod: num(m, "max_mod_revision"),
    minCreate: num(m, "min_create_revision"),
    maxCreate: num(m, "max_create_revision"),
  };
}

export function parsePut(m: Msg): PutOp {
  return {
    kind: "put",
    key: bin(m, "key"),
    value: bytes(m, "value"),
    lease: int(m, "lease"),
    prevKv: bool(m, "prev_kv"),
    ignoreValue: bool(m, "ignore_value"),
    ignoreLease: bool(m, "ignore_lease"),
  };
}

export function parseDelete(m: Msg): DeleteOp {
  return { kind: "delete", key: bin(m, "key"), end: bin(m, "range_end"), prevKv: bool(m, "prev_kv") };
}

function parseCompare(m: Msg): Compare {
  const target = enumValue(m, "target");
  const field = COMPARE_UNION[target];
  return {
    key: bin(m, "key"),
    end: bin(m, "range_end"),
    target,
    result: enumValue(m, "result"),
    number: field && field !== "value" ? int(m, field) : 0n,
    value: field === "value" ? bytes(m, "value") : new Uint8Array(),
  };
}

export function parseTxn(m: Msg): TxnOp {
  return {
    kind: "txn",
    compare: msgList(m, "compare").map(parseCompare),
    success: msgList(m, "success").map(parseRequestOp),
    failure: msgList(m, "failure").map(parseRequestOp),
  };
}

function parseRequestOp(m: Msg): Op {
  switch (oneofCase(m, "etcdserverpb.RequestOp.request")) {
    case "request_range":
      return parseRange(sub(m, "request_range")!);
    case "request_put":
      return parsePut(sub(m, "request_put")!);
    case "request_delete_range":
      return parseDelete(sub(m, "request_delete_range")!);
    case "request_txn":
      return parseTxn(sub(m, "request_txn")!);
    default:
      return { kind: "empty" };
  }
}

/** etcd's --max-txn-ops default. */
export const MAX_TXN_OPS = 128;

/** The sort orders and targets etcd's enums name (NONE..DESCEND, KEY..VALUE). */
const SORT_ORDERS = 3;
const SORT_TARGETS = 5;

/**
 * The gRPC layer's request checks (v3rpc/key.go), done before anything is applied. `sortOptions`: 3.6 refuses
 * a sort order or target its enums do not name (3.5 reads them as no sort).
 */
export function validateOp(op: Op, sortOptions: boolean, maxTxnOps = MAX_TXN_OPS): void {
  switch (op.kind) {
    case "range":
      if (op.key === "") throw Errors.emptyKey();
      if (sortOptions && !(named(op.sortOrder, SORT_ORDERS) && named(op.sortTarget, SORT_TARGETS))) {
        throw Errors.invalidSortOption();
      }
      return;
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
      for (const sub of [...op.success, ...op.failure]) validateOp(sub, sortOptions, maxTxnOps - opc);
      return;
    }
    case "empty":
      throw Errors.keyNotFound();
  }
}

const named = (value: number, count: number) => Number.isInteger(value) && value >= 0 && value < count;

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

/** A key range an auth check covers, and whether it needs write (else read) permission. */
export interface Access {
  key: BinKey;
  end: BinKey;
  write: boolean;
}

/**
 * Every [key, end) etcd's RBAC checks for an op, and how: a put its key, the keys its lease holds now (so that
 * the user could revoke the lease) and with prev_kv a read; a txn its compares and every request of both
 * branches, taken or not. Inside a txn, before `rbac.nestedTxns`, a put is checked for its key only and a
 * nested txn not at all.
 */
export function accessedRanges(
  op: Op,
  rbac: Rbac,
  leaseKeys: (id: bigint) => Iterable<BinKey>,
  nested = false,
): Access[] {
  const full = !nested || rbac.nestedTxns;
  switch (op.kind) {
    case "range":
      return [{ key: op.key, end: op.end, write: false }];
    case "put":
      return [
        { key: op.key, end: "", write: true },
        ...(full && op.lease !== 0n ? [...leaseKeys(op.lease)].map((key) => ({ key, end: "", write: true })) : []),
        ...(full && op.prevKv ? [{ key: op.key, end: "", write: false }] : []),
      ];
    case "delete":
      return [
        { key: op.key, end: op.end, write: true },
        ...(op.prevKv ? [{ key: op.key, end: op.end, write: false }] : []),
      ];
    case "txn":
      if (!full) return [];
      return [
        ...op.compare.map((c) => ({ key: c.key, end: c.end, write: false })),
        ...[...op.success, ...op.failure].flatMap((o) => accessedRanges(o, rbac, leaseKeys, true)),
      ];
    case "empty":
      return [];
  }
}
