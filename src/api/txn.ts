import { countArg, int64Field, leaseIdArg } from "./args.js";
import { type Bytes, encodeBytes } from "./bytes.js";
import { decodeHeader, type LeaseId, type ResponseHeader } from "./codec.js";
import { describe, invalidArgument } from "../errors/catalogue.js";
import type { KeyRange, Keyspace } from "./keyspace.js";
import {
  decodeDelete,
  decodePut,
  decodeRange,
  type DeleteQuery,
  type DeleteResult,
  deleteRequest,
  type PutOptions,
  type PutResult,
  putRequest,
  type RangeQuery,
  type RangeResult,
  rangeRequest,
} from "./kv.js";
import type { RetryPolicy } from "../gateway/retry-policy.js";
import type { Unary } from "../gateway/transport.js";
import { txnResponse, type WireResponseOp, type WireTxn } from "../gateway/wire.js";
import { acceptsTxn } from "../gateway/wire-accept.js";

/** How a compare relates the key's field (left) to the operand (right). */
export type CompareOperator = "==" | "!=" | "<" | ">";

/**
 * etcd's name of each result. EQUAL is the enum's zero value, and zero values are left out of a request, as
 * protojson leaves them out (so a gRPC client never sends them either): each one costs the gateway a field to
 * decode, and the compares of a lock's join and release are all defaults but their key and revision.
 */
const RESULT: Record<CompareOperator, string | undefined> = {
  "==": undefined,
  "!=": "NOT_EQUAL",
  "<": "LESS",
  ">": "GREATER",
};

/**
 * One condition of a transaction. Over a range or prefix, every key in it must satisfy the condition. A
 * missing key has version, create and mod revision 0 and no lease; every value compare on it is false.
 */
export class Compare {
  /** @internal */
  constructor(
    private readonly target: KeyRange | Bytes,
    /** What is compared; none for VERSION, the zero value, left out (see RESULT). */
    private readonly field: "VALUE" | "CREATE" | "MOD" | "LEASE" | undefined,
    private readonly operator: CompareOperator,
    private readonly operand: Record<string, string | undefined>,
  ) {
    // Own keys only: "toString" is `in` every object, and its RESULT would have been sent as EQUAL.
    if (typeof operator !== "string" || !Object.hasOwn(RESULT, operator))
      throw invalidArgument(`compare operator must be one of ==, !=, <, >; got ${describe(operator)}`);
  }

  #wired: Wired | undefined;

  /** @internal Encoded once per keyspace: a compare is immutable, and a lock's are sent again and again. */
  toWire(keyspace: Keyspace): Record<string, unknown> {
    this.#wired = wired(this.#wired, keyspace, () => ({
      ...keyspace.range(this.target),
      target: this.field,
      result: RESULT[this.operator],
      ...this.operand,
    }));
    return this.#wired.wire;
  }
}

/**
 * The request form of a compare or an operation in one keyspace, made on its first use there and kept by the
 * compare or operation: a request built again from the same ones (a lock's join or release, each time) encodes
 * only what is new in it. Made again for another keyspace, so one shared by clients of two namespaces encodes for
 * each. Kept on the item, not in a WeakMap beside it: a lock's acquisition makes new ones each time, and an entry
 * in a WeakMap for each cost a warm lock cycle more than the encoding it saves.
 */
interface Wired {
  keyspace: Keyspace;
  wire: Record<string, unknown>;
}

/** `made` if it was made for `keyspace`, else the item encoded there. */
function wired(made: Wired | undefined, keyspace: Keyspace, encode: () => Record<string, unknown>): Wired {
  return made?.keyspace === keyspace ? made : { keyspace, wire: encode() };
}

/** Conditions for `txn().if(...)`. */
export const cmp = {
  /** Bytewise comparison of the value. */
  value: (key: Bytes | KeyRange, operator: CompareOperator, value: Bytes) =>
    new Compare(key, "VALUE", operator, { value: encodeBytes(value) }),
  /** The number of writes since creation; `version(key, "==", 0)` means "key does not exist". */
  version: (key: Bytes | KeyRange, operator: CompareOperator, version: number) =>
    new Compare(key, undefined, operator, { version: int64Field(countArg(version, "version")) }),
  /**
   * The revision that created the key (0 if it does not exist). It changes only when the key is deleted and
   * created again, which is why a holder's key's create revision serves as its fencing token.
   */
  createRevision: (key: Bytes | KeyRange, operator: CompareOperator, revision: number) =>
    new Compare(key, "CREATE", operator, { create_revision: int64Field(countArg(revision, "createRevision")) }),
  /** The revision of the key's last write (0 if it does not exist): "unchanged since I read it" is `==`. */
  modRevision: (key: Bytes | KeyRange, operator: CompareOperator, revision: number) =>
    new Compare(key, "MOD", operator, { mod_revision: int64Field(countArg(revision, "modRevision")) }),
  /** The attached lease ("0" for none). */
  lease: (key: Bytes | KeyRange, operator: CompareOperator, lease: LeaseId) =>
    new Compare(key, "LEASE", operator, { lease: leaseIdArg(lease) }),
};

/** One operation of a transaction; `R` is what it returns. */
export class Op<R> {
  /** @internal */
  constructor(
    /** Whether the operation changes the store (so the transaction is not safe to resend). */
    readonly writes: boolean,
    private readonly encode: (keyspace: Keyspace) => Record<string, unknown>,
    private readonly decodeResponse: (keyspace: Keyspace, wire: WireResponseOp) => R,
  ) {}

