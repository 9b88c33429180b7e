import { describe, invalidArgument } from "../errors/catalogue.js";
import type { EventHandler } from "../events/events.js";
import { concealHeaders, credentials } from "./auth.js";
import type { Fetch } from "./fetch.js";

/** What the gateway layer needs to know to move requests: where, with what, and how long. */
export interface GatewayOptions {
  /** One or more gateway URLs, e.g. `http://10.0.0.1:2379`. Calls fail over between them. */
  endpoints: string | readonly string[];
  /** A fetch implementation; by default the runtime's global `fetch`, looked up on every call. */
  fetch?: Fetch | undefined;
  /** Time budget of each call in milliseconds, retries included. Default 10 000. */
  timeout?: number | undefined;
  /**
   * Longest wait for one endpoint's answer, in milliseconds, before a call that is safe to repeat moves on
   * to the next endpoint: a silent member costs one attempt, not the whole call. Default: a third of
   * `timeout`. (A write that may not be repeated waits for its answer as long as the call's budget allows.)
   */
  attemptTimeout?: number | undefined;
  /**
   * Most requests of this client on the wire at once (streams not counted); the rest wait in the client, in
   * order, without using up their attempts' time. Default 64.
   */
  maxConcurrentRequests?: number | undefined;
  /** How many times a call that is safe to repeat is retried on another endpoint. Default 3. */
  retries?: number | undefined;
  /** Credentials for an etcd with auth enabled; the token is fetched and refreshed as needed. */
  auth?:
    | {
        /** The etcd user (`etcdctl user add`). */
        username: string;
        /**
         * Its password; sent only to `/v3/auth/authenticate`. Never shown: the config reads `"[redacted]"`,
         * and errors have it (and every token the client was given) replaced by `"[redacted]"`, even in a body
         * a proxy echoed back.
         */
        password: string;
      }
    | undefined;
  /**
   * Extra headers on every request (for a proxy in front of etcd, say). Checked once here: names must be
   * HTTP tokens, values single-line Latin-1 text. Requests never follow redirects, so these never leave the
   * endpoints' origins. Headers the protocol owns are refused: the framing ones (`host`, `content-length`,
   * `transfer-encoding`, `connection`...), `content-type` and `content-encoding` (the gateway reads plain
   * JSON only), `grpc-timeout` (the SDK sets it on watches), `grpc-metadata-hasleader` (see `requireLeader`)
   * and, with `auth`, `authorization` and `grpc-metadata-token` (the token goes there). Credential headers
   * (`authorization`, `proxy-authorization`, `cookie`, names with `token`, `secret`, `passw` or `api-key`)
   * are sent as given but shown as `"[redacted]"` by `config`, and kept out of errors like the password.
   */
  headers?: Record<string, string> | undefined;
  /**
   * The most bytes the client buffers for one answer: a unary body, a keepalive's first line, or one watch
   * message, counted after any content decoding (so a gzip bomb stops here too). Past it the call fails with
   * RESOURCE_EXHAUSTED and the connection is closed. Default 16 MiB: well above what etcd sends for a
   * lock or a bounded range (its requests are capped at 1.5 MiB), small enough for a Lambda or a Worker.
   */
  maxResponseBytes?: number | undefined;
  /**
   * Ask members without a raft leader to fail at once instead of after ~7 s, so calls move on to a
   * healthy member. Default true.
   */
  requireLeader?: boolean | undefined;
  /**
   * Told what the SDK does as it works (requests, retries, failovers, sessions, locks, watch reconnects):
   * see {@link EtcdEvent}. Nothing is built when unset; a handler that throws never breaks a call.
   */
  onEvent?: EventHandler | undefined;
}

