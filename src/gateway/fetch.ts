import { noFetch } from "../errors/catalogue.js";

/**
 * The part of `fetch` the SDK uses, named structurally so that any implementation fits: the runtime's
 * global, undici's, msw's interceptor, or the testing kit's in-memory gateway.
 */
export type Fetch = (input: string, init: FetchInit) => Promise<FetchResponse>;

/** The request fields the SDK sets. */
export interface FetchInit {
  /** Every gateway call is a POST. */
  method: "POST";
  /** Lowercase names: `content-type`, `user-agent`, `authorization` once authenticated, the `headers` option's. */
  headers: Record<string, string>;
  /** The request as JSON text. */
  body: string;
  /**
   * Aborts when the call gives up (timeout, the caller's signal, a watch closed). The SDK stops waiting
   * either way; a fetch that honours it also frees the connection.
   */
  signal: AbortSignal;
  /**
   * Always `"manual"`: etcd never redirects, and a followed redirect would carry the request (credentials
   * on `/v3/auth/authenticate`, the `headers` option) to whatever origin the answer names. The SDK turns a
   * 3xx into BAD_RESPONSE. A custom fetch must not follow redirects either.
   */
  redirect: "manual";
}

/** The response fields the SDK reads. */
export interface FetchResponse {
  /** The HTTP status: 200 for an answer; for an etcd error, the status the gateway maps its gRPC code to. */
  readonly status: number;
  /**
   * The body as a stream, which the SDK reads when there is one: only up to `maxResponseBytes` (or a
   * keepalive's first line) before dropping the rest, and a watch's messages as they arrive.
   */
  readonly body: ReadableStream<Uint8Array> | null;
  /** The whole body as text: read only when `body` is null (a fetch that buffers, such as a stub). */
  text(): Promise<string>;
}

/**
 * An optional fast path a fetch may put on its responses under this symbol (etcd-edge/node's does): the
 * body's bytes up to `maxBytes`, or only up to its first newline with `firstLine`, and `undefined` once it
 * proves longer (the body then dropped). It spares building a web stream just to bound a read.
 */
export const READ_BOUNDED = Symbol.for("etcd-edge.readBounded");
export type ReadBounded = (maxBytes: number, firstLine: boolean) => Promise<Uint8Array | undefined>;

/**
 * The injected fetch, or the global one looked up at call time (so msw, which patches the global after
 * the client exists, and workerd, which forbids a stale binding, both work). Called without a receiver.
 */
export function resolveFetch(injected: Fetch | undefined): Fetch {
  if (injected) return injected;
  const global = (globalThis as { fetch?: Fetch }).fetch;
  if (typeof global !== "function") throw noFetch();
  return global;
}
