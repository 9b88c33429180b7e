import { type ResolvedConfig, resolveTimeout } from "../config.js";
import { EtcdError } from "../errors.js";
import { VERSION } from "../version.js";
import { badResponse, errorFromBody, errorFromStreamLine, isProxyUnavailable, parseJson } from "./errors.js";
import { type FetchResponse, resolveFetch } from "./fetch.js";
import { backoff, CallSignal, delay, untilAborted } from "./signals.js";
import { authenticate, type Schema } from "./wire.js";

export interface CallOptions {
  /** Aborts the call; the SDK throws an `ABORTED` error carrying the signal's reason as `cause`. */
  signal?: AbortSignal | undefined;
  /** This call's time budget in milliseconds, retries included; overrides the client's `timeout`. */
  timeout?: number | undefined;
}

/**
 * When a failed call may be sent again. `idempotent`: reads, lease keepalive/timetolive, auth — repeating
 * them changes nothing. `write`: put, delete, txn, grant, revoke — repeated only when the request provably
 * never reached a server, since a lost answer may hide an applied write.
 */
export type RetryPolicy = "idempotent" | "write";

interface Unary<T> {
  path: string;
  body: unknown;
  schema: Schema<T>;
  retry: RetryPolicy;
  /** The answer is a stream of `{"result": ...}` lines of which only the first matters (lease keepalive). */
  firstLine?: boolean;
}

/** An open streaming response, with the call signal that aborts it. */
export interface OpenStream {
  response: FetchResponse;
  body: ReadableStream<Uint8Array>;
  endpoint: string;
  /** The auth token the stream was opened with, to report if the server later refuses it. */
  token: string | undefined;
}

/**
 * Sends JSON requests to the gateway: endpoint failover, per-call timeout and abort, jittered retries
 * where they are safe, an auth token fetched once and refreshed once on rejection.
 */
export class Transport {
  readonly #config: ResolvedConfig;
  readonly #baseHeaders: Record<string, string>;
  #current = 0;
  #token: Promise<string> | undefined;
  #tokenValue: string | undefined;

  constructor(config: ResolvedConfig) {
    this.#config = config;
    this.#baseHeaders = {
      "content-type": "application/json",
      "user-agent": `etcd-edge/${VERSION}`,
      ...(config.requireLeader ? { "grpc-metadata-hasleader": "true" } : {}),
      ...config.headers,
    };
  }

  get config(): ResolvedConfig {
    return this.#config;
  }

  /** One request/response call, parsed and validated against `schema`. */
  async unary<T>(request: Unary<T>, options: CallOptions = {}): Promise<T> {
    const call = new CallSignal(options.signal, this.#timeout(options.timeout));
    try {
      return await this.#withRetries(request.retry, call, async (endpoint, headers) => {
        const response = await this.#post(endpoint, request.path, request.body, headers, call.signal);
        const text = await response.text();
        return decode(request, response.status, text, endpoint);
      });
    } finally {
      call.dispose();
    }
  }

  /**
   * Opens a streaming call. The time budget covers only the wait for the server's first message; after
   * that the stream lives until `signal` aborts (the caller must abort it to close the connection).
   */
  async open(path: string, body: unknown, signal: AbortSignal, timeout?: number): Promise<OpenStream> {
    const call = new CallSignal(signal, this.#timeout(timeout));
    try {
      return await this.#withRetries("idempotent", call, async (endpoint, headers) => {
        const response = await this.#post(endpoint, path, body, headers, call.signal);
        if (response.status !== 200 || response.body === null) {
          throw errorFromBody(response.status, await response.text(), endpoint);
        }
        return { response, body: response.body, endpoint, token: headers.authorization };
      });
    } finally {
      // The stream itself stays bound to the caller's signal through the request; only the clock stops.
      call.stopTimer();
    }
  }

  #timeout(perCall: number | undefined): number {
    return resolveTimeout(perCall, "timeout") ?? this.#config.timeout;
  }

  async #withRetries<T>(
    policy: RetryPolicy,
    call: CallSignal,
    attempt: (endpoint: string, headers: Record<string, string>) => Promise<T>,
    withToken = true,
  ): Promise<T> {
    let refreshedToken = false;
    for (let tries = 0; ; tries++) {
      const index = this.#current;
      const endpoint = this.#config.endpoints[index]!;
      let token: string | undefined;
      try {
        if (call.aborted) throw call.error(endpoint);
        const pending = withToken ? this.#authToken() : undefined;
        token = pending === undefined ? undefined : await untilAborted(pending, call.signal);
        const headers = token === undefined ? this.#baseHeaders : { ...this.#baseHeaders, authorization: token };
        return await attempt(endpoint, headers);
      } catch (thrown) {
        if (call.aborted) {
          // An endpoint that lets a call time out is no place for the next call either.
          if (call.timedOut) this.#failedOver(index);
          throw call.error(endpoint);
        }
        const error = toEtcdError(thrown, endpoint);
        if (error.code === "UNAUTHENTICATED" && token !== undefined && !refreshedToken) {
          // The token expired or the server restarted with new tokens: the request was refused unapplied.
          refreshedToken = true;
          this.#invalidateToken(token);
          tries--;
          continue;
        }
        if (tries >= this.#config.retries || !mayRetry(error, thrown, policy)) throw error;
        this.#failedOver(index);
        await delay(backoff(tries), call.signal).catch(() => {
          throw call.error(endpoint);
        });
      }
    }
  }

  #post(endpoint: string, path: string, body: unknown, headers: Record<string, string>, signal: AbortSignal) {
    const fetch = resolveFetch(this.#config.fetch);
    return fetch(endpoint + path, { method: "POST", headers, body: JSON.stringify(body), signal });
  }

  /** Moves on from a failed endpoint, unless a concurrent call already did. */
  #failedOver(index: number): void {
    if (this.#current === index) this.#current = (index + 1) % this.#config.endpoints.length;
  }

  #authToken(): Promise<string> | undefined {
    const auth = this.#config.auth;
    if (auth === undefined) return undefined;
    if (this.#token === undefined) {
      // Shared by concurrent calls; dropped on failure so the next call tries again.
      const pending = this.#authenticate(auth.username, auth.password);
      this.#token = pending;
      pending.then(
        (token) => {
          if (this.#token === pending) this.#tokenValue = token;
        },
        () => {
          if (this.#token === pending) this.#token = undefined;
        },
      );
    }
    return this.#token;
  }

  /** A stream was cancelled for this token: the next request authenticates again. */
  tokenRejected(token: string | undefined): void {
    if (token !== undefined) this.#invalidateToken(token);
  }

  /** Forgets a token the server refused, unless a newer one has replaced it already. */
  #invalidateToken(token: string): void {
    if (this.#tokenValue === token) {
      this.#token = undefined;
      this.#tokenValue = undefined;
    }
  }

  /** Not bound to any one caller's signal: concurrent callers share it, each waiting with its own. */
  async #authenticate(name: string, password: string): Promise<string> {
    const call = new CallSignal(undefined, this.#config.timeout);
    const result = await this.#withRetries("idempotent", call, async (endpoint) => {
      const response = await this.#post(endpoint, "/v3/auth/authenticate", { name, password }, this.#baseHeaders, call.signal);
      return decode({ path: "/v3/auth/authenticate", body: null, schema: authenticate, retry: "idempotent" }, response.status, await response.text(), endpoint);
    }, false).finally(() => call.dispose());
    if (result.token === undefined || result.token.length === 0) {
      throw new EtcdError("UNAUTHENTICATED", "etcd returned no token: is auth enabled on the cluster?");
    }
    return result.token;
  }
}

