// A fake etcd gRPC-gateway for the unit project's client tests: one msw server per test file with handlers
// that record what the client sent, or a stub fetch that answers by itself; response builders that reproduce
// the real gateway's bytes (see wire.ts for bodies); and the client that talks to them. The in-memory etcd is
// mock.ts; a real member read without the SDK is raw-gateway.ts.
import { getResponse, http, HttpResponse } from "msw";
import { setupServer, type SetupServer } from "msw/node";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { Etcd, type EtcdOptions, type Fetch } from "../../src/index.js";

export const A = "http://etcd-a.test:2379";
export const B = "http://etcd-b.test:2379";

/** A client of the fake gateway at A that never retries (so each test sees exactly the requests it answers). */
export function gatewayClient(options: Partial<EtcdOptions> = {}): Etcd {
  return new Etcd({ endpoints: [A], retries: 0, ...options });
}

/** What the client sent, as the server saw it. */
export interface Captured {
  url: string;
  endpoint: string;
  path: string;
  method: string;
  headers: Record<string, string>;
  /** The raw body text (to check key order / base64 padding literally). */
  text: string;
  /** The parsed JSON body. */
  body: any;
  request: Request;
}

/**
 * One msw server for the file. msw 3 renamed v2's `onUnhandledRequest` to `onUnhandledFrame` (the old
 * option is silently ignored), so this uses the new one; unhandled requests also fail the test in afterEach.
 */
export function useGateway(): SetupServer {
  const unhandled: string[] = [];
  const server = setupServer();
  beforeAll(() =>
    server.listen({
      onUnhandledFrame: ({ frame, defaults }) => {
        const data = frame.data as { request?: Request } | undefined;
        unhandled.push(data?.request ? `${data.request.method} ${data.request.url}` : String(frame.protocol));
        defaults.error();
      },
    }),
  );
  afterEach(() => {
    server.resetHandlers();
    expect(unhandled.splice(0), "requests that reached no handler").toEqual([]);
  });
  afterAll(() => server.close());
  return server;
}

export type Reply = (req: Captured, index: number) => Response | Promise<Response>;

