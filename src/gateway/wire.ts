import { array, boolean, type Checker, int64, lazy, number, object, optional, string } from "./schema.js";

/**
 * Response shapes of etcd's gRPC-gateway (protojson), field names as in the apispec. Every field is
 * optional because protojson omits zero values; int64 arrive as strings but numbers are accepted too.
 */
type Int64 = string | number | undefined;

export interface WireKeyValue {
  key?: string | undefined;
  create_revision?: Int64;
  mod_revision?: Int64;
  version?: Int64;
  value?: string | undefined;
  lease?: Int64;
}

export type WireHeader =
  | { cluster_id?: Int64; member_id?: Int64; revision?: Int64; raft_term?: Int64 }
  | undefined;

export interface WireRange {
  header?: WireHeader;
  kvs?: WireKeyValue[] | undefined;
  more?: boolean | undefined;
  count?: Int64;
}

export interface WirePut {
  header?: WireHeader;
  prev_kv?: WireKeyValue | undefined;
}

export interface WireDeleteRange {
  header?: WireHeader;
  deleted?: Int64;
  prev_kvs?: WireKeyValue[] | undefined;
}

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

export const header: Checker<WireHeader> = optional(
  object({ cluster_id: int64, member_id: int64, revision: int64, raft_term: int64 }),
);

export const keyValue: Checker<WireKeyValue> = object({
  key: string,
  create_revision: int64,
  mod_revision: int64,
  version: int64,
  value: string,
  lease: int64,
});

export const rangeResponse: Checker<WireRange> = object({ header, kvs: array(keyValue), more: boolean, count: int64 });

export const putResponse: Checker<WirePut> = object({ header, prev_kv: optional(keyValue) });

export const deleteRangeResponse: Checker<WireDeleteRange> = object({ header, deleted: int64, prev_kvs: array(keyValue) });

export const txnResponse: Checker<WireTxn> = object({
  header,
  succeeded: boolean,
  responses: array(
    lazy(
      (): Checker<WireResponseOp> =>
        object({
          response_range: optional(rangeResponse),
          response_put: optional(putResponse),
          response_delete_range: optional(deleteRangeResponse),
          response_txn: optional(txnResponse),
        }),
    ),
  ),
});

export const headerOnly = object({ header });

export const leaseGrant = object({ header, ID: int64, TTL: int64, error: string });

export const leaseKeepAlive = object({ header, ID: int64, TTL: int64 });

export const leaseTimeToLive = object({ header, ID: int64, TTL: int64, grantedTTL: int64, keys: array(string) });

export const leaseLeases = object({ header, leases: array(object({ ID: int64 })) });

export const authenticate = object({ header, token: string });

const eventType: Checker<string | number | undefined> = optional((value, path) =>
  typeof value === "string" || typeof value === "number" ? value : string(value, path),
);

export const event = object({ type: eventType, kv: optional(keyValue), prev_kv: optional(keyValue) });

export const watchResponse = object({
  header,
  watch_id: int64,
  created: boolean,
  canceled: boolean,
  compact_revision: int64,
  cancel_reason: string,
  fragment: boolean,
  events: array(event),
});

/** The error body of a unary call: 3.4/3.5 send `error` and `message`, 3.6 only `message`. */
export const unaryError = object({ code: number, message: string, error: string });

/** The error line of a stream: 3.4/3.5 `{grpc_code, http_code, message, http_status}`, 3.6 `{code, message}`. */
export const streamError = object({
  grpc_code: number,
  code: number,
  http_code: number,
  message: string,
  http_status: string,
});

export type WireWatchResponse = ReturnType<typeof watchResponse>;
export type WireStreamError = ReturnType<typeof streamError>;
export type { Schema } from "./schema.js";
