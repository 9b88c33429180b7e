/**
 * The request messages the mock decodes, as etcd's .proto files declare them (field order, numbers, kinds).
 * One description drives both gateway dialects' decoders and the protobuf size that etcd's request limits
 * measure. Order matters: 3.4's jsonpb decodes fields in declaration order, oneof members last.
 */

export type ScalarKind = "int64" | "uint64" | "bool" | "bytes" | "string" | "enum";

export interface EnumDesc {
  /** The Go type, as 3.4's errors name it. */
  readonly goType: string;
  readonly values: readonly string[];
}

export interface FieldDesc {
  readonly name: string;
  /** protojson's JSON name (lowerCamel), also accepted by 3.4. */
  readonly json: string;
  readonly number: number;
  readonly kind: ScalarKind | "message";
  readonly repeated: boolean;
  /** Full name of the oneof this field belongs to. */
  readonly oneof: string | undefined;
  readonly enumType: EnumDesc | undefined;
  readonly message: (() => MessageDesc) | undefined;
}

export interface MessageDesc {
  readonly name: string;
  readonly fields: readonly FieldDesc[];
}

function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

interface FieldOptions {
  repeated?: boolean;
  oneof?: string;
  enumType?: EnumDesc;
  message?: () => MessageDesc;
}

function field(name: string, number: number, kind: FieldDesc["kind"], o: FieldOptions = {}): FieldDesc {
  return {
    name,
    json: camel(name),
    number,
    kind,
    repeated: o.repeated ?? false,
    oneof: o.oneof,
    enumType: o.enumType,
    message: o.message,
  };
}

function enumOf(goType: string, values: readonly string[]): EnumDesc {
  return { goType, values };
}

const msg = (name: string, fields: FieldDesc[]): MessageDesc => ({ name, fields });

export const SORT_ORDER = enumOf("etcdserverpb.RangeRequest_SortOrder", ["NONE", "ASCEND", "DESCEND"]);
export const SORT_TARGET = enumOf("etcdserverpb.RangeRequest_SortTarget", ["KEY", "VERSION", "CREATE", "MOD", "VALUE"]);
export const COMPARE_RESULT = enumOf("etcdserverpb.Compare_CompareResult", ["EQUAL", "GREATER", "LESS", "NOT_EQUAL"]);
export const COMPARE_TARGET = enumOf("etcdserverpb.Compare_CompareTarget", [
  "VERSION",
  "CREATE",
  "MOD",
  "VALUE",
  "LEASE",
]);
export const FILTER_TYPE = enumOf("etcdserverpb.WatchCreateRequest_FilterType", ["NOPUT", "NODELETE"]);

export const RangeRequest = msg("etcdserverpb.RangeRequest", [
  field("key", 1, "bytes"),
  field("range_end", 2, "bytes"),
  field("limit", 3, "int64"),
  field("revision", 4, "int64"),
  field("sort_order", 5, "enum", { enumType: SORT_ORDER }),
  field("sort_target", 6, "enum", { enumType: SORT_TARGET }),
  field("serializable", 7, "bool"),
  field("keys_only", 8, "bool"),
  field("count_only", 9, "bool"),
  field("min_mod_revision", 10, "int64"),
  field("max_mod_revision", 11, "int64"),
  field("min_create_revision", 12, "int64"),
  field("max_create_revision", 13, "int64"),
]);

export const PutRequest = msg("etcdserverpb.PutRequest", [
  field("key", 1, "bytes"),
  field("value", 2, "bytes"),
  field("lease", 3, "int64"),
  field("prev_kv", 4, "bool"),
  field("ignore_value", 5, "bool"),
  field("ignore_lease", 6, "bool"),
]);

export const DeleteRangeRequest = msg("etcdserverpb.DeleteRangeRequest", [
  field("key", 1, "bytes"),
  field("range_end", 2, "bytes"),
  field("prev_kv", 3, "bool"),
]);

const TARGET_UNION = "etcdserverpb.Compare.target_union";
export const Compare = msg("etcdserverpb.Compare", [
  field("result", 1, "enum", { enumType: COMPARE_RESULT }),
  field("target", 2, "enum", { enumType: COMPARE_TARGET }),
  field("key", 3, "bytes"),
  field("version", 4, "int64", { oneof: TARGET_UNION }),
  field("create_revision", 5, "int64", { oneof: TARGET_UNION }),
  field("mod_revision", 6, "int64", { oneof: TARGET_UNION }),
  field("value", 7, "bytes", { oneof: TARGET_UNION }),
  field("lease", 8, "int64", { oneof: TARGET_UNION }),
  field("range_end", 64, "bytes"),
]);

