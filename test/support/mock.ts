// The in-memory etcd (src/testing) from a test: a client on a fresh mock, and one raw request to a mock as a
// gateway client without the SDK would send it. No msw: the client calls the mock's own fetch.
import { EtcdOperator } from "../../src/operate/index.js";
import type { EtcdOptions, Fetch } from "../../src/index.js";
import { type AuthOptions, createMockEtcd, type MockEtcd } from "../../src/testing/index.js";

/**
 * Auth as the mock suites and their real-etcd twin set it up: root is an admin, `app` may read and write under
 * app/, `reader` only read there, `writer` only write there (what a put's prev_kv needs shows).
 */
export const APP_ROLES: AuthOptions = {
  users: { root: "rootpw", app: "apppw", reader: "rpw", writer: "wpw" },
  permissions: {
    app: [{ key: "app/", prefix: true, type: "readwrite" }],
    reader: [{ key: "app/", prefix: true, type: "read" }],
    writer: [{ key: "app/", prefix: true, type: "write" }],
  },
};

/** Where clients of the mock send their requests: the mock's fetch answers any URL. */
export const MOCK_ENDPOINT = "http://etcd.test:2379";

/** A watch request: a full URL (as fetch and `Through` see it) or a path (as `MockClient.calls` records it). */
export const isWatch = (input: string) => input.endsWith("/v3/watch");

/** A request on its way to the mock: pass it on with `forward`, hold it, change it, or answer it yourself. */
export type Through = (input: string, init: Parameters<Fetch>[1], forward: Fetch) => ReturnType<Fetch>;

/**
 * Holds up each request `matches` picks until `go()`: by default its answer, once the request has landed (what a
 * connection that stalls on the way back does); with `before`, the request itself, before it reaches etcd.
 * `caught()` says whether one has been held up.
 */
export function holdAnswers(matches: (input: string, body: string) => boolean, { before = false } = {}) {
  let go: (() => void) | undefined;
  const hold = () => new Promise<void>((resolve) => (go = resolve));
  const through: Through = async (input, init, forward) => {
    if (!matches(input, init.body)) return forward(input, init);
    if (before) await hold();
    const response = await forward(input, init);
    if (!before) await hold();
    return response;
  };
  return { through, caught: () => go !== undefined, go: () => go?.() };
}

/** A request that is never answered: it rejects with its signal's reason once that aborts, as fetch does. */
export function neverAnswered(signal?: AbortSignal | null): Promise<never> {
  return new Promise((_, reject) => signal?.addEventListener("abort", () => reject(signal.reason)));
}

/**
 * Fails the requests `matches` picks (by path and body) while `failing()` says so, with `fault`: an error to
 * throw (the request never answered) or an answer. `failing()` is asked only of the requests `matches` picks.
 */
export function failWhere(
  matches: (input: string, body: string) => boolean,
  failing: () => boolean,
  fault: () => Response | Error,
): Through {
  return async (input, init, forward) => {
    if (matches(input, init.body) && failing()) {
      const answer = fault();
      if (answer instanceof Error) throw answer;
      return answer as never;
    }
    return forward(input, init);
  };
}

export interface MockClient {
  mock: MockEtcd;
  etcd: EtcdOperator;
  /** The fetch `etcd` uses: it records each request's path in `calls`, then hands it to the mock (via `through`). */
  fetch: Fetch;
  /** The path of every request the client sent, in order. */
  calls: string[];
}

/**
 * A client on a fresh in-memory member (or on `mock`), at MOCK_ENDPOINT, with `options` (the SDK's defaults
 * otherwise). `through`, when given, sees every request before the mock does.
 */
export function mockClient(
  options: Partial<EtcdOptions> = {},
  { mock = createMockEtcd(), through }: { mock?: MockEtcd; through?: Through } = {},
): MockClient {
  const forward: Fetch = (input, init) => mock.fetch(input, init as RequestInit) as ReturnType<Fetch>;
  const calls: string[] = [];
  const fetch: Fetch = (input, init) => {
    calls.push(new URL(input).pathname);
    return through === undefined ? forward(input, init) : through(input, init, forward);
  };
  return { mock, etcd: new EtcdOperator({ endpoints: [MOCK_ENDPOINT], fetch, ...options }), fetch, calls };
}

/** What the mock answered to a raw request. */
export interface RawAnswer {
  status: number;
  body: Record<string, any>;
}

/**
 * One POST of `body` as JSON (a string is sent as it is) to `path` on the mock, as a raw gateway client sends
 * it, with an auth `token` or an abort `signal`; the status and the parsed JSON answer (its lines, parsed, when
 * it streamed several).
 */
export function call(mock: MockEtcd, path: string, body: unknown, token?: string): Promise<RawAnswer>;
export function call(mock: MockEtcd, path: string, body: unknown, signal?: AbortSignal): Promise<RawAnswer>;
export async function call(
  mock: MockEtcd,
  path: string,
  body: unknown,
  tokenOrSignal?: string | AbortSignal,
): Promise<RawAnswer> {
  const res = await mock.fetch(`${MOCK_ENDPOINT}${path}`, {
    method: "POST",
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...(typeof tokenOrSignal === "string" ? { headers: { authorization: tokenOrSignal } } : {}),
    ...(tokenOrSignal instanceof AbortSignal ? { signal: tokenOrSignal } : {}),
  });
  const text = await res.text();
  const lines = text.split("\n").filter((line) => line !== "");
  return { status: res.status, body: lines.length > 1 ? lines.map((line) => JSON.parse(line)) : JSON.parse(text) };
}

/** Opens a watch with these requests in one body; lines() drains what arrived (after queued work ran). */
export async function rawWatch(mock: MockEtcd, ...requests: object[]) {
  const abort = new AbortController();
  const res = await mock.fetch(`${MOCK_ENDPOINT}/v3/watch`, {
    method: "POST",
    body: requests.map((r) => JSON.stringify(r)).join(""),
    signal: abort.signal,
  });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let inflight: Promise<ReadableStreamReadResult<string>> | undefined;
  const lines = async (): Promise<any[]> => {
    const out: any[] = [];
    for (;;) {
      inflight ??= reader.read();
      const got = await Promise.race([inflight, new Promise<"idle">((r) => setTimeout(() => r("idle"), 10))]);
      if (got === "idle") return out;
      inflight = undefined;
      if (got.done) return out;
      buffer += got.value;
      const parts = buffer.split("\n");
      buffer = parts.pop()!;
      out.push(...parts.filter((p) => p !== "").map((p) => JSON.parse(p).result));
    }
  };
  return { lines, abort: () => abort.abort() };
}
