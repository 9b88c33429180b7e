import * as z from "zod/mini";

/**
 * Every response shape of etcd's gRPC-gateway (protojson), in one place, with field names as in the
 * apispec. Every field may be absent because protojson omits zero values; int64 fields arrive as decimal strings (numbers are accepted as well) and are converted by the codec.
 */

const int64 = z.optional(z.union([z.string(), z.number()]));
const text = z.optional(z.string());
const flag = z.optional(z.boolean());
const count = z.optional(z.number());

export const header = z.optional(z.object({ cluster_id: int64, member_id: int64, revision: int64, raft_term: int64 }));

export const keyValue = z.object({
  key: text,
  create_revision: int64,
  mod_revision: int64,
  version: int64,
  value: text,
  lease: int64,
});

export const rangeResponse = z.object({ header, kvs: z.optional(z.array(keyValue)), more: flag, count: int64 });

export const putResponse = z.object({ header, prev_kv: z.optional(keyValue) });

export const deleteRangeResponse = z.object({ header, deleted: int64, prev_kvs: z.optional(z.array(keyValue)) });

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

// A txn response holds txn responses: the recursion needs a declared type.
const responseOp: z.ZodMiniType<WireResponseOp> = z.lazy(() =>
  z.object({
    response_range: z.optional(rangeResponse),
    response_put: z.optional(putResponse),
    response_delete_range: z.optional(deleteRangeResponse),
    response_txn: z.optional(txnResponse),
  }),
);

export const txnResponse: z.ZodMiniType<WireTxn> = z.object({ header, succeeded: flag, responses: z.optional(z.array(responseOp)) });

export const headerOnly = z.object({ header });

export const leaseGrant = z.object({ header, ID: int64, TTL: int64, error: text });

export const leaseKeepAlive = z.object({ header, ID: int64, TTL: int64 });

export const leaseTimeToLive = z.object({ header, ID: int64, TTL: int64, grantedTTL: int64, keys: z.optional(z.array(z.string())) });

export const leaseLeases = z.object({ header, leases: z.optional(z.array(z.object({ ID: int64 }))) });

export const authenticate = z.object({ header, token: text });

export const event = z.object({ type: z.optional(z.union([z.string(), z.number()])), kv: z.optional(keyValue), prev_kv: z.optional(keyValue) });

export const watchResponse = z.object({
  header,
  watch_id: int64,
  created: flag,
  canceled: flag,
  compact_revision: int64,
  cancel_reason: text,
  fragment: flag,
  events: z.optional(z.array(event)),
});

/** The error body of a unary call: 3.4/3.5 send `error` and `message`, 3.6 only `message`. */
export const unaryError = z.object({ code: count, message: text, error: text });

/** The error line of a stream: 3.4/3.5 `{grpc_code, http_code, message, http_status}`, 3.6 `{code, message}`. */
export const streamError = z.object({ grpc_code: count, code: count, http_code: count, message: text, http_status: text });

/** A response schema as the transport uses it. */
export type Schema<T> = z.ZodMiniType<T>;

export type WireHeader = z.output<typeof header>;
export type WireKeyValue = z.output<typeof keyValue>;
export type WireRange = z.output<typeof rangeResponse>;
export type WirePut = z.output<typeof putResponse>;
export type WireDeleteRange = z.output<typeof deleteRangeResponse>;
export type WireWatchResponse = z.output<typeof watchResponse>;
export type WireStreamError = z.output<typeof streamError>;
