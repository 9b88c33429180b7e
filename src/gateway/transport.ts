import { aborted, noToken, timedOut, unavailable, undecided } from "../errors/catalogue.js";
import { EventSink } from "../events/events.js";
import { EtcdError, type EtcdErrorCode } from "../errors/etcd-error.js";
import { VERSION } from "../version.js";
import { AuthToken } from "./auth.js";
import { readBody } from "./body.js";
import { type GatewayConfig, resolveSignal, resolveTimeout } from "./config.js";
import { decodeAnswer, type Expected } from "./decode.js";
import { type Fetch, type FetchResponse, resolveFetch } from "./fetch.js";
import { backoff, mayRetry, outcomeUnknown, type RetryPolicy } from "./retry-policy.js";
import { errorFromBody } from "./status.js";
import { InFlight } from "./in-flight.js";
import { CallSignal, delay } from "./signals.js";
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
  /** The body already serialised (a prepared request): sent as is, `body` is not looked at. */
  json?: string | undefined;
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
  /** `promise`, or the attempt's abort reason as soon as its signal fires, whichever comes first. */
  bounded<T>(promise: Promise<T>): Promise<T>;
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
  readonly #inFlight: InFlight;
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
    this.#inFlight = new InFlight(config.maxConcurrentRequests);
    const auth = config.auth;
    this.#token = auth === undefined ? undefined : new AuthToken(() => this.#authenticate(auth.username, auth.password));
  }

  get config(): GatewayConfig {
    return this.#config;
  }

  /** One request/response call, parsed and validated against its schema. */
  unary<T>(request: Unary<T>, options: CallOptions = {}): Promise<T> {
    const budget = new Budget(resolveSignal(options.signal), this.#timeout(options.timeout));
    const writes = request.writes ?? request.retry === "write";
    // Serialised once, whatever the number of attempts.
    const body = request.json ?? JSON.stringify(request.body);
    const limits = { maxBytes: this.#config.maxResponseBytes, firstLine: request.firstLine };
    return this.#withRetries(request.path, request.retry, writes, budget, options, async (attempt) => {
      const response = await this.#post(attempt, request.path, body);
      return decodeAnswer(request, response.status, await attempt.bounded(readBody(response, limits, attempt.endpoint)), attempt.endpoint);
    });
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
    const budget = new Budget(signal, this.#timeout(options.timeout));
    const text = JSON.stringify(body);
    return this.#withRetries(path, "idempotent", false, budget, {}, async (attempt) => {
        const token = attempt.headers.authorization;
        if (options.headers !== undefined) attempt.headers = { ...attempt.headers, ...options.headers };
        // The stream outlives this attempt: once open it is bound to the caller's signal alone, but a failed
        // attempt closes its own request.
        const request = new AbortController();
        const follow = () => request.abort(signal.reason);
        signal.addEventListener("abort", follow, { once: true });
        try {
          const response = await this.#post(attempt, path, text, request.signal);
          if (response.status !== 200 || response.body === null) {
            const answer = readBody(response, { maxBytes: this.#config.maxResponseBytes }, attempt.endpoint);
            throw errorFromBody(response.status, await attempt.bounded(answer), attempt.endpoint);
          }
          return { response, body: response.body, endpoint: attempt.endpoint, token };
        } catch (error) {
          signal.removeEventListener("abort", follow);
          request.abort();
          throw error;
        }
    });
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
    budget: Budget,
    options: Pick<CallOptions, "attemptTimeout" | "onSent">,
    run: (attempt: Attempt) => Promise<T>,
    withToken = true,
  ): Promise<T> {
    const perAttempt = policy === "write" ? undefined : (resolveTimeout(options.attemptTimeout, "attemptTimeout") ?? this.#config.attemptTimeout);
    let refreshedToken = false;
    /** Some attempt of this write was sent and its outcome never learned: it may have been applied. */
    let undecided = false;
    for (let tries = 0; ; tries++) {
      // A place on the wire first: waiting for one spends the call's budget, not the attempt's. Signing in
      // takes none: the calls holding every place may be the ones waiting for its token.
      let leave = withToken ? this.#inFlight.tryEnter() : () => {};
      if (leave === undefined) {
        const queued = new CallSignal(budget.signal, Math.max(0, budget.remaining()));
        try {
          leave = await this.#inFlight.enter(queued.signal);
        } catch {
          throw budget.signal?.aborted ? aborted(budget.signal.reason) : timedOut(budget.timeout);
        } finally {
          queued.dispose();
        }
      }
      const index = this.#current;
      const endpoint = this.#config.endpoints[index]!;
      const left = budget.remaining();
      // One timer per attempt: at the attempt's own limit when that comes first, else at the call's end.
      const attemptOnly = perAttempt !== undefined && perAttempt < left;
      const step = new CallSignal(budget.signal, Math.max(0, attemptOnly ? perAttempt : left));
      const attempt = newAttempt(endpoint, this.#baseHeaders, step.signal, options.onSent);
      const startedAt = this.events.on ? performance.now() : 0;
      try {
        if (budget.signal?.aborted) throw aborted(budget.signal.reason, endpoint);
        if (left <= 0) throw timedOut(budget.timeout, { endpoint });
        const pending = withToken ? this.#token?.get() : undefined;
        if (pending !== undefined) attempt.headers = { ...this.#baseHeaders, authorization: await attempt.bounded(pending) };
        const result = await run(attempt);
        if (this.events.on) this.#requestEvent(path, attempt, tries, startedAt);
        return result;
      } catch (thrown) {
        // The place goes back before any backoff: a waiting call may use it meanwhile.
        leave();
        // Cut off after the request left (abort, timeout), or failed in a way that leaves it open.
        const cutOff = step.aborted;
        undecided ||= writes && attempt.sent && (cutOff || outcomeUnknown(thrown));
        const unknown = undecided;
        if (budget.signal?.aborted || (step.timedOut && !attemptOnly) || (thrown instanceof EtcdError && thrown.code === "TIMEOUT" && left <= 0)) {
          // The caller's signal, or the call's whole budget: nothing more is tried.
          const error = budget.signal?.aborted ? aborted(budget.signal.reason, endpoint, unknown) : timedOut(budget.timeout, { endpoint, indeterminate: unknown });
          if (this.events.on && attempt.sent) this.#requestEvent(path, attempt, tries, startedAt, error.code);
          // An endpoint that lets a call time out is no place for the next call either.
          if (error.code === "TIMEOUT") this.#failedOver(index, error.code);
          throw error;
        }
        const timedOutHere = step.timedOut;
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
        const wait = Math.min(backoff(tries), Math.max(0, budget.remaining()));
        if (this.events.on) this.events.emit({ type: "retry", path, endpoint: this.#config.endpoints[this.#current]!, attempt: tries + 1, code: error.code, delayMs: wait });
        await delay(wait, budget.signal).catch(() => {
          throw aborted(budget.signal?.reason, endpoint);
        });
      } finally {
        step.dispose();
        leave();
      }
    }
  }

  /**
   * Hands the request to fetch and waits for the response head, bounded by the attempt's signal even when
   * the fetch implementation queues the request and ignores the signal meanwhile. `requestSignal` is what
   * the request itself is bound to (a stream outlives its attempt).
   */
  async #post(attempt: Attempt, path: string, body: string, requestSignal = attempt.signal): Promise<FetchResponse> {
    const fetch: Fetch = resolveFetch(this.#config.fetch);
    const init = { method: "POST", headers: attempt.headers, body, signal: requestSignal, redirect: "manual" } as const;
    const pending = fetch(attempt.endpoint + path, init);
    attempt.sent = true;
    attempt.onSent?.();
    try {
      const response = await attempt.bounded(pending);
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
    const expected = { path: "/v3/auth/authenticate", schema: authenticate };
    const body = JSON.stringify({ name, password });
    const result = await this.#withRetries(
      expected.path,
      "idempotent",
      false,
      new Budget(undefined, this.#config.timeout),
      {},
      async (attempt) => {
        const response = await this.#post(attempt, expected.path, body);
        const text = readBody(response, { maxBytes: this.#config.maxResponseBytes }, attempt.endpoint);
        return decodeAnswer(expected, response.status, await attempt.bounded(text), attempt.endpoint);
      },
      false,
    );
    if (!result.token) throw noToken();
    return result.token;
  }
}

/** A call's time budget and the caller's signal, with no timer of its own: each attempt arms one. */
class Budget {
  readonly #startedAt = performance.now();

  constructor(
    readonly signal: AbortSignal | undefined,
    /** Milliseconds, Infinity for none. */
    readonly timeout: number,
  ) {}

  /** Milliseconds left of the budget. */
  remaining(): number {
    return this.timeout - (performance.now() - this.#startedAt);
  }
}

function newAttempt(endpoint: string, headers: Record<string, string>, signal: AbortSignal, onSent: (() => void) | undefined): Attempt {
  let cut: Promise<never> | undefined;
  return {
    endpoint,
    headers,
    signal,
    sent: false,
    onSent,
    // One listener for every wait of the attempt, and a fetch that queues a request and ignores the signal
    // still cannot hold the attempt past its limit.
    bounded<T>(promise: Promise<T>): Promise<T> {
      if (signal.aborted) return Promise.reject(signal.reason as unknown);
      cut ??= new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason as unknown), { once: true }));
      return Promise.race([promise, cut]);
    },
  };
}

function toEtcdError(thrown: unknown, endpoint: string, indeterminate: boolean): EtcdError {
  if (thrown instanceof EtcdError) return indeterminate ? undecided(thrown) : thrown;
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  return unavailable(`cannot reach ${endpoint}: ${message}`, { cause: thrown, endpoint, indeterminate });
}
