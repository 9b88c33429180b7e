import * as z from "zod/mini";

/**
 * Response shapes of etcd's gRPC-gateway (protojson), field names as in the apispec. Every field is
 * optional because protojson omits zero values; int64 arrive as strings but numbers are accepted too.
 */
const int64 = z.optional(z.union([z.string(), z.number()]));
const bytes = z.optional(z.string());
const bool = z.optional(z.boolean());

export const header = z.optional(
  z.object({ cluster_id: int64, member_id: int64, revision: int64, raft_term: int64 }),
);

export const keyValue = z.object({
  key: bytes,
  create_revision: int64,
  mod_revision: int64,
  version: int64,
  value: bytes,
  lease: int64,
});

export const rangeResponse = z.object({
  header,
  kvs: z.optional(z.array(keyValue)),
  more: bool,
  count: int64,
});

export const putResponse = z.object({ header, prev_kv: z.optional(keyValue) });

export const deleteRangeResponse = z.object({
  header,
  deleted: int64,
  prev_kvs: z.optional(z.array(keyValue)),
});

export const responseOp = z.object({
  response_range: z.optional(rangeResponse),
  response_put: z.optional(putResponse),
  response_delete_range: z.optional(deleteRangeResponse),
  get response_txn() {
    return z.optional(txnResponse);
  },
});

export const txnResponse = z.object({
  header,
  succeeded: bool,
  get responses() {
    return z.optional(z.array(responseOp));
  },
});

export const headerOnly = z.object({ header });

export const leaseGrant = z.object({ header, ID: int64, TTL: int64, error: z.optional(z.string()) });

export const leaseKeepAlive = z.object({ header, ID: int64, TTL: int64 });

export const leaseTimeToLive = z.object({
  header,
  ID: int64,
  TTL: int64,
  grantedTTL: int64,
  keys: z.optional(z.array(z.string())),
});

export const leaseLeases = z.object({ header, leases: z.optional(z.array(z.object({ ID: int64 }))) });

export const authenticate = z.object({ header, token: z.optional(z.string()) });

export const event = z.object({
  type: z.optional(z.union([z.string(), z.number()])),
  kv: z.optional(keyValue),
  prev_kv: z.optional(keyValue),
});

export const watchResponse = z.object({
  header,
  watch_id: int64,
  created: bool,
  canceled: bool,
  compact_revision: int64,
  cancel_reason: z.optional(z.string()),
  fragment: bool,
  events: z.optional(z.array(event)),
});

/** The error body of a unary call: 3.4/3.5 send `error` and `message`, 3.6 only `message`. */
export const unaryError = z.object({
  code: z.optional(z.number()),
  message: z.optional(z.string()),
  error: z.optional(z.string()),
});

/** The error line of a stream: 3.4/3.5 `{grpc_code, http_code, message, http_status}`, 3.6 `{code, message}`. */
export const streamError = z.object({
  grpc_code: z.optional(z.number()),
  code: z.optional(z.number()),
  http_code: z.optional(z.number()),
  message: z.optional(z.string()),
  http_status: z.optional(z.string()),
});

export type WireHeader = z.infer<typeof header>;
export type WireKeyValue = z.infer<typeof keyValue>;
export type WireRange = z.infer<typeof rangeResponse>;
export type WirePut = z.infer<typeof putResponse>;
export type WireDeleteRange = z.infer<typeof deleteRangeResponse>;
export type WireTxn = z.infer<typeof txnResponse>;
export type WireResponseOp = z.infer<typeof responseOp>;
export type WireWatchResponse = z.infer<typeof watchResponse>;
export type WireStreamError = z.infer<typeof streamError>;
export type Schema<T> = z.ZodMiniType<T>;
