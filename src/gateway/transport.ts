import { noToken, unavailable } from "../errors/catalogue.js";
import { EtcdError } from "../errors/etcd-error.js";
import { VERSION } from "../version.js";
import { AuthToken } from "./auth.js";
import { readBody } from "./body.js";
import { type GatewayConfig, resolveTimeout } from "./config.js";
import { decodeAnswer, type Expected } from "./decode.js";
import { type FetchResponse, resolveFetch } from "./fetch.js";
import { backoff, mayRetry, type RetryPolicy } from "./retry-policy.js";
import { errorFromBody } from "./status.js";
import { CallSignal, delay, untilAborted } from "./signals.js";
import { authenticate } from "./wire.js";

/** Per-call options every method takes. */
export interface CallOptions {
  /** Aborts the call; the SDK throws an `ABORTED` error carrying the signal's reason as `cause`. */
  signal?: AbortSignal | undefined;
  /** This call's time budget in milliseconds, retries included; overrides the client's `timeout`. */
  timeout?: number | undefined;
}

/** One request/response call. */
export interface Unary<T> extends Expected<T> {
  body: unknown;
  retry: RetryPolicy;
}

/** An open streaming response. */
export interface OpenStream {
  response: FetchResponse;
  body: ReadableStream<Uint8Array>;
  endpoint: string;
  /** The auth token the stream was opened with, to report if the server later refuses it. */
  token: string | undefined;
}

type Attempt<T> = (endpoint: string, headers: Record<string, string>) => Promise<T>;

/**
 * Sends JSON requests to the gateway: endpoint failover, per-call timeout and abort, jittered retries
 * where the retry policy allows them, and the auth token on every request.
 */
export class Transport {
  readonly #config: GatewayConfig;
  readonly #baseHeaders: Record<string, string>;
  readonly #token: AuthToken | undefined;
  #current = 0;

  constructor(config: GatewayConfig) {
    this.#config = config;
    this.#baseHeaders = {
      "content-type": "application/json",
      "user-agent": `etcd-edge/${VERSION}`,
      ...(config.requireLeader ? { "grpc-metadata-hasleader": "true" } : {}),
      ...config.headers,
    };
    const auth = config.auth;
    this.#token = auth === undefined ? undefined : new AuthToken(() => this.#authenticate(auth.username, auth.password));
  }

  get config(): GatewayConfig {
    return this.#config;
  }

  /** One request/response call, parsed and validated against its schema. */
  async unary<T>(request: Unary<T>, options: CallOptions = {}): Promise<T> {
    const call = new CallSignal(options.signal, this.#timeout(options.timeout));
    try {
      return await this.#withRetries(request.retry, call, async (endpoint, headers) => {
        const response = await this.#post(endpoint, request.path, request.body, headers, call.signal);
        const limits = { maxBytes: this.#config.maxResponseBytes, firstLine: request.firstLine };
        return decodeAnswer(request, response.status, await readBody(response, limits, endpoint), endpoint);
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
          throw errorFromBody(response.status, await readBody(response, { maxBytes: this.#config.maxResponseBytes }, endpoint), endpoint);
        }
        return { response, body: response.body, endpoint, token: headers.authorization };
      });
    } finally {
      // The stream itself stays bound to the caller's signal through the request; only the clock stops.
      call.stopTimer();
    }
  }

  /** A stream was cancelled for this token: the next request authenticates again. */
  tokenRejected(token: string | undefined): void {
    if (token !== undefined) this.#token?.rejected(token);
  }

  #timeout(perCall: number | undefined): number {
    return resolveTimeout(perCall, "timeout") ?? this.#config.timeout;
  }

  async #withRetries<T>(policy: RetryPolicy, call: CallSignal, attempt: Attempt<T>, withToken = true): Promise<T> {
    let refreshedToken = false;
    for (let tries = 0; ; tries++) {
      const index = this.#current;
      const endpoint = this.#config.endpoints[index]!;
      let token: string | undefined;
      try {
        if (call.aborted) throw call.error(endpoint);
        const pending = withToken ? this.#token?.get() : undefined;
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
          this.#token?.rejected(token);
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
    return fetch(endpoint + path, { method: "POST", headers, body: JSON.stringify(body), signal, redirect: "manual" });
  }

  /** Moves on from a failed endpoint, unless a concurrent call already did. */
  #failedOver(index: number): void {
    if (this.#current === index) this.#current = (index + 1) % this.#config.endpoints.length;
  }

  /** Not bound to any one caller's signal: concurrent callers share it, each waiting with its own. */
  async #authenticate(name: string, password: string): Promise<string> {
    const call = new CallSignal(undefined, this.#config.timeout);
    const expected = { path: "/v3/auth/authenticate", schema: authenticate };
    try {
      const result = await this.#withRetries(
        "idempotent",
        call,
        async (endpoint) => {
          const response = await this.#post(endpoint, expected.path, { name, password }, this.#baseHeaders, call.signal);
          return decodeAnswer(expected, response.status, await readBody(response, { maxBytes: this.#config.maxResponseBytes }, endpoint), endpoint);
        },
        false,
      );
      if (!result.token) throw noToken();
      return result.token;
    } finally {
      call.dispose();
    }
  }
}

function toEtcdError(thrown: unknown, endpoint: string): EtcdError {
  if (thrown instanceof EtcdError) return thrown;
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  return unavailable(`cannot reach ${endpoint}: ${message}`, { cause: thrown, endpoint });
}