  #wired: Wired | undefined;

  /** @internal Encoded once per keyspace, as a compare is. */
  toWire(keyspace: Keyspace): Record<string, unknown> {
    this.#wired = wired(this.#wired, keyspace, () => this.encode(keyspace));
    return this.#wired.wire;
  }

  /** @internal */
  decode(keyspace: Keyspace, wire: WireResponseOp | undefined): R {
    return this.decodeResponse(keyspace, wire ?? {});
  }
}

/** An operation whatever it returns: what lists of operations hold. */
export type AnyOp = Op<unknown>;

/** What each operation of a list returns, position by position. */
export type OpResults<T extends readonly AnyOp[]> = { -readonly [K in keyof T]: T[K] extends Op<infer R> ? R : never };

/**
 * What a transaction returns: which branch ran and what each of its operations returned, typed position by
 * position, so checking `succeeded` narrows `responses` to the `then` or the `else` operations.
 */
export type TxnResult<Then extends readonly AnyOp[] = AnyOp[], Else extends readonly AnyOp[] = AnyOp[]> =
  | {
      /** Its revision is the store's after the transaction (the revision of its writes, if any). */
      header: ResponseHeader;
      /** Every compare held: the `then` operations ran. */
      succeeded: true;
      /** What each `then` operation returned, in order. */
      responses: OpResults<Then>;
    }
  | {
      /** Its revision is the store's after the transaction (the revision of its writes, if any). */
      header: ResponseHeader;
      /** A compare failed: the `else` operations ran. */
      succeeded: false;
      /** What each `else` operation returned, in order. */
      responses: OpResults<Else>;
    };

/** Operations for `txn().then(...)` / `.else(...)`. */
export const op = {
  /** A read of a key, range or prefix, as `etcd.range()`; it sees the writes of the operations before it. */
  get: (query: Bytes | RangeQuery): Op<RangeResult> =>
    new Op(
      false,
      (ks) => ({ request_range: rangeRequest(ks, query) }),
      (ks, w) => decodeRange(ks, w.response_range ?? {}),
    ),
  /** A write, as `etcd.put()`. */
  put: (key: Bytes, value: Bytes | undefined, options?: PutOptions): Op<PutResult> =>
    new Op(
      true,
      (ks) => ({ request_put: putRequest(ks, key, value, options) }),
      (ks, w) => decodePut(ks, w.response_put ?? {}),
    ),
  /** A delete of a key, range or prefix, as `etcd.delete()`. */
  delete: (query: Bytes | DeleteQuery): Op<DeleteResult> =>
    new Op(
      true,
      (ks) => ({ request_delete_range: deleteRequest(ks, query) }),
      (ks, w) => decodeDelete(ks, w.response_delete_range ?? {}),
    ),
  /**
   * A nested transaction with compares and branches of its own (`otherwise` runs when one of its compares
   * fails), all within the outer transaction's one revision. Its result is a {@link TxnResult}.
   */
  txn: <const Then extends readonly AnyOp[], const Else extends readonly AnyOp[] = []>(
    compares: readonly Compare[],
    then: Then,
    otherwise?: Else,
  ): Op<TxnResult<Then, Else>> => {
    const elseOps = (otherwise ?? []) as unknown as Else;
    return new Op(
      [...then, ...elseOps].some((o) => o.writes),
      (ks) => ({ request_txn: txnRequest(ks, compares, then, elseOps) }),
      (ks, w) => decodeTxn(ks, w.response_txn ?? {}, then, elseOps),
    );
  },
};

/** The gateway call that sends a transaction request already serialised (`json`). */
export function txnCall(json: string, retry: RetryPolicy, writes: boolean): Unary<WireTxn> {
  return { path: "/v3/kv/txn", body: undefined, json, schema: txnResponse, accept: acceptsTxn, retry, writes };
}

export function txnRequest(
  keyspace: Keyspace,
  compares: readonly Compare[],
  then: readonly AnyOp[],
  otherwise: readonly AnyOp[],
): Record<string, unknown> {
  for (const item of [...compares]) {
    if (!(item instanceof Compare)) throw invalidArgument("txn conditions must be made with cmp.*()");
  }
  for (const item of [...then, ...otherwise]) {
    if (!(item instanceof Op)) throw invalidArgument("txn operations must be made with op.*()");
  }
  return {
    compare: wireList(keyspace, compares),
    success: wireList(keyspace, then),
    failure: wireList(keyspace, otherwise),
  };
}

/** A list of the request, or nothing for an empty one: protojson leaves empty lists out too (see RESULT). */
function wireList(
  keyspace: Keyspace,
  items: readonly (Compare | Op<unknown>)[],
): Record<string, unknown>[] | undefined {
  return items.length === 0 ? undefined : items.map((item) => item.toWire(keyspace));
}

export function decodeTxn<Then extends readonly AnyOp[], Else extends readonly AnyOp[]>(
  keyspace: Keyspace,
  wire: WireTxn,
  then: Then,
  otherwise: Else,
): TxnResult<Then, Else> {
  const succeeded = wire.succeeded ?? false;
  const ops: readonly AnyOp[] = succeeded ? then : otherwise;
  const responses = ops.map((o, i) => o.decode(keyspace, wire.responses?.[i]));
  return { header: decodeHeader(wire.header), succeeded, responses } as TxnResult<Then, Else>;
}
