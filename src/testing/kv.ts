import { compareBytes } from "./wire/bytes.js";
import type { Dialect } from "./wire/dialect.js";
import { encodeKv, setBool, setInt, setList, type Out } from "./wire/encode.js";
import { GrpcStatusError, Errors } from "./wire/errors.js";
import type { Lessor } from "./lease.js";
import {
  checkIntervals,
  isReadOnly,
  validateOp,
  type Compare,
  type DeleteOp,
  type Op,
  type PutOp,
  type RangeOp,
  type TxnOp,
} from "./ops.js";
import { inRange, type KeyValue, type MvccStore, type WriteBatch } from "./store.js";

/** What a read inside a request observes: the store itself, or a write batch with its pending changes. */
interface Reader {
  range(key: string, end: string, rev?: number): KeyValue[];
}

/** The result of one KV request: the body without the top-level header, and the header revision. */
export interface KvResult {
  body: Out;
  revision: number;
}

/**
 * A write's raft proposal, made after the gRPC layer's checks and before anything is applied: it refuses a
 * request that is too large, and numbers it.
 */
export type Propose = () => void;

/** etcd's applierV3 for KV requests, over the MVCC store and the lessor. */
export class KvApplier {
  constructor(
    private readonly store: MvccStore,
    private readonly lessor: Lessor,
    private readonly dialect: Dialect,
  ) {}

  range(op: RangeOp): KvResult {
    validateOp(op, this.dialect.checksSortOptions);
    return { body: this.doRange(this.store, op), revision: this.store.revision };
  }

  put(op: PutOp, propose: Propose): KvResult {
    validateOp(op, this.dialect.checksSortOptions);
    propose();
    this.checkPut(op);
    return this.store.write((w) => ({ body: this.doPut(w, op), revision: w.revision }));
  }

  deleteRange(op: DeleteOp, propose: Propose): KvResult {
    validateOp(op, this.dialect.checksSortOptions);
    propose();
    return this.store.write((w) => {
      const body = this.doDelete(w, op);
      return { body, revision: w.readRevision };
    });
  }

  txn(op: TxnOp, propose: Propose): KvResult {
    validateOp(op, this.dialect.checksSortOptions);
    checkIntervals(op.success);
    checkIntervals(op.failure);
    // A read-only txn is served without raft (etcd's isTxnReadonly), so no size check and no request ID.
    const readOnly = isReadOnly(op);
    if (!readOnly) propose();
    // Every compare, nested ones too, sees the state before the txn: etcd resolves the path first.
    const path = this.resolvePath(op);
    this.checkPath(op, path, !readOnly);
    if (readOnly) {
      const body = this.applyTxn(this.store, op, path, () => this.store.revision);
      return { body, revision: this.store.revision };
    }
    return this.store.write((w) => {
      const body = this.applyTxn(w, op, path, () => w.readRevision);
      return { body, revision: w.readRevision };
    });
  }

  private resolvePath(op: TxnOp): boolean[] {
    const ok = op.compare.every((c) => this.compare(c));
    const path = [ok];
    for (const sub of ok ? op.success : op.failure) {
      if (sub.kind === "txn") path.push(...this.resolvePath(sub));
    }
    return path;
  }

