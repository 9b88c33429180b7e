import * as z from "zod/mini";

/**
 * Every response shape of etcd's gRPC-gateway (protojson), in one place, with field names as in the
 * apispec. protojson omits zero values, so most fields may be absent; what etcd always sends is required,
 * so that an empty or truncated answer (`{}` from a proxy, say) is BAD_RESPONSE rather than a success with
 * zeros: a top-level response's header and its revision, a key-value's key, an event's key-value, a lease
 * ID. int64 fields arrive as decimal strings (numbers are accepted as well); the codec checks their form.
 */

const int64 = z.optional(z.union([z.string(), z.number()]));
const requiredInt64 = z.union([z.string(), z.number()]);
const text = z.optional(z.string());
const flag = z.optional(z.boolean());
const count = z.optional(z.number());

/** Every top-level answer's header: etcd always sends all four fields, the store's revision among them. */
export const header = z.object({ cluster_id: int64, member_id: int64, revision: requiredInt64, raft_term: int64 });

/** A header whose fields may all be absent. */
const partialHeader = z.object({ cluster_id: int64, member_id: int64, revision: int64, raft_term: int64 });

/** Inside a txn a response's header has only its revision, and a nested txn's header is empty. */
const nestedHeader = z.optional(partialHeader);

export const keyValue = z.object({
  key: z.string(),
  create_revision: int64,
  mod_revision: int64,
  version: int64,
  value: text,
  lease: int64,
});

const rangeFields = { kvs: z.optional(z.array(keyValue)), more: flag, count: int64 };
const putFields = { prev_kv: z.optional(keyValue) };
const deleteFields = { deleted: int64, prev_kvs: z.optional(z.array(keyValue)) };

export const rangeResponse = z.object({ header, ...rangeFields });
export const putResponse = z.object({ header, ...putFields });
export const deleteRangeResponse = z.object({ header, ...deleteFields });

const nestedRange = z.object({ header: nestedHeader, ...rangeFields });
const nestedPut = z.object({ header: nestedHeader, ...putFields });
const nestedDelete = z.object({ header: nestedHeader, ...deleteFields });

export interface WireResponseOp {
  response_range?: WireRange | undefined;
  response_put?: WirePut | undefined;
  response_delete_range?: WireDeleteRange | undefined;
  response_txn?: WireTxn | undefined;
}

export interface WireTxn {
  header?: WireHeader;
  succeeded?: boolean | undefined;
  responses?: WireResponseOp[] | undefined;
}

// A txn response holds txn responses: the recursion needs a declared type, and a getter (zod reads it once,
// at the first parse) to refer to the txn schema defined below.
const responseOp: z.ZodMiniType<WireResponseOp> = z.object({
  response_range: z.optional(nestedRange),
  response_put: z.optional(nestedPut),
  response_delete_range: z.optional(nestedDelete),
  get response_txn() {
    return z.optional(nestedTxn);
  },
});

const responses = z.optional(z.array(responseOp));
const nestedTxn: z.ZodMiniType<WireTxn> = z.object({ header: nestedHeader, succeeded: flag, responses });
export const txnResponse: z.ZodMiniType<WireTxn> = z.object({ header, succeeded: flag, responses });

export const headerOnly = z.object({ header });

export const leaseGrant = z.object({ header, ID: requiredInt64, TTL: requiredInt64, error: text });

/** `TTL` is absent when the lease no longer exists. */
export const leaseKeepAlive = z.object({ header, ID: requiredInt64, TTL: int64 });

/** `TTL` is -1 when the lease does not exist, and absent (0) in its last second. */
export const leaseTimeToLive = z.object({
  header,
  ID: requiredInt64,
  TTL: int64,
  grantedTTL: int64,
  keys: z.optional(z.array(z.string())),
});

export const leaseLeases = z.object({ header, leases: z.optional(z.array(z.object({ ID: requiredInt64 }))) });

export const authenticate = z.object({ header, token: text });

export const event = z.object({
  type: z.optional(z.union([z.string(), z.number()])),
  kv: keyValue,
  prev_kv: z.optional(keyValue),
});

const watchFields = {
  watch_id: int64,
  created: flag,
  compact_revision: int64,
  cancel_reason: text,
  fragment: flag,
  events: z.optional(z.array(event)),
};

/**
 * One watch message. Only a cancellation may lack the header's revision (a compaction's does): a `created`
 * without one would restart the watch from revision 1, and events or progress without one cannot resume.
 */
export const watchResponse = z.union([
  z.object({ header, canceled: flag, ...watchFields }),
  z.object({ header: partialHeader, canceled: z.literal(true), ...watchFields }),
]);

/** The error body of a unary call: 3.4/3.5 send `error` and `message`, 3.6 only `message`. */
export const unaryError = z.object({ code: count, message: text, error: text });

/** The error line of a stream: 3.4/3.5 `{grpc_code, http_code, message, http_status}`, 3.6 `{code, message}`. */
export const streamError = z.object({
  grpc_code: count,
  code: count,
  http_code: count,
  message: text,
  http_status: text,
});

/** A response schema as the transport uses it. */
export type Schema<T> = z.ZodMiniType<T>;

/** A header as the codec reads it: a top-level one, or a txn sub-response's partial (or absent) one. */
export type WireHeader = z.output<typeof nestedHeader>;
export type WireKeyValue = z.output<typeof keyValue>;
export type WireRange = z.output<typeof nestedRange>;
export type WirePut = z.output<typeof nestedPut>;
export type WireDeleteRange = z.output<typeof nestedDelete>;
export type WireWatchResponse = z.output<typeof watchResponse>;
export type WireStreamError = z.output<typeof streamError>;