async function capture(request: Request, endpoint: string): Promise<Captured> {
  const url = new URL(request.url);
  const text = await request.clone().text();
  let body: unknown;
  try {
    body = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return {
    url: request.url,
    endpoint,
    path: url.pathname,
    method: request.method,
    headers: Object.fromEntries(request.headers),
    text,
    body,
    request,
  };
}

/**
 * Answers POST `endpoint + path` with `reply`, recording every request (in order) in the returned array.
 * Any other method to the same URL is recorded too and answered 405, as 3.4 does.
 */
export function route(server: SetupServer, path: string, reply: Reply, endpoint = A): Captured[] {
  const seen: Captured[] = [];
  server.use(
    http.all(`${endpoint}${path}`, async ({ request }) => {
      const captured = await capture(request, endpoint);
      const index = seen.length;
      seen.push(captured);
      if (request.method !== "POST") return new HttpResponse("Method Not Allowed\n", { status: 405 });
      return reply(captured, index);
    }),
  );
  return seen;
}

/** A fetch answering every call with `reply(path, init)` by itself (no msw); records each call's path. */
export function stubFetch(
  reply: (path: string, init: Parameters<Fetch>[1]) => Response | Promise<Response>,
): Fetch & { calls: string[] } {
  const calls: string[] = [];
  const fetch = async (input: string, init: Parameters<Fetch>[1]) => {
    const path = new URL(input).pathname;
    calls.push(path);
    if (init.signal.aborted) throw init.signal.reason;
    return reply(path, init);
  };
  return Object.assign(fetch, { calls });
}

/** Waits until the request is aborted (or `ms` passes): a server that never answers in time. */
export function hang(request: Request, ms = 5_000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    request.signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** What undici's fetch throws when the connection drops mid-request: the server may have applied it. */
export function connectionReset(): TypeError {
  const cause = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET", errno: -104, syscall: "read" });
  return new TypeError("fetch failed", { cause });
}

/** A JSON answer with exactly this text (so key order and spacing are the fixture's, not JSON.stringify's). */
export function jsonText(text: string, status = 200): Response {
  return new HttpResponse(text, { status, headers: { "content-type": "application/json" } });
}

/** etcd's refusal for want of permission (HTTP 403, gRPC code 7, as 3.6 sends it): an answer, nothing applied. */
export function permissionDenied(): Response {
  return jsonText(`{"code":7, "message":"etcdserver: permission denied", "details":[]}`, 403);
}

/** A refusal no reconnection mends (HTTP 400, gRPC code 3); unlike a permission's, it stops no stream for good. */
export function badRequest(): Response {
  return jsonText(`{"code":3, "message":"bad request"}`, 400);
}

export function json(body: unknown, status = 200): Response {
  return jsonText(JSON.stringify(body), status);
}

export interface StreamControl {
  stream: ReadableStream<Uint8Array>;
  push(chunk: string | Uint8Array): void;
  close(): void;
  /** Resolves when the consumer cancels the stream (the ReadableStream's cancel callback ran). */
  cancelled: Promise<unknown>;
  isCancelled(): boolean;
}

const encoder = new TextEncoder();

/** A response body the test writes to as it goes; `cancelled` tells whether the client dropped it. */
export function controlledStream(initial: Array<string | Uint8Array> = [], { close = false } = {}): StreamControl {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let cancelled = false;
  let onCancel!: (reason: unknown) => void;
  const cancelledPromise = new Promise<unknown>((resolve) => (onCancel = resolve));
  let closed = false;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
      for (const chunk of initial) c.enqueue(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
      if (close) {
        closed = true;
        c.close();
      }
    },
    cancel(reason) {
      cancelled = true;
      onCancel(reason);
    },
  });
  return {
    stream,
    push(chunk) {
      if (closed || cancelled) return;
      controller.enqueue(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
    },
    close() {
      if (closed || cancelled) return;
      closed = true;
      controller.close();
    },
    cancelled: cancelledPromise,
    isCancelled: () => cancelled,
  };
}

/** A chunked NDJSON answer as the gateway streams it (status 200 unless told). */
export function streamResponse(control: StreamControl, status = 200): Response {
  return new HttpResponse(control.stream, { status, headers: { "content-type": "application/json" } });
}

/**
 * A fetch that answers from the server's msw handlers without going through Node's HTTP stack, with
 * fetch's abort semantics (an aborted signal rejects the call and errors the body, cancelling the source).
 *
 * Two reasons to use it instead of the network path: chunk boundaries reach the client exactly as the
 * handler wrote them (the socket path may merge or split them), and with msw 3.0.5 on Node 24, aborting a
 * fetch while a read of a mocked streaming body is pending crashes undici with an uncaught
 * `assert(!this.aborted)` from msw's socket interceptor (emitClose after abort), which is not the client's bug.
 */
export function directFetch(server: SetupServer, calls: string[] = []) {
  return async (
    input: string,
    init: { method: string; headers: Record<string, string>; body: string; signal: AbortSignal },
  ) => {
    calls.push(input);
    const { signal } = init;
    if (signal.aborted) throw signal.reason;
    const request = new Request(input, init);
    const aborted = new Promise<never>((_, reject) =>
      signal.addEventListener("abort", () => reject(signal.reason), { once: true }),
    );
    aborted.catch(() => {});
    const response = await Promise.race([getResponse(server.listHandlers() as never, request), aborted]);
    if (response === undefined) throw new TypeError(`fetch failed: no handler for ${init.method} ${input}`);
    if (response.type === "error") throw new TypeError("fetch failed", { cause: new Error("other side closed") });
    const source = response.body;
    if (source === null) return new Response(null, { status: response.status, headers: response.headers });
    const reader = source.getReader();
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        signal.addEventListener(
          "abort",
          () => {
            try {
              controller.error(signal.reason);
            } catch {}
            reader.cancel(signal.reason).catch(() => {});
          },
          { once: true },
        );
      },
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (error) {
          controller.error(error);
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
}