  /**
   * etcd's checks on the taken path, before anything is applied: until 3.6 (checkRequests) for a write txn the
   * puts (lease, ignore_*), then for every txn the ranges' revisions (checkRequestRange: a revision below the first
   * one kept, negative ones included, is compacted); from 3.6 (checkTxn) each put and range in the path's order.
   */
  private checkPath(op: TxnOp, path: boolean[], isWrite: boolean): void {
    const ops: Op[] = [];
    const walk = (t: TxnOp, p: boolean[]): boolean[] => {
      let rest = p.slice(1);
      for (const sub of p[0] ? t.success : t.failure) {
        ops.push(sub);
        if (sub.kind === "txn") rest = walk(sub, rest);
      }
      return rest;
    };
    walk(op, path);
    const inOrder = this.dialect.txnChecksInOrder;
    for (const o of ops) {
      if (isWrite && o.kind === "put") this.checkPut(o, true);
      else if (inOrder && o.kind === "range") this.checkRevision(o);
    }
    // etcd passes the checks above against the pre-txn state, then panics applying an ignore_* put whose key an
    // earlier delete in the same txn removed (a from-key "\0" delete escapes the duplicate-key check).
    const deletes: DeleteOp[] = [];
    const { version, txnPanic } = this.dialect;
    for (const o of ops) {
      if (o.kind === "delete") deletes.push(o);
      if (o.kind === "put" && (o.ignoreValue || o.ignoreLease) && deletes.some((d) => inRange(o.key, d.key, d.end))) {
        throw new GrpcStatusError(13, `etcd-edge/testing: etcd ${version} panics on this txn (${txnPanic})`);
      }
    }
    if (!inOrder) for (const o of ops) if (o.kind === "range") this.checkRevision(o);
  }

  private checkRevision(op: RangeOp): void {
    if (op.revision === 0) return;
    if (op.revision > this.store.revision) throw Errors.futureRev();
    if (op.revision < this.store.compactRevision) throw Errors.compacted();
  }

  /** A plain put's lease is checked before its key; inside a txn its key first, until 3.7 (checkRequestPut). */
  private checkPut(op: PutOp, inTxn = false): void {
    const keyMissing = () => (op.ignoreValue || op.ignoreLease) && !this.store.get(op.key);
    if (inTxn && !this.dialect.txnPutChecksLeaseFirst && keyMissing()) throw Errors.keyNotFound();
    if (op.lease !== 0n) this.lessor.require(op.lease);
    if (keyMissing()) throw Errors.keyNotFound();
  }

  private applyTxn(r: Reader | WriteBatch, op: TxnOp, path: boolean[], rev: () => number): Out {
    const [ok = false, ...rest] = path;
    let remaining = rest;
    const responses: Out[] = [];
    for (const sub of ok ? op.success : op.failure) {
      switch (sub.kind) {
        case "range":
          responses.push({ response_range: { header: revHeader(rev()), ...this.doRange(r, sub) } });
          break;
        case "put":
          responses.push({ response_put: this.doPut(r as WriteBatch, sub) });
          break;
        case "delete":
          responses.push({ response_delete_range: this.doDelete(r as WriteBatch, sub) });
          break;
        case "txn": {
          const nested = this.applyTxn(r, sub, remaining, rev);
          remaining = remaining.slice(countPath(sub, remaining));
          // A nested txn's header is present but empty in 3.4 (newTxnResp sets an empty ResponseHeader).
          responses.push({ response_txn: { header: {}, ...nested } });
          break;
        }
        case "empty":
          break;
      }
    }
    const out: Out = {};
    setBool(out, "succeeded", ok);
    setList(out, "responses", responses);
    return out;
  }

  private doRange(r: Reader, op: RangeOp): Out {
    let kvs = r.range(op.key, op.end, op.revision);
    const count = kvs.length;
    // etcd reads only limit+1 keys (in key order) unless it must sort or filter everything first; a sort by a
    // target other than KEY with no order given then sorts just those.
    const readsAll =
      op.sortOrder !== 0 || op.minMod !== 0 || op.maxMod !== 0 || op.minCreate !== 0 || op.maxCreate !== 0;
    if (!readsAll && op.limit > 0) kvs = kvs.slice(0, op.limit + 1);
    if (op.maxMod) kvs = kvs.filter((kv) => kv.modRevision <= op.maxMod);
    if (op.minMod) kvs = kvs.filter((kv) => kv.modRevision >= op.minMod);
    if (op.maxCreate) kvs = kvs.filter((kv) => kv.createRevision <= op.maxCreate);
    if (op.minCreate) kvs = kvs.filter((kv) => kv.createRevision >= op.minCreate);
    const order = op.sortTarget !== 0 && op.sortOrder === 0 ? 1 : op.sortOrder;
    if (order === 1 || order === 2) {
      const by = SORTERS[op.sortTarget] ?? SORTERS[0]!;
      // Stable, so ties keep key order in both directions, as Go's insertion sort does for small results.
      kvs = [...kvs].sort(order === 1 ? by : (a, b) => by(b, a));
    }
    let more = false;
    if (op.countOnly) kvs = [];
    else if (op.limit > 0 && kvs.length > op.limit) {
      kvs = kvs.slice(0, op.limit);
      more = true;
    }
    const out: Out = {};
    setList(
      out,
      "kvs",
      kvs.map((kv) => encodeKv(kv, op.keysOnly, this.dialect.keysOnlyDropsLease && op.sortTarget !== BY_VALUE)),
    );
    setBool(out, "more", more);
    setInt(out, "count", count);
    return out;
  }

