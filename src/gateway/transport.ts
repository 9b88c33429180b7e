import { noToken, unavailable, undecided } from "../errors/catalogue.js";
import { EventSink } from "../events/events.js";
import { EtcdError, type EtcdErrorCode } from "../errors/etcd-error.js";
import { VERSION } from "../version.js";
import { AuthToken } from "./auth.js";
import { readBody } from "./body.js";
import { type GatewayConfig, resolveTimeout } from "./config.js";
import { decodeAnswer, type Expected } from "./decode.js";
import { type Fetch, type FetchResponse, resolveFetch } from "./fetch.js";
import { backoff, mayRetry, outcomeUnknown, type RetryPolicy } from "./retry-policy.js";
import { errorFromBody } from "./status.js";
import { CallSignal, delay, untilAborted } from "./signals.js";
import { authenticate } from "./wire.js";

/** Per-call options every method takes. */
export interface CallOptions {
  /** Aborts the call; the SDK throws an `ABORTED` error carrying the signal's reason as `cause`. */
  signal?: AbortSignal | undefined;
  /** This call's time budget in milliseconds, retries included; overrides the client's `timeout`. */
  timeout?: number | undefined;
  /** Longest wait for one endpoint before a repeatable call moves on; overrides the client's `attemptTimeout`. */
  attemptTimeout?: number | undefined;
  /** @internal Told each time the request is handed to fetch (a resend follows a lost answer). */
  onSent?: (() => void) | undefined;
}

/** One request/response call. */
export interface Unary<T> extends Expected<T> {
  body: unknown;
  retry: RetryPolicy;
  /** Whether the call changes the store, so that a lost answer leaves its outcome unknown. Default: `retry === "write"`. */
  writes?: boolean | undefined;
}

/** An open streaming response. */
export interface OpenStream {
  response: FetchResponse;
  body: ReadableStream<Uint8Array>;
  endpoint: string;
  /** The auth token the stream was opened with, to report if the server later refuses it. */
  token: string | undefined;
}

/** One attempt on one endpoint: where, with which headers, bounded by which signal; `sent` once fetch has it. */
interface Attempt {
  endpoint: string;
  headers: Record<string, string>;
  signal: AbortSignal;
  sent: boolean;
  onSent: (() => void) | undefined;
  /** The answer's HTTP status, once one came. */
  status?: number | undefined;
}

/**
 * Sends JSON requests to the gateway: endpoint failover, a time budget per call and per attempt, abort,
 * jittered retries where the retry policy allows them, and the auth token on every request.
 */
export class Transport {
  readonly #config: GatewayConfig;
  readonly #baseHeaders: Record<string, string>;
  readonly #token: AuthToken | undefined;
  /** @internal Where events go; `events.on` is false when nobody listens. */
  readonly events: EventSink;
  #current = 0;

