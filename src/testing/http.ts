import { CallDeadline } from "./deadline.js";
import type { Faults } from "./faults.js";
import { GRPC_OVERHEAD_BYTES, type Member } from "./member.js";
import { authRoutes } from "./services/auth.js";
import { electionRoutes } from "./services/election.js";
import { kvRoutes } from "./services/kv.js";
import { leaseRoutes } from "./services/lease.js";
import { lockRoutes } from "./services/lock.js";
import { memberInfoRoutes } from "./services/member-info.js";
import type { BidiRoute, Call, Route } from "./services/route.js";
import { watchRoute } from "./services/watch.js";
import type { Dialect } from "./wire/dialect.js";
import { DecodeError, DroppedConnection, Errors, GrpcCode, GrpcStatusError } from "./wire/errors.js";
import { JsonSyntaxError, readValue } from "./wire/json-scan.js";
import { newMsg, type Msg } from "./wire/message.js";
import { messageSize } from "./wire/proto-size.js";
import type { MessageDesc } from "./wire/schema.js";

const ROUTES: Record<string, Route> = {
  ...kvRoutes,
  ...leaseRoutes,
  // 3.4 still serves the lease service under its old kv/ prefix too.
  "/v3/kv/lease/revoke": leaseRoutes["/v3/lease/revoke"],
  "/v3/kv/lease/timetolive": leaseRoutes["/v3/lease/timetolive"],
  "/v3/kv/lease/leases": leaseRoutes["/v3/lease/leases"],
  "/v3/watch": watchRoute,
  ...authRoutes,
  ...lockRoutes,
  ...electionRoutes,
  ...memberInfoRoutes,
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

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { ...CORS, "content-type": "application/json" } });
}

function plainOrJson(answer: { status: number; json: boolean; body: unknown }): Response {
  return answer.json ? json(answer.status, answer.body) : text(answer.status, String(answer.body));
}

function errorResponse(dialect: Dialect, err: GrpcStatusError): Response {
  return json(dialect.httpStatus(err.code), dialect.errorBody(err.code, err.message));
}

/** A streaming call that fails before its first message: the mapped status and one `{"error":…}` line. */
function streamErrorResponse(dialect: Dialect, err: GrpcStatusError): Response {
  return new Response(dialect.streamErrorLine(err.code, err.message), {
    status: dialect.httpStatus(err.code),
    headers: { ...CORS, "content-type": "application/json" },
  });
}

function streamResponse(body: ReadableStream<Uint8Array>): Response {
  // Explicitly chunked, as etcd sends it: through msw's socket-level interception, a body that errors then
  // becomes a truncated chunked message (a client error), instead of a clean read-until-close EOF.
  return new Response(body, {
    status: 200,
    headers: { ...CORS, "content-type": "application/json", "transfer-encoding": "chunked" },
  });
}

export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortReason(signal));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** Never resolves; rejects when the client goes away. */
function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(abortReason(signal));
    else signal.addEventListener("abort", () => reject(abortReason(signal)), { once: true });
  });
}

/** One request message, as the gateway decodes it and the gRPC server receives it. */
function decodeMessage(
  member: Member,
  bytes: Uint8Array,
  offset: number,
  type: MessageDesc,
): { msg: Msg; next: number } | undefined {
  const read = readValue(bytes, offset);
  if (!read) return undefined;
  const msg = member.dialect.decode(bytes, read.node, type);
  const size = messageSize(msg);
  const max = member.options.maxRequestBytes + GRPC_OVERHEAD_BYTES;
  if (size > max) throw Errors.messageTooLarge(size, max);
  return { msg, next: read.next };
}

/**
 * Serves one HTTP request the way etcd's gateway does (3.4.23's, 3.5.16's, 3.6.16's or 3.7.3's, per the member).
 * Only the URL's path matters. `signal` is the caller's own when there is one: a Request's signal follows the
 * caller's only weakly, and once the Request is garbage-collected an abort would never reach an open watch.
 */