const REQUEST = "etcdserverpb.RequestOp.request";
export const RequestOp: MessageDesc = msg("etcdserverpb.RequestOp", [
  field("request_range", 1, "message", { oneof: REQUEST, message: () => RangeRequest }),
  field("request_put", 2, "message", { oneof: REQUEST, message: () => PutRequest }),
  field("request_delete_range", 3, "message", { oneof: REQUEST, message: () => DeleteRangeRequest }),
  field("request_txn", 4, "message", { oneof: REQUEST, message: () => TxnRequest }),
]);

export const TxnRequest: MessageDesc = msg("etcdserverpb.TxnRequest", [
  field("compare", 1, "message", { repeated: true, message: () => Compare }),
  field("success", 2, "message", { repeated: true, message: () => RequestOp }),
  field("failure", 3, "message", { repeated: true, message: () => RequestOp }),
]);

export const CompactionRequest = msg("etcdserverpb.CompactionRequest", [
  field("revision", 1, "int64"),
  field("physical", 2, "bool"),
]);
export const LeaseGrantRequest = msg("etcdserverpb.LeaseGrantRequest", [
  field("TTL", 1, "int64"),
  field("ID", 2, "int64"),
]);
export const LeaseRevokeRequest = msg("etcdserverpb.LeaseRevokeRequest", [field("ID", 1, "int64")]);
export const LeaseKeepAliveRequest = msg("etcdserverpb.LeaseKeepAliveRequest", [field("ID", 1, "int64")]);
export const LeaseTimeToLiveRequest = msg("etcdserverpb.LeaseTimeToLiveRequest", [
  field("ID", 1, "int64"),
  field("keys", 2, "bool"),
]);
export const Empty = msg("etcdserverpb.Empty", []);
export const AuthenticateRequest = msg("etcdserverpb.AuthenticateRequest", [
  field("name", 1, "string"),
  field("password", 2, "string"),
]);
/** 3.5 adds `linearizable` (meaningless with one member); 3.4 declares no field, so ignores it. */
export const MemberListRequest = msg("etcdserverpb.MemberListRequest", [field("linearizable", 1, "bool")]);
export const MemberListRequest34 = msg("etcdserverpb.MemberListRequest", []);

export const WatchCreateRequest = msg("etcdserverpb.WatchCreateRequest", [
  field("key", 1, "bytes"),
  field("range_end", 2, "bytes"),
  field("start_revision", 3, "int64"),
  field("progress_notify", 4, "bool"),
  field("filters", 5, "enum", { repeated: true, enumType: FILTER_TYPE }),
  field("prev_kv", 6, "bool"),
  field("watch_id", 7, "int64"),
  field("fragment", 8, "bool"),
]);
export const WatchCancelRequest = msg("etcdserverpb.WatchCancelRequest", [field("watch_id", 1, "int64")]);
export const WatchProgressRequest = msg("etcdserverpb.WatchProgressRequest", []);
const REQUEST_UNION = "etcdserverpb.WatchRequest.request_union";
export const WatchRequest = msg("etcdserverpb.WatchRequest", [
  field("create_request", 1, "message", { oneof: REQUEST_UNION, message: () => WatchCreateRequest }),
  field("cancel_request", 2, "message", { oneof: REQUEST_UNION, message: () => WatchCancelRequest }),
  field("progress_request", 3, "message", { oneof: REQUEST_UNION, message: () => WatchProgressRequest }),
]);

export const LockRequest = msg("v3lockpb.LockRequest", [field("name", 1, "bytes"), field("lease", 2, "int64")]);
export const UnlockRequest = msg("v3lockpb.UnlockRequest", [field("key", 1, "bytes")]);

export const LeaderKey = msg("v3electionpb.LeaderKey", [
  field("name", 1, "bytes"),
  field("key", 2, "bytes"),
  field("rev", 3, "int64"),
  field("lease", 4, "int64"),
]);
export const CampaignRequest = msg("v3electionpb.CampaignRequest", [
  field("name", 1, "bytes"),
  field("lease", 2, "int64"),
  field("value", 3, "bytes"),
]);
export const ProclaimRequest = msg("v3electionpb.ProclaimRequest", [
  field("leader", 1, "message", { message: () => LeaderKey }),
  field("value", 2, "bytes"),
]);
export const LeaderRequest = msg("v3electionpb.LeaderRequest", [field("name", 1, "bytes")]);
export const ResignRequest = msg("v3electionpb.ResignRequest", [
  field("leader", 1, "message", { message: () => LeaderKey }),
]);
