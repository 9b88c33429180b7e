import type { Attributes } from "@opentelemetry/api";
import type { LockKind } from "../events/channels.js";

/**
 * The names etcd-edge/otel gives, after the OpenTelemetry semantic conventions: a span is named by its
 * operation alone (an APM groups by span name), never by a lock's name, a key or an ID; what varies goes to
 * attributes. These names are stable: the README lists them.
 */

/** The semantic conventions these names follow. */
export const SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0";

/** `etcd_edge.lock.kind`: what a lock operation is on; a read-write lock's side is `etcd_edge.lock.mode`. */
const FAMILY: Record<LockKind, string> = {
  lock: "mutex",
  election: "election",
  semaphore: "semaphore",
  read: "rwlock",
  write: "rwlock",
  lockAll: "lock_all",
};

/** The kind and mode attributes of a lock operation: low-cardinality, so metrics carry them too. */
export function lockKind(kind: LockKind): Attributes {
  const family = { "etcd_edge.lock.kind": FAMILY[kind] };
  return kind === "read" || kind === "write" ? { ...family, "etcd_edge.lock.mode": kind } : family;
}

/** A logical span's name: `mutex.acquire`, `semaphore.try_acquire`, `election.campaign`, `rwlock.release`... */
export function lockOperation(kind: LockKind, step: "acquire" | "try_acquire" | "release" | "with_lock"): string {
  if (kind === "election") {
    if (step === "release") return "election.resign";
    if (step === "acquire" || step === "try_acquire") return "election.campaign";
  }
  return `${FAMILY[kind]}.${step}`;
}

/**
 * The template (`orders/{id}`) that names `name`, as `url.template` does for HTTP: each `{...}` stands for one
 * or more characters other than `/`, the rest is literal. The first that matches wins; undefined if none does.
 */
export function templateOf(templates: readonly RegExpTemplate[], name: string): string | undefined {
  return templates.find((template) => template.pattern.test(name))?.template;
}

export interface RegExpTemplate {
  template: string;
  pattern: RegExp;
}

/** Compiles the user's templates once; a template with no `{...}` matches its name alone. */
export function compileTemplates(templates: readonly string[] | undefined): RegExpTemplate[] {
  return (templates ?? []).map((template) => {
    const parts = template.split(/\{[^{}/]*\}/);
    const literal = (part: string) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    return { template, pattern: new RegExp(`^${parts.map(literal).join("[^/]+")}$`) };
  });
}

/** `db.operation.name`: etcd's RPC for a gateway path, as etcd's gRPC API names it. */
const RPCS: Record<string, string> = {
  "/v3/kv/range": "Range",
  "/v3/kv/put": "Put",
  "/v3/kv/deleterange": "DeleteRange",
  "/v3/kv/txn": "Txn",
  "/v3/kv/compaction": "Compact",
  "/v3/watch": "Watch",
  "/v3/lease/grant": "LeaseGrant",
  "/v3/lease/revoke": "LeaseRevoke",
  "/v3/lease/keepalive": "LeaseKeepAlive",
  "/v3/lease/timetolive": "LeaseTimeToLive",
  "/v3/lease/leases": "LeaseLeases",
  "/v3/auth/authenticate": "Authenticate",
  "/v3/auth/status": "AuthStatus",
  "/v3/maintenance/status": "Status",
  "/v3/lock/lock": "Lock",
  "/v3/lock/unlock": "Unlock",
  "/v3/election/campaign": "Campaign",
  "/v3/election/proclaim": "Proclaim",
  "/v3/election/leader": "Leader",
  "/v3/election/observe": "Observe",
  "/v3/election/resign": "Resign",
};

export function rpcOf(path: string): string {
  return RPCS[path] ?? path.slice(path.lastIndexOf("/") + 1);
}

/** gRPC status codes by number: `db.response.status_code` is the code's name. */
const GRPC_CODES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

export function grpcCodeName(error: unknown): string | undefined {
  const code = (error as { grpcCode?: unknown } | undefined)?.grpcCode;
  return typeof code === "number" ? (GRPC_CODES[code] ?? String(code)) : undefined;
}

/**
 * How a traced call ended: `outcome` (`etcd_edge.lock.outcome`, one vocabulary for spans and metrics: `ok`,
 * `acquired`, `released`, `busy`, `aborted`, `lost`, `timeout`, else the error's code in lower case, or `error`),
 * and `errorType` (the `error.type`, the error's code) only when it failed. A busy answer to a try and the
 * caller's own abort are outcomes, not failures: a healthy service that tries locks shows no error rate. Anything
 * else that threw is: a timeout, a loss, a refusal, a server or transport failure.
 */
export function ending(
  outcome: string | undefined,
  error: unknown,
  tryOnly = false,
): { outcome: string; errorType?: string } {
  if (error === undefined && outcome !== undefined && outcome !== "error") return { outcome };
  if (outcome === "ABORTED") return { outcome: "aborted" };
  if (tryOnly && (outcome === "LOCKED" || outcome === "NOT_LEADER")) return { outcome: "busy" };
  if (outcome !== undefined && outcome !== "error") return { outcome: outcomeOf(outcome), errorType: outcome };
  // Not the SDK's: the class of what the caller's function threw, when it has a plain name.
  const name = (error as { name?: unknown } | undefined)?.name;
  return { outcome: "error", errorType: typeof name === "string" && /^\w{1,64}$/.test(name) ? name : "_OTHER" };
}

/** An error code as an outcome: the hold-time metric's `lost` is a span's LOCK_LOST. */
function outcomeOf(code: string): string {
  return code === "LOCK_LOST" ? "lost" : code.toLowerCase();
}

/** `server.address`, `server.port` and `url.full` of a call: never the endpoint's user info, query or fragment. */
export function serverOf(endpoint: string | undefined, path: string): Attributes {
  if (endpoint === undefined || endpoint === "") return {};
  try {
    const url = new URL(endpoint);
    const port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port);
    const base = url.pathname.replace(/\/$/, "");
    return {
      "server.address": url.hostname,
      "server.port": port,
      "url.full": `${url.protocol}//${url.host}${base}${path}`,
    };
  } catch {
    return {};
  }
}