/** {@link GatewayOptions} checked once, defaults filled in. */
export interface GatewayConfig {
  /** The endpoints as base URLs without a trailing slash, in failover order. */
  readonly endpoints: readonly string[];
  /** The injected fetch; undefined means the global `fetch`, looked up on every call. */
  readonly fetch: Fetch | undefined;
  /** Time budget of each call in milliseconds, retries included. */
  readonly timeout: number;
  /** Longest wait for one endpoint's answer in milliseconds, before a repeatable call moves on. */
  readonly attemptTimeout: number;
  /** Most requests on the wire at once; the rest wait in the client. */
  readonly maxConcurrentRequests: number;
  /** How many times a call that is safe to repeat is retried. */
  readonly retries: number;
  /** The credentials, or undefined without auth. */
  readonly auth:
    | {
        /** The etcd user. */
        readonly username: string;
        /** Always `"[redacted]"`: the password itself is held where nothing can show it. */
        readonly password: string;
      }
    | undefined;
  /** Extra headers sent on every request, names lowercased; credential headers' values read `"[redacted]"`. */
  readonly headers: Readonly<Record<string, string>>;
  /** Whether members without a raft leader are asked to fail at once. */
  readonly requireLeader: boolean;
  /** The most bytes buffered for one answer or one watch message. */
  readonly maxResponseBytes: number;
  /** The event handler, or undefined when none is set. */
  readonly onEvent: EventHandler | undefined;
}

export const DEFAULT_TIMEOUT = 10_000;
export const DEFAULT_MAX_CONCURRENT_REQUESTS = 64;
export const DEFAULT_RETRIES = 3;
export const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

