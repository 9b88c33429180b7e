import { decodeJsonpb } from "./decode-jsonpb.js";
import { decodeProtojson } from "./decode-protojson.js";
import type { JsonNode } from "./json-scan.js";
import type { Msg } from "./message.js";
import type { MessageDesc } from "./schema.js";

/** The etcd minor versions whose gateway the mock can speak. */
export type EtcdVersion = "3.4" | "3.5";

/**
 * What differs on the wire between etcd 3.4.23's gateway (grpc-gateway v1, golang/protobuf jsonpb; Debian's
 * build) and 3.5.16's (grpc-gateway v2, protojson), as observed on both. Everything the server itself decides
 * is the same in both and lives elsewhere.
 */
export interface Dialect {
  readonly version: EtcdVersion;
  /** GET /version. */
  readonly versions: { etcdserver: string; etcdcluster: string };
  decode(text: Uint8Array, node: JsonNode, type: MessageDesc): Msg;
  httpStatus(grpcCode: number): number;
  /** A unary call's error body. */
  errorBody(grpcCode: number, message: string): Record<string, unknown>;
  /** A stream's error line (after `{"error":`). */
  streamError(grpcCode: number, message: string): Record<string, unknown>;
  /** 3.4 answers a streaming call whose first message does not decode with 500 code 2; 3.5 ends the requests there. */
  readonly firstStreamMessageErrorIsFatal: boolean;
  /** 3.4 answers every progress_request; 3.5 only when the stream has watchers and all are synced. */
  readonly progressNeedsSyncedWatchers: boolean;
  /** Unknown path and wrong method: 3.4 answers net/http's plain text, 3.5 JSON (405 as 501). */
  readonly notFound: { status: number; json: boolean; body: unknown };
  readonly methodNotAllowed: { status: number; json: boolean; body: unknown };
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

export const DIALECTS: Record<EtcdVersion, Dialect> = {
  "3.4": {
    version: "3.4",
    versions: { etcdserver: "3.4.23", etcdcluster: "3.4.0" },
    decode: decodeJsonpb,
    httpStatus: status34,
    errorBody: (code, message) => ({ error: message, message, code }),
    streamError: (code, message) => {
      const http = status34(code);
      return { grpc_code: code, http_code: http, message, http_status: STATUS_TEXT[http] ?? "" };
    },
    firstStreamMessageErrorIsFatal: true,
    progressNeedsSyncedWatchers: false,
    notFound: { status: 404, json: false, body: "Not Found" },
    methodNotAllowed: { status: 405, json: false, body: "Method Not Allowed" },
  },
  "3.5": {
    version: "3.5",
    versions: { etcdserver: "3.5.16", etcdcluster: "3.5.0" },
    decode: decodeProtojson,
    httpStatus: status35,
    errorBody: (code, message) => ({ code, message }),
    streamError: (code, message) => ({ code, message }),
    firstStreamMessageErrorIsFatal: false,
    progressNeedsSyncedWatchers: true,
    notFound: { status: 404, json: true, body: { code: 5, message: "Not Found" } },
    methodNotAllowed: { status: 501, json: true, body: { code: 12, message: "Method Not Allowed" } },
  },
};
