import { parseBody } from "./decode.js";
import { EtcdError, Errors } from "./errors.js";
import type { Faults } from "./faults.js";
import type { Call, EtcdState, Reply } from "./server.js";

type Endpoint = (state: EtcdState, call: Call) => Reply;

/** Streaming endpoints report errors as a `{"error":{…}}` line, as 3.4's gateway does for server streams. */
const STREAMING = new Set(["/v3/watch", "/v3/lease/keepalive"]);

const ROUTES: Record<string, Endpoint> = {
  "/v3/kv/range": (s, c) => s.range(c),
  "/v3/kv/put": (s, c) => s.put(c),
  "/v3/kv/deleterange": (s, c) => s.deleteRange(c),
  "/v3/kv/txn": (s, c) => s.txn(c),
  "/v3/kv/compaction": (s, c) => s.compaction(c),
  "/v3/lease/grant": (s, c) => s.leaseGrant(c),
  "/v3/lease/revoke": (s, c) => s.leaseRevoke(c),
  "/v3/kv/lease/revoke": (s, c) => s.leaseRevoke(c),
  "/v3/lease/keepalive": (s, c) => s.leaseKeepAlive(c),
  "/v3/lease/timetolive": (s, c) => s.leaseTimeToLive(c),
  "/v3/kv/lease/timetolive": (s, c) => s.leaseTimeToLive(c),
  "/v3/lease/leases": (s, c) => s.leaseLeases(c),
  "/v3/kv/lease/leases": (s, c) => s.leaseLeases(c),
  "/v3/watch": (s, c) => s.openWatch(c),
  "/v3/auth/authenticate": (s, c) => s.authenticate(c),
};

/** The gateway's CORS headers, sent on every answer. */
const CORS = {
  "access-control-allow-headers": "accept, content-type, authorization",
  "access-control-allow-methods": "POST, GET, OPTIONS, PUT, DELETE",
  "access-control-allow-origin": "*",
};

function text(status: number, body: string): Response {
  return new Response(`${body}\n`, {
    status,
    headers: { ...CORS, "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff" },
  });
}

function jsonResponse(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { ...CORS, "content-type": "application/json" } });
}

export function errorResponse(err: EtcdError, streaming: boolean): Response {
  if (streaming) {
    const line = { error: { grpc_code: err.code, http_code: err.httpStatus, message: err.message, http_status: err.httpStatusText } };
    return new Response(`${JSON.stringify(line)}\n`, {
      status: err.httpStatus,
      headers: { ...CORS, "content-type": "application/json" },
    });
  }
  return jsonResponse(err.httpStatus, { error: err.message, message: err.message, code: err.code });
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal!));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Serves one HTTP request the way etcd 3.4.23's gateway (Debian build) does. Only the URL's path matters.
 * `signal` is the caller's own when there is one: a Request's signal follows the caller's only weakly, and
 * once the Request is garbage-collected an abort would never reach an open watch.
 */
export async function serve(
  state: () => EtcdState,
  faults: Faults,
  request: Request,
  signal: AbortSignal = request.signal,
): Promise<Response> {
  if (faults.latencyMs > 0) await sleep(faults.latencyMs, signal);
  if (signal.aborted) throw abortReason(signal);

  const url = new URL(request.url);
  const path = url.pathname.replace(/^\/v3beta\//, "/v3/");
  const method = request.method.toUpperCase();
  if (method === "OPTIONS") return new Response(null, { status: 200, headers: CORS });
  if (path === "/health" || path === "/version") {
    if (method !== "GET") return text(405, "Method Not Allowed");
    return jsonResponse(200, path === "/health" ? { health: "true" } : { etcdserver: "3.4.23", etcdcluster: "3.4.0" });
  }
  const route = ROUTES[path];
  if (!route) return text(404, "Not Found");
  if (method !== "POST") return text(405, "Method Not Allowed");

  const streaming = STREAMING.has(path);
  try {
    if (faults.takeUnavailable()) throw Errors.noLeader();
    const call: Call = { body: parseBody(await request.text()), token: request.headers.get("authorization"), signal };
    const reply = route(state(), call);
    switch (reply.kind) {
      case "json":
        return jsonResponse(200, reply.body);
      case "stream":
        // Explicitly chunked, as etcd sends it: through msw's socket-level interception, a body that errors
        // then becomes a truncated chunked message (a client error), instead of a clean read-until-close EOF.
        return new Response(reply.body, {
          status: 200,
          headers: { ...CORS, "content-type": "application/json", "transfer-encoding": "chunked" },
        });
      case "hang":
        return await new Promise<Response>((_, reject) => {
          signal.addEventListener("abort", () => reject(abortReason(signal)), { once: true });
        });
    }
  } catch (err) {
    if (err instanceof EtcdError) return errorResponse(err, streaming);
    throw err;
  }
}