export async function serve(
  member: () => Member,
  faults: Faults,
  request: Request,
  signal: AbortSignal = request.signal,
): Promise<Response> {
  if (faults.latencyMs > 0) await sleep(faults.latencyMs, signal);
  if (signal.aborted) throw abortReason(signal);

  const m = member();
  const dialect = m.dialect;
  const url = new URL(request.url);
  const path = url.pathname.replace(/^\/v3beta\//, "/v3/");
  const method = request.method.toUpperCase();
  if (method === "OPTIONS") return new Response(null, { status: 200, headers: CORS });
  if (path === "/health" || path === "/version") {
    if (method !== "GET") return text(405, "Method Not Allowed");
    if (path === "/version") return json(200, dialect.versions);
    // etcd writes its health as JSON under net/http's sniffed content type.
    return new Response(JSON.stringify(dialect.health), {
      status: 200,
      headers: { ...CORS, "content-type": "text/plain; charset=utf-8" },
    });
  }
  // Outside /v3/ the request never reaches the gateway: Go's ServeMux answers (and redirects "/v3" to "/v3/").
  if (path === "/v3") return new Response(null, { status: 301, headers: { ...CORS, location: "/v3/" } });
  if (!path.startsWith("/v3/")) return text(404, "404 page not found");
  const route = dialect.absentPaths.includes(path) ? undefined : ROUTES[path];
  if (!route) return plainOrJson(dialect.notFound);
  if (method !== "POST") return plainOrJson(dialect.methodNotAllowed);

  m.tick();
  const streaming = route.kind !== "unary";
  let deadline: CallDeadline | undefined;
  try {
    // Read before the call, and refused as a plain answer even on a stream.
    deadline = CallDeadline.of(request);
  } catch (err) {
    if (err instanceof GrpcStatusError) return errorResponse(dialect, err);
    throw err;
  }
  try {
    if (faults.takeUnavailable()) throw Errors.noLeader();
    const caller = { token: request.headers.get("authorization") };
    if (route.kind === "bidi") return await serveBidi(m, route, request, caller, signal, deadline);
    const bytes = new Uint8Array(await request.arrayBuffer());
    const type = route.request(dialect);
    let msg: Msg;
    try {
      msg = decodeMessage(m, bytes, 0, type)?.msg ?? newMsg(type);
    } catch (err) {
      // The gateway refuses a body it cannot decode before any call, streaming or not: a plain error answer.
      if (err instanceof DecodeError || err instanceof JsonSyntaxError)
        return errorResponse(dialect, GrpcStatusError.invalidArgument(err.message));
      if (err instanceof GrpcStatusError) return errorResponse(dialect, err);
      throw err;
    }
    if (route.kind === "server-stream") {
      const stream = route.open(m, { msg, token: caller.token, signal });
      return streamResponse(deadline === undefined ? stream : deadline.end(stream, dialect));
    }
    const bounded = deadline?.follow(signal);
    const call: Call = { msg, token: caller.token, signal: bounded?.signal ?? signal };
    // The deadline's abort carries its own answer (DeadlineExceeded), caught below like any status.
    const body = await Promise.race([route.handle(m, call), untilAborted(call.signal)]).finally(() => bounded?.clear());
    // Applied, and then the connection drops before the answer gets back (faults.loseAnswers).
    if (faults.takeLostAnswer(path)) throw new TypeError("fetch failed: the mock lost the answer (faults.loseAnswers)");
    return json(200, body);
  } catch (err) {
    if (err instanceof GrpcStatusError)
      return streaming ? streamErrorResponse(dialect, err) : errorResponse(dialect, err);
    throw err;
  } finally {
    m.rearm();
  }
}

/** The requests of a streaming body, decoded as they arrive. */
class BodyMessages {
  private buffer: Uint8Array = new Uint8Array();
  private ended: boolean;

  constructor(
    private readonly member: Member,
    private readonly type: MessageDesc,
    private readonly reader: ReadableStreamDefaultReader<Uint8Array> | undefined,
  ) {
    this.ended = reader === undefined;
  }

  /**
   * Every request that arrived together: waits until at least one is complete, the body ends, or a request
   * does not decode (`error`, after the requests before it). `done` once nothing more will come.
   */
  async batch(): Promise<{ msgs: Msg[]; error?: unknown; done: boolean }> {
    const msgs: Msg[] = [];
    for (;;) {
      try {
        const decoded = decodeMessage(this.member, this.buffer, 0, this.type);
        if (decoded) {
          this.buffer = this.buffer.subarray(decoded.next);
          msgs.push(decoded.msg);
          continue;
        }
        if (this.ended) return { msgs, done: true };
      } catch (err) {
        const incomplete = err instanceof JsonSyntaxError && err.unexpectedEnd && !this.ended;
        if (!incomplete) return { msgs, error: err, done: true };
      }
      if (msgs.length > 0) return { msgs, done: false };
      const { value, done } = await this.reader!.read();
      if (done) this.ended = true;
      else this.buffer = concat(this.buffer, value);
    }
  }
}

/**
 * Lease keepalive and watch: each JSON value of the body is one request. The first one is decoded before any
 * answer: 3.4 answers a bad first request with 500 code 2; any later bad request (and in 3.5 a first one) ends
 * the requests, as an end of body would. Requests that arrive together are handled together (etcd's watch syncs
 * a watcher that starts in the past only after them). Answers start with the first line the server sends: a
 * watch whose requests produce no line never answers at all.
 */
async function serveBidi(
  member: Member,
  route: BidiRoute,
  request: Request,
  caller: { token: string | null },
  signal: AbortSignal,
  deadline: CallDeadline | undefined,
): Promise<Response> {
  const dialect = member.dialect;
  const messages = new BodyMessages(member, route.request(dialect), request.body?.getReader());
  const session = route.open(member, caller, signal);
  const first = await messages.batch();
  if (first.error instanceof DroppedConnection) throw first.error;
  if (first.msgs.length === 0 && first.error !== undefined && dialect.firstStreamMessageErrorIsFatal) {
    const message = first.error instanceof Error ? first.error.message : String(first.error);
    return json(dialect.httpStatus(GrpcCode.Unknown), dialect.errorBody(GrpcCode.Unknown, message));
  }
  for (const msg of first.msgs) session.receive(msg);
  const rest = async () => {
    for (let done = first.done; !done; ) {
      const next = await messages.batch();
      for (const msg of next.msgs) session.receive(msg);
      done = next.done;
    }
    session.end();
  };
  // A watch answers while its body still streams in; keepalive answers only once the body has ended.
  if (route.incremental) void rest().catch(() => session.end());
  else await rest().catch(() => session.end());
  const body = deadline === undefined ? session.body : deadline.end(session.body, dialect);
  return streamResponse(await firstLine(body, signal));
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** The gateway sends no status or headers before the stream's first message: wait for it (or its end). */
async function firstLine(body: ReadableStream<Uint8Array>, signal: AbortSignal): Promise<ReadableStream<Uint8Array>> {
  const reader = body.getReader();
  const head = await Promise.race([reader.read(), untilAborted(signal)]).catch(async (err: unknown) => {
    await reader.cancel(err).catch(() => {});
    throw err;
  });
  return new ReadableStream<Uint8Array>({
    start(c) {
      if (head.done) c.close();
      else c.enqueue(head.value);
    },
    async pull(c) {
      const { value, done } = await reader.read();
      if (done) c.close();
      else c.enqueue(value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
}