/** Checks the gateway options once, with messages that say what to fix, and fills in the defaults. */
export function resolveGatewayConfig(options: GatewayOptions): GatewayConfig {
  const auth = options.auth;
  if (auth !== undefined) {
    if (typeof auth?.username !== "string" || auth.username.length === 0 || typeof auth.password !== "string") {
      throw invalidArgument("auth must be { username: string, password: string } with a non-empty username");
    }
  }
  for (const name of ["onEvent", "fetch"] as const) {
    if (options[name] !== undefined && typeof options[name] !== "function")
      throw invalidArgument(`${name} must be a function, got ${describe(options[name])}`);
  }
  const timeout = resolveTimeout(options.timeout, "timeout") ?? DEFAULT_TIMEOUT;
  return {
    endpoints: resolveEndpoints(options.endpoints),
    fetch: options.fetch,
    timeout,
    attemptTimeout: resolveTimeout(options.attemptTimeout, "attemptTimeout") ?? timeout / 3,
    maxConcurrentRequests:
      resolveWhole(options.maxConcurrentRequests, "maxConcurrentRequests", 1) ?? DEFAULT_MAX_CONCURRENT_REQUESTS,
    retries: resolveWhole(options.retries, "retries", 0) ?? DEFAULT_RETRIES,
    auth: auth === undefined ? undefined : credentials(auth.username, auth.password),
    headers: concealHeaders(resolveHeaders(options.headers, auth !== undefined)),
    requireLeader: resolveFlag(options.requireLeader, "requireLeader") ?? true,
    maxResponseBytes:
      resolveWhole(options.maxResponseBytes, "maxResponseBytes", 1, "of bytes ") ?? DEFAULT_MAX_RESPONSE_BYTES,
    onEvent: options.onEvent,
  };
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Visible Latin-1 and inner spaces or tabs: what a header value may hold without being rewritten or refused. */
const FIELD_VALUE = /^(?:[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?$/;

/**
 * Headers the protocol owns, with why: each one given would break every call, or silently change what the
 * SDK promises.
 */
const OWNED = new Map([
  ...[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "expect",
  ].map((name) => [name, "frames the message or the connection and is set by fetch"] as const),
  ["content-type", "is application/json: the gateway reads JSON only"],
  ["content-encoding", "would claim an encoding the JSON body is not sent in"],
  ["grpc-timeout", "is set by the SDK on watches (idleTimeout); calls are bounded by `timeout`"],
  ["grpc-metadata-hasleader", "is set by the `requireLeader` option"],
]);

/** Headers that carry the auth token: with `auth`, the SDK's own token goes there. */
const TOKEN_HEADERS = new Set(["authorization", "grpc-metadata-token", "grpc-metadata-authorization"]);

/**
 * Extra headers, checked now so that a bad one is a clear error at construction rather than every call
 * failing in fetch (a CR or LF in a value) and being retried as if the network were down. Names are
 * lowercased, so one name given twice in two cases is caught rather than sent twice.
 */
function resolveHeaders(input: unknown, withAuth: boolean): Record<string, string> {
  if (input === undefined) return {};
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw invalidArgument(`headers must be an object of header names to string values, got ${describe(input)}`);
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(input)) {
    if (!TOKEN.test(name)) throw invalidArgument(`header name ${JSON.stringify(name)} is not a valid HTTP header name`);
    if (typeof value !== "string" || !FIELD_VALUE.test(value)) {
      // A value may be a credential: its type is shown, never the text itself.
      const got = typeof value === "string" ? "a string that is not (its value is not shown)" : describe(value);
      throw invalidArgument(
        `header ${name} must be a single-line string of Latin-1 characters without leading or trailing ` +
          `spaces, got ${got}`,
      );
    }
    const lower = name.toLowerCase();
    const owned = OWNED.get(lower);
    if (owned !== undefined) throw invalidArgument(`header ${lower} cannot be given: it ${owned}`);
    if (withAuth && TOKEN_HEADERS.has(lower)) {
      throw invalidArgument(`header ${lower} cannot be given with \`auth\`: the SDK sends its auth token there`);
    }
    if (Object.hasOwn(headers, lower)) throw invalidArgument(`header ${lower} is given twice`);
    headers[lower] = value;
  }
  return headers;
}

/** A true/false option: anything else (the string "false", say) is refused rather than read as truthy. */
export function resolveFlag(value: unknown, name: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "boolean") throw invalidArgument(`${name} must be true or false, got ${describe(value)}`);
  return value;
}

function resolveEndpoints(input: GatewayOptions["endpoints"]): string[] {
  const list = typeof input === "string" ? [input] : input;
  if (!Array.isArray(list) || list.length === 0) {
    throw invalidArgument('endpoints must be a non-empty array of URLs, e.g. ["http://127.0.0.1:2379"]');
  }
  return list.map((endpoint: unknown) => {
    if (typeof endpoint !== "string")
      throw invalidArgument(`an endpoint must be a URL string, got ${describe(endpoint)}`);
    let url: URL;
    try {
      url = new URL(endpoint);
    } catch {
      throw invalidArgument(`endpoint ${JSON.stringify(endpoint)} is not a URL; write it as http://host:2379`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw invalidArgument(`endpoint ${JSON.stringify(endpoint)} must use http: or https:`);
    }
    if (url.search || url.hash || url.username || url.password) {
      throw invalidArgument(
        `endpoint ${JSON.stringify(endpoint)} must be a plain base URL without query, ` +
          `fragment or credentials (use \`auth\`)`,
      );
    }
    return url.href.replace(/\/+$/, "");
  });
}

/** A timeout in milliseconds: positive and finite, or Infinity for "no limit". */
export function resolveTimeout(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || Number.isNaN(value) || value <= 0) {
    throw invalidArgument(`${name} must be a positive number of milliseconds, got ${describe(value)}`);
  }
  return value;
}

/**
 * A caller's signal: an AbortSignal or nothing. Anything else (a plain object, `null`) is refused here rather
 * than failing later as a TypeError inside an event listener or `AbortSignal.any`.
 */
export function resolveSignal(value: unknown, name = "signal"): AbortSignal | undefined {
  if (value === undefined || value instanceof AbortSignal) return value;
  throw invalidArgument(`${name} must be an AbortSignal, got ${describe(value)}`);
}

/** A whole number of at least `min` that a double holds exactly; `unit` names what it counts, for the message. */
export function wholeArg(value: unknown, name: string, min: number, unit = ""): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) {
    throw invalidArgument(`${name} must be a whole number ${unit}>= ${min}, got ${describe(value)}`);
  }
  return value;
}

function resolveWhole(value: unknown, name: string, min: number, unit?: string): number | undefined {
  return value === undefined ? undefined : wholeArg(value, name, min, unit);
}
