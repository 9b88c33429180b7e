// Fixture builders in the real gateway's wire shape (protojson: snake_case names, int64 as strings, bytes as
// padded standard base64, zero values omitted). See /work/shared/gateway-notes.md. Imports nothing, so plain
// Node (the chaos runner) loads it as well as test files.

export const CLUSTER_ID = "14841639068965178418"; // > 2^53, as real cluster IDs are
export const MEMBER_ID = "10276657743932975437";
/** A lease ID as etcd hands them out: above 2^53, so a double would corrupt it. */
export const BIG_LEASE = "7587899071857085703";

/** Padded standard base64 of a string's UTF-8 or of bytes (what the gateway sends and 3.4 insists on receiving). */
export function b64(value: string | Uint8Array): string {
  return Buffer.from(typeof value === "string" ? Buffer.from(value, "utf8") : value).toString("base64");
}

/** The text of a base64 field; "" for a field protojson left out. */
export function unb64(value: string | undefined): string {
  return Buffer.from(value ?? "", "base64").toString("utf8");
}

/** etcd's range end of the keys starting with `prefix` (its last byte below 0xff raised, the rest cut), in base64. */
export function prefixEnd(prefix: string): string {
  const bytes = Buffer.from(prefix, "utf8");
  for (let i = bytes.length - 1; i >= 0; i--) {
    if (bytes[i]! < 0xff) {
      const end = bytes.subarray(0, i + 1);
      end[i] = end[i]! + 1;
      return end.toString("base64");
    }
  }
  return Buffer.from([0]).toString("base64");
}

export function header(revision: number | string = 42, raftTerm: number | string = 2) {
  return { cluster_id: CLUSTER_ID, member_id: MEMBER_ID, revision: String(revision), raft_term: String(raftTerm) };
}

export interface KvSpec {
  key: string | Uint8Array;
  value?: string | Uint8Array;
  create?: number;
  mod: number;
  version?: number;
  lease?: string;
}

/** A KeyValue as protojson writes it: fields with zero values are left out. */
export function kv(spec: KvSpec): Record<string, string> {
  const out: Record<string, string> = { key: b64(spec.key) };
  if (spec.create) out.create_revision = String(spec.create);
  out.mod_revision = String(spec.mod);
  if (spec.version) out.version = String(spec.version);
  if (spec.value !== undefined && (typeof spec.value === "string" ? spec.value.length : spec.value.length) > 0) {
    out.value = b64(spec.value);
  }
  if (spec.lease && spec.lease !== "0") out.lease = spec.lease;
  return out;
}

/** gRPC code → HTTP status, as grpc-gateway maps them (FailedPrecondition: 400 upstream, 412 on Debian). */
export const HTTP_FOR_GRPC: Record<number, number> = {
  1: 499,
  2: 500,
  3: 400,
  4: 504,
  5: 404,
  6: 409,
  7: 403,
  8: 429,
  9: 400,
  10: 409,
  11: 400,
  12: 501,
  13: 500,
  14: 503,
  15: 500,
  16: 401,
};

export type EtcdVersion = "3.4" | "3.5" | "3.6";

/** The body of a failed unary call, byte for byte in each version's field order. */
export function unaryErrorBody(version: EtcdVersion, code: number, message: string): string {
  const m = JSON.stringify(message);
  switch (version) {
    case "3.4":
      return `{"error":${m},"message":${m},"code":${code}}`;
    case "3.5":
      return `{"error":${m},"code":${code},"message":${m}}`;
    case "3.6":
      // 3.6 (grpc-gateway v2, protojson) inserts spaces after separators at random.
      return `{"code": ${code}, "message":${m}}`;
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  412: "Precondition Failed",
  500: "Internal Server Error",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

/** A stream's error line: 3.4/3.5 `{grpc_code,http_code,message,http_status}`, 3.6 `{code,message}`. */
export function streamErrorLine(version: EtcdVersion, code: number, message: string): string {
  const m = JSON.stringify(message);
  if (version === "3.6") return `{"error":{"code":${code},"message":${m}}}\n`;
  const http = HTTP_FOR_GRPC[code] ?? 500;
  return (
    `{"error":{"grpc_code":${code},"http_code":${http},` +
    `"message":${m},"http_status":${JSON.stringify(STATUS_TEXT[http] ?? "Error")}}}\n`
  );
}

/** One NDJSON line of a stream's result. */
export function resultLine(result: unknown): string {
  return `${JSON.stringify({ result })}\n`;
}

/** The first watch message. The first watch on a stream has no `watch_id` (it is 0). */
export function createdLine(revision: number): string {
  return resultLine({ header: header(revision), created: true });
}

export interface EventSpec extends KvSpec {
  type?: "PUT" | "DELETE";
  prev?: KvSpec;
}

/** A watch message with one revision's events. A PUT event has no `type` field on the wire. */
export function eventsLine(revision: number, events: EventSpec[]): string {
  return resultLine({
    header: header(revision),
    events: events.map((e) => ({
      ...(e.type === "DELETE" ? { type: "DELETE" } : {}),
      kv: kv(e),
      ...(e.prev ? { prev_kv: kv(e.prev) } : {}),
    })),
  });
}

/** A put event at `mod` for a key first created at `create` (a simple single-writer history). */
export function putEvent(key: string, value: string, mod: number, create = mod, version = 1): EventSpec {
  return { key, value, create, mod, version };
}