function decode<T>(request: Unary<T>, status: number, text: string, endpoint: string): T {
  if (status !== 200) throw errorFromBody(status, text, endpoint);
  const json = request.firstLine ? firstLine(text) : parseJson(text);
  if (json === undefined) throw badResponse(status, text, endpoint);
  let payload: unknown = json;
  if (request.firstLine) {
    const line = json as { result?: unknown; error?: unknown };
    if (line.error !== undefined) throw errorFromStreamLine(line.error, status, endpoint);
    payload = line.result;
  }
  const parsed = request.schema.safeParse(payload);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue ? `${issue.path.join(".") || "body"}: ${issue.message}` : "unknown";
    throw badResponse(status, text, endpoint, `a body that does not match ${request.path} (${where})`);
  }
  return parsed.data;
}

function firstLine(text: string): unknown {
  const newline = text.indexOf("\n");
  return parseJson(newline < 0 ? text : text.slice(0, newline));
}

const NEVER_SENT = /ECONNREFUSED|connection refused|ConnectionRefused|ENOTFOUND|EAI_AGAIN|failed to lookup|dns error/i;

/** Whether a thrown fetch error proves the request never reached a server (so even a write may be re-sent). */
export function provablyNotSent(error: unknown): boolean {
  for (let current = error, depth = 0; current !== undefined && current !== null && depth < 6; depth++) {
    const { code, message, cause } = current as { code?: unknown; message?: unknown; cause?: unknown };
    if ((typeof code === "string" && NEVER_SENT.test(code)) || (typeof message === "string" && NEVER_SENT.test(message))) {
      return true;
    }
    current = cause;
  }
  return false;
}

function mayRetry(error: EtcdError, thrown: unknown, policy: RetryPolicy): boolean {
  if (error.code === "UNAVAILABLE" && !(thrown instanceof EtcdError)) {
    // A network failure: the connection broke or never opened.
    return policy === "idempotent" || provablyNotSent(thrown);
  }
  if (policy === "write") return false;
  if (error.code === "UNAVAILABLE") return true;
  return isProxyUnavailable(error);
}

function toEtcdError(thrown: unknown, endpoint: string): EtcdError {
  if (thrown instanceof EtcdError) return thrown;
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  return new EtcdError("UNAVAILABLE", `cannot reach ${endpoint}: ${message}`, { cause: thrown, endpoint });
}