  constructor(config: GatewayConfig) {
    this.#config = config;
    this.#baseHeaders = {
      "content-type": "application/json",
      "user-agent": `etcd-edge/${VERSION}`,
      ...(config.requireLeader ? { "grpc-metadata-hasleader": "true" } : {}),
      ...config.headers,
    };
    this.events = new EventSink(config.onEvent);
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
      const writes = request.writes ?? request.retry === "write";
      return await this.#withRetries(request.path, request.retry, writes, call, options, async (attempt) => {
        const response = await this.#post(attempt, request.path, request.body);
        const limits = { maxBytes: this.#config.maxResponseBytes, firstLine: request.firstLine };
        return decodeAnswer(request, response.status, await untilAborted(readBody(response, limits, attempt.endpoint), attempt.signal), attempt.endpoint);
      });
    } finally {
      call.dispose();
    }
  }

  /**
   * Opens a streaming call. The time budget covers only the wait for the server's first message; after
   * that the stream lives until `signal` aborts (the caller must abort it to close the connection).
   * `headers` are added to this request only.
   */
  async open(
    path: string,
    body: unknown,
    signal: AbortSignal,
    options: { timeout?: number | undefined; headers?: Record<string, string> | undefined } = {},
  ): Promise<OpenStream> {
    const call = new CallSignal(signal, this.#timeout(options.timeout));
    try {
      return await this.#withRetries(path, "idempotent", false, call, {}, async (attempt) => {
        const token = attempt.headers.authorization;
        if (options.headers !== undefined) attempt.headers = { ...attempt.headers, ...options.headers };
        // The stream outlives this attempt: once open it is bound to the caller's signal alone, but a failed
        // attempt closes its own request.
        const request = new AbortController();
        const follow = () => request.abort(signal.reason);
        signal.addEventListener("abort", follow, { once: true });
        try {
          const response = await this.#post(attempt, path, body, request.signal);
          if (response.status !== 200 || response.body === null) {
            const text = readBody(response, { maxBytes: this.#config.maxResponseBytes }, attempt.endpoint);
            throw errorFromBody(response.status, await untilAborted(text, attempt.signal), attempt.endpoint);
          }
          return { response, body: response.body, endpoint: attempt.endpoint, token };
        } catch (error) {
          signal.removeEventListener("abort", follow);
          request.abort();
          throw error;
        }
      });
    } finally {
      call.dispose();
    }
  }

  /** A stream was cancelled for this token: the next request authenticates again. */
  tokenRejected(token: string | undefined): void {
    if (token !== undefined) this.#token?.rejected(token);
  }

  /** A stream on `endpoint` went silent or broke: later calls start on the next endpoint. */
  endpointFailed(endpoint: string): void {
    const index = this.#config.endpoints.indexOf(endpoint);
    if (index >= 0) this.#failedOver(index, "UNAVAILABLE");
  }

  #timeout(perCall: number | undefined): number {
    return resolveTimeout(perCall, "timeout") ?? this.#config.timeout;
  }

  /**
   * Runs `attempt` on the current endpoint, moving on to the next one when it fails in a way `policy`
   * allows to repeat. A repeatable call gives each endpoint at most `attemptTimeout`, so one silent member
   * costs one attempt rather than the whole budget; a write that may not be repeated keeps the whole budget
   * for its one attempt. An error after the request was handed to fetch says whether the outcome is unknown.
   */
  async #withRetries<T>(
    path: string,
    policy: RetryPolicy,
    writes: boolean,
    call: CallSignal,
    options: Pick<CallOptions, "attemptTimeout" | "onSent">,
    run: (attempt: Attempt) => Promise<T>,
    withToken = true,
  ): Promise<T> {
    const perAttempt = policy === "write" ? undefined : (resolveTimeout(options.attemptTimeout, "attemptTimeout") ?? this.#config.attemptTimeout);
    let refreshedToken = false;
    /** Some attempt of this write was sent and its outcome never learned: it may have been applied. */
    let undecided = false;
    for (let tries = 0; ; tries++) {
      const index = this.#current;
      const endpoint = this.#config.endpoints[index]!;
      // A timer of its own only when the attempt must end before the call does.
      const step = perAttempt !== undefined && perAttempt < call.remaining() ? new CallSignal(call.signal, perAttempt) : undefined;
      const attempt: Attempt = { endpoint, headers: this.#baseHeaders, signal: step?.signal ?? call.signal, sent: false, onSent: options.onSent };
      const startedAt = this.events.on ? performance.now() : 0;
      try {
        if (call.aborted) throw call.error(endpoint);
        const pending = withToken ? this.#token?.get() : undefined;
        if (pending !== undefined) attempt.headers = { ...this.#baseHeaders, authorization: await untilAborted(pending, attempt.signal) };
        const result = await run(attempt);
        if (this.events.on) this.#requestEvent(path, attempt, tries, startedAt);
        return result;
      } catch (thrown) {
        // Cut off after the request left (abort, timeout), or failed in a way that leaves it open.
        const cutOff = call.aborted || step?.timedOut === true;
        undecided ||= writes && attempt.sent && (cutOff || outcomeUnknown(thrown));
        const unknown = undecided;
        if (call.aborted) {
          const error = call.error(endpoint, unknown);
          if (this.events.on && attempt.sent) this.#requestEvent(path, attempt, tries, startedAt, error.code);
          // An endpoint that lets a call time out is no place for the next call either.
          if (call.timedOut) this.#failedOver(index, error.code);
          throw error;
        }
        const timedOutHere = step?.timedOut === true;
        const error = timedOutHere ? step.error(endpoint, unknown) : toEtcdError(thrown, endpoint, unknown);
        if (this.events.on && attempt.sent) this.#requestEvent(path, attempt, tries, startedAt, error.code);
        const token = attempt.headers.authorization;
        if (error.code === "UNAUTHENTICATED" && token !== undefined && !refreshedToken) {
          // The token expired or the server restarted with new tokens: the request was refused unapplied.
          refreshedToken = true;
          this.#token?.rejected(token);
          tries--;
          continue;
        }
        if (tries >= this.#config.retries || !(timedOutHere ? policy === "idempotent" : mayRetry(error, thrown, policy))) throw error;
        this.#failedOver(index, error.code);
        const wait = backoff(tries);
        if (this.events.on) this.events.emit({ type: "retry", path, endpoint: this.#config.endpoints[this.#current]!, attempt: tries + 1, code: error.code, delayMs: wait });
        await delay(wait, call.signal).catch(() => {
          throw call.error(endpoint);
        });
      } finally {
        step?.dispose();
      }
    }
  }

  /**
   * Hands the request to fetch and waits for the response head, bounded by the attempt's signal even when
   * the fetch implementation queues the request and ignores the signal meanwhile. `requestSignal` is what
   * the request itself is bound to (a stream outlives its attempt).
   */
  async #post(attempt: Attempt, path: string, body: unknown, requestSignal = attempt.signal): Promise<FetchResponse> {
    const fetch: Fetch = resolveFetch(this.#config.fetch);
    const init = { method: "POST", headers: attempt.headers, body: JSON.stringify(body), signal: requestSignal, redirect: "manual" } as const;
    const pending = fetch(attempt.endpoint + path, init);
    attempt.sent = true;
    attempt.onSent?.();
    try {
      const response = await untilAborted(pending, attempt.signal);
      attempt.status = response.status;
      return response;
    } catch (error) {
      // A response that turns up after we gave up must not hold its connection.
      if (attempt.signal.aborted) pending.then((late) => late.body?.cancel().catch(() => {}), () => {});
      throw error;
    }
  }

  /** Moves on from a failed endpoint, unless a concurrent call already did. */
  #failedOver(index: number, code: EtcdErrorCode): void {
    if (this.#current !== index) return;
    const endpoints = this.#config.endpoints;
    this.#current = (index + 1) % endpoints.length;
    if (this.events.on && this.#current !== index) this.events.emit({ type: "failover", from: endpoints[index]!, to: endpoints[this.#current]!, code });
  }

  #requestEvent(path: string, attempt: Attempt, tries: number, startedAt: number, code?: EtcdErrorCode): void {
    const ms = performance.now() - startedAt;
    this.events.emit({ type: "request", path, endpoint: attempt.endpoint, status: attempt.status, code, ms, attempt: tries + 1 });
  }

  /** Not bound to any one caller's signal: concurrent callers share it, each waiting with its own. */
  async #authenticate(name: string, password: string): Promise<string> {
    const call = new CallSignal(undefined, this.#config.timeout);
    const expected = { path: "/v3/auth/authenticate", schema: authenticate };
    try {
      const result = await this.#withRetries(
        expected.path,
        "idempotent",
        false,
        call,
        {},
        async (attempt) => {
          const response = await this.#post(attempt, expected.path, { name, password });
          const text = readBody(response, { maxBytes: this.#config.maxResponseBytes }, attempt.endpoint);
          return decodeAnswer(expected, response.status, await untilAborted(text, attempt.signal), attempt.endpoint);
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

function toEtcdError(thrown: unknown, endpoint: string, indeterminate: boolean): EtcdError {
  if (thrown instanceof EtcdError) return indeterminate ? undecided(thrown) : thrown;
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  return unavailable(`cannot reach ${endpoint}: ${message}`, { cause: thrown, endpoint, indeterminate });
}
