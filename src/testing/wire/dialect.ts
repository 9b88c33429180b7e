import { decodeJsonpb } from "./decode-jsonpb.js";
import { decodeProtojson } from "./decode-protojson.js";
import type { JsonNode } from "./json-scan.js";
import type { Msg } from "./message.js";
import { MemberListRequest, MemberListRequest34, type MessageDesc } from "./schema.js";

/** The etcd minor versions whose gateway the mock can speak. */
export type EtcdVersion = "3.4" | "3.5" | "3.6" | "3.7";

/** RBAC checks that came with security fixes, each from the releases named. */
export interface Rbac {
  /** A lease's time-to-live with its keys needs read on each key (3.4.26 and 3.5.9; CVE-2023-32082). */
  readonly leaseKeysRead: boolean;
  /**
   * Every lease call needs a token; a renewal needs write on every key of its lease, a listing read on every key
   * of every lease, admins excepted (3.5.28 and 3.6.9; CVE-2026-33413).
   */
  readonly leaseCalls: boolean;
  /**
   * A put nested in a txn is checked as a plain put is (the keys of its lease, its prev_kv), and a nested txn is
   * checked at all (3.5.30 and 3.6.11; CVE-2026-44283). Before, only a nested put's key was.
   */
  readonly nestedTxns: boolean;
}

/**
 * What differs between the etcd versions the mock speaks: 3.4.23 (grpc-gateway v1, golang/protobuf jsonpb;
 * Debian's build), 3.5.16, and 3.6.16 and 3.7.3 (built from etcd's Go modules), each held to a real member.
 * Everything that is the same in all of them lives elsewhere.
 */
export interface Dialect {
  readonly version: EtcdVersion;
  /** GET /version: 3.6 adds the storage version. */
  readonly versions: { etcdserver: string; etcdcluster: string; storage?: string };
  /** GET /health: 3.5 adds an empty `reason`. */
  readonly health: Readonly<Record<string, string>>;
  decode(text: Uint8Array, node: JsonNode, type: MessageDesc): Msg;
  httpStatus(grpcCode: number): number;
  /** A unary call's error body. */
  errorBody(grpcCode: number, message: string): Record<string, unknown>;
  /**
   * A stream's error line as the gateway writes it: `{"error":…}`, ended by a newline from 3.5 on; 3.4's gateway
   * writes no delimiter after an error, the last thing on the stream.
   */
  streamErrorLine(grpcCode: number, message: string): string;
  /** 3.4 answers a streaming call whose first message does not decode with 500 code 2; 3.5 ends the requests there. */
  readonly firstStreamMessageErrorIsFatal: boolean;
  /** 3.4 answers every progress_request; 3.5 only when the stream has watchers and all are synced. */
  readonly progressNeedsSyncedWatchers: boolean;
  /** 3.6.2: no progress (asked for or periodic) while a watcher's start revision is still ahead of the store. */
  readonly progressWaitsForFutureStarts: boolean;
  /** 3.6.6: a watch from a negative revision is canceled as compacted at once (etcd afeab20ac). */
  readonly refusesNegativeWatchStart: boolean;
  /** Unknown path and wrong method: 3.4 answers net/http's plain text, 3.5 JSON (405 as 501). */
  readonly notFound: { status: number; json: boolean; body: unknown };
  readonly methodNotAllowed: { status: number; json: boolean; body: unknown };
  /** Gateway paths this version does not have (the mock serves the union of all versions' paths). */
  readonly absentPaths: readonly string[];
  /** /v3/cluster/member/list's request: 3.5 adds `linearizable`. */
  readonly memberListRequest: MessageDesc;
  /** Fields /v3/maintenance/status adds after `isLearner` (3.6: storage version, quota, downgrade). */
  readonly statusExtras: Readonly<Record<string, unknown>>;
  /** 3.5 keeps a tombstone at exactly the compact revision (a watch from there sees the delete); 3.4 drops it. */
  readonly keepsTombstoneAtCompactRevision: boolean;
  /** v3lock: 3.5 reads the waiter's own key again after its wait ("mutex: session is expired" when gone). */
  readonly lockRechecksOwnKey: boolean;
  /** `Authorization: Bearer <token>` is read as the token (3.5.32, 3.6.13, 3.7.0); before, as a bad token. */
  readonly bearer: boolean;
  /** /v3/auth/status with auth on is root's alone in 3.5 and 3.6 (3.7: anyone's). */
  readonly authStatusNeedsAdmin: boolean;
  /** 3.6 checks a txn's puts and ranges in one pass in order (3.5: all puts, then all ranges). */
  readonly txnChecksInOrder: boolean;
  /** 3.6 refuses a range whose sort order or target its enums do not name ("invalid sort option"). */
  readonly checksSortOptions: boolean;
  /** 3.7 checks a txn's put for its lease before its key, as a plain put always was. */
  readonly txnPutChecksLeaseFirst: boolean;
  /**
   * 3.7 (3.7.0 to 3.7.3 at least) answers a `keys_only` range not sorted by value from its index alone, which
   * has no leases: its keys come without `lease`.
   */
  readonly keysOnlyDropsLease: boolean;
  /** What the server logs as it panics on a write txn whose apply fails (kv.ts says which txn does that). */
  readonly txnPanic: string;
  readonly rbac: Rbac;
}

