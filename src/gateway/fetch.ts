import { noFetch } from "../errors/catalogue.js";

/**
 * The part of `fetch` the SDK uses, named structurally so that any implementation fits: the runtime's
 * global, undici's, msw's interceptor, or the testing kit's in-memory gateway.
 */
export type Fetch = (input: string, init: FetchInit) => Promise<FetchResponse>;

/** The request fields the SDK sets. */
export interface FetchInit {
  method: "POST";
  headers: Record<string, string>;
  body: string;
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
  readonly status: number;
  readonly body: ReadableStream<Uint8Array> | null;
  text(): Promise<string>;
}

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