  private doPut(w: WriteBatch, op: PutOp): Out {
    const prev = w.range(op.key, "")[0];
    const value = op.ignoreValue && prev ? prev.value : op.value;
    const lease = op.ignoreLease && prev ? prev.lease : op.lease;
    w.put(op.key, value, lease);
    if (prev && prev.lease !== lease) this.lessor.detach(prev.lease, op.key);
    if (lease !== 0n) this.lessor.attach(lease, op.key);
    const out: Out = { header: revHeader(w.revision) };
    if (op.prevKv && prev) out.prev_kv = encodeKv(prev);
    return out;
  }

  private doDelete(w: WriteBatch, op: DeleteOp): Out {
    const deleted = w.deleteRange(op.key, op.end);
    for (const kv of deleted) if (kv.lease !== 0n) this.lessor.detach(kv.lease, kv.key);
    const out: Out = { header: revHeader(w.readRevision) };
    setInt(out, "deleted", deleted.length);
    if (op.prevKv)
      setList(
        out,
        "prev_kvs",
        deleted.map((kv) => encodeKv(kv)),
      );
    return out;
  }

  /**
   * etcd's applyCompare: every key in range must satisfy it; no key compares as a zero KeyValue,
   * except VALUE, which then fails.
   */
  private compare(c: Compare): boolean {
    const kvs = this.store.range(c.key, c.end);
    if (kvs.length === 0) {
      if (c.target === 3) return false;
      return compareKv(c, ZERO_KV);
    }
    return kvs.every((kv) => compareKv(c, kv));
  }
}

const ZERO_KV: KeyValue = {
  key: "",
  createRevision: 0,
  modRevision: 0,
  version: 0,
  value: new Uint8Array(),
  lease: 0n,
};

function compareKv(c: Compare, kv: KeyValue): boolean {
  let result: number;
  switch (c.target) {
    case 0:
      result = cmp(BigInt(kv.version), c.number);
      break;
    case 1:
      result = cmp(BigInt(kv.createRevision), c.number);
      break;
    case 2:
      result = cmp(BigInt(kv.modRevision), c.number);
      break;
    case 3:
      result = compareBytes(kv.value, c.value);
      break;
    case 4:
      result = cmp(kv.lease, c.number);
      break;
    default:
      return true;
  }
  switch (c.result) {
    case 0:
      return result === 0;
    case 1:
      return result > 0;
    case 2:
      return result < 0;
    case 3:
      return result !== 0;
    default:
      return true;
  }
}

function cmp(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** How many path entries a nested txn consumed (its own plus its taken branch's nested txns). */
function countPath(op: TxnOp, path: boolean[]): number {
  let n = 1;
  for (const sub of path[0] ? op.success : op.failure) {
    if (sub.kind === "txn") n += countPath(sub, path.slice(n));
  }
  return n;
}

function revHeader(revision: number): Out {
  const h: Out = {};
  setInt(h, "revision", revision);
  return h;
}

type Sorter = (a: KeyValue, b: KeyValue) => number;
/** RangeRequest.SortTarget VALUE: the one sort that needs values, so 3.7 reads keys_only from the store too. */
const BY_VALUE = 4;
const SORTERS: Sorter[] = [
  (a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
  (a, b) => a.version - b.version,
  (a, b) => a.createRevision - b.createRevision,
  (a, b) => a.modRevision - b.modRevision,
  (a, b) => compareBytes(a.value, b.value),
];