/** grpc-gateway's HTTPStatusFromCode; FailedPrecondition (9) and Canceled (1) differ between v1 (Debian 3.4) and v2. */
function statusMap(failedPrecondition: number, canceled: number): (code: number) => number {
  const map: Record<number, number> = {
    0: 200,
    1: canceled,
    2: 500,
    3: 400,
    4: 504,
    5: 404,
    6: 409,
    7: 403,
    8: 429,
    9: failedPrecondition,
    10: 409,
    11: 400,
    12: 501,
    13: 500,
    14: 503,
    15: 500,
    16: 401,
  };
  return (code) => map[code] ?? 500;
}

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  408: "Request Timeout",
  409: "Conflict",
  412: "Precondition Failed",
  429: "Too Many Requests",
  500: "Internal Server Error",
  501: "Not Implemented",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

const status34 = statusMap(412, 408);
const status35 = statusMap(400, 499);

const d34: Dialect = {
  version: "3.4",
  versions: { etcdserver: "3.4.23", etcdcluster: "3.4.0" },
  health: { health: "true" },
  decode: decodeJsonpb,
  httpStatus: status34,
  errorBody: (code, message) => ({ error: message, message, code }),
  streamErrorLine: (code, message) => {
    const http = status34(code);
    return JSON.stringify({
      error: { grpc_code: code, http_code: http, message, http_status: STATUS_TEXT[http] ?? "" },
    });
  },
  firstStreamMessageErrorIsFatal: true,
  progressNeedsSyncedWatchers: false,
  progressWaitsForFutureStarts: false,
  refusesNegativeWatchStart: false,
  notFound: { status: 404, json: false, body: "Not Found" },
  methodNotAllowed: { status: 405, json: false, body: "Method Not Allowed" },
  absentPaths: ["/v3/auth/status"],
  memberListRequest: MemberListRequest34,
  statusExtras: {},
  keepsTombstoneAtCompactRevision: false,
  lockRechecksOwnKey: false,
  bearer: false,
  checksSortOptions: false,
  txnChecksInOrder: false,
  authStatusNeedsAdmin: true,
  txnPutChecksLeaseFirst: false,
  keysOnlyDropsLease: false,
  txnPanic: "unexpected error during txn: etcdserver: key not found",
  rbac: { leaseKeysRead: false, leaseCalls: false, nestedTxns: false },
};

const d35: Dialect = {
  ...d34,
  version: "3.5",
  versions: { etcdserver: "3.5.16", etcdcluster: "3.5.0" },
  health: { health: "true", reason: "" },
  decode: decodeProtojson,
  httpStatus: status35,
  errorBody: (code, message) => ({ code, message }),
  streamErrorLine: (code, message) => `${JSON.stringify({ error: { code, message } })}\n`,
  firstStreamMessageErrorIsFatal: false,
  progressNeedsSyncedWatchers: true,
  notFound: { status: 404, json: true, body: { code: 5, message: "Not Found" } },
  methodNotAllowed: { status: 501, json: true, body: { code: 12, message: "Method Not Allowed" } },
  absentPaths: [],
  memberListRequest: MemberListRequest,
  keepsTombstoneAtCompactRevision: true,
  lockRechecksOwnKey: true,
  txnPanic: "unexpected error during txn with writes: applyTxn: failed Put: etcdserver: key not found",
  rbac: { leaseKeysRead: true, leaseCalls: false, nestedTxns: false },
};

/**
 * 3.6 keeps 3.5's JSON: grpc-gateway v2's google.rpc.Status errors, marshalled without unpopulated fields, are
 * 3.5's `{code, message}` (`details` only when a status has some, and etcd's have none).
 */
const d36: Dialect = {
  ...d35,
  version: "3.6",
  versions: { etcdserver: "3.6.16", etcdcluster: "3.6.0", storage: "3.6.0" },
  progressWaitsForFutureStarts: true,
  refusesNegativeWatchStart: true,
  statusExtras: { storageVersion: "3.6.0", dbSizeQuota: "2147483648", downgradeInfo: {} },
  bearer: true,
  checksSortOptions: true,
  txnChecksInOrder: true,
  rbac: { leaseKeysRead: true, leaseCalls: true, nestedTxns: true },
};

/**
 * 3.7 keeps 3.6's JSON (its encoder may put a space after a comma, which no JSON reader sees). A txn's put is
 * checked as a plain put (lease, then key), and no longer checks its key again as it applies, so Go itself
 * panics there. A `keys_only` read shows no lease.
 */
const d37: Dialect = {
  ...d36,
  version: "3.7",
  versions: { etcdserver: "3.7.3", etcdcluster: "3.7.0", storage: "3.7.0" },
  statusExtras: { ...d36.statusExtras, storageVersion: "3.7.0" },
  txnPutChecksLeaseFirst: true,
  keysOnlyDropsLease: true,
  authStatusNeedsAdmin: false,
  txnPanic: "runtime error: index out of range [0] with length 0",
};

export const DIALECTS: Record<EtcdVersion, Dialect> = { "3.4": d34, "3.5": d35, "3.6": d36, "3.7": d37 };

/** Every version the mock speaks, oldest first. */
export const ETCD_VERSIONS = Object.keys(DIALECTS) as EtcdVersion[];
