import { aborted, gatewayCannotDial, noToken, timedOut, undecided, unreachable } from "../errors/catalogue.js";
import { publishWatchHeldBack, traceRequest } from "../events/channels.js";
import { EventSink } from "../events/events.js";
import { EtcdError, type EtcdErrorCode, EtcdServerError } from "../errors/etcd-error.js";
import { VERSION } from "../version.js";
import { AuthToken, headersOf, passwordOf, Secrets } from "./auth.js";
import { type BodyLimits, readBody } from "./body.js";
import { type GatewayConfig, resolveSignal, resolveTimeout } from "./config.js";
import { decodeAnswer, type Expected } from "./decode.js";
import { type Fetch, type FetchResponse, resolveFetch } from "./fetch.js";
import { backoff, mayRetry, outcomeUnknown, type RetryPolicy } from "./retry-policy.js";
import { errorFromBody } from "./status.js";
import { Attempt } from "./attempt.js";
import { InFlight } from "./in-flight.js";
import { networkFailure } from "./network-failure.js";
import { CallSignal, delay, whenAborted } from "./signals.js";
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
  /** @internal Told when a send was answered without effect (a batch refused as a whole, resent alone). */
  onRefused?: (() => void) | undefined;
  /** @internal The endpoint not to try first, when there is another (one that may have stalled). */
  avoid?: string | undefined;
  /** @internal Made by the client on its own (a background renewal): no caller's span traces it. */
  background?: boolean | undefined;
}

/** One request/response call. */
export interface Unary<T> extends Expected<T> {
  body: unknown;
  /** The body already serialised (a prepared request): sent as is, `body` is not looked at. */
  json?: string | undefined;
  retry: RetryPolicy;
  /**
   * Whether the call changes the store, so that a lost answer leaves its outcome unknown.
   * Default: `retry === "write"`.
   */
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

/**
 * How long streams through an endpoint are taken for held back after one was: the lock core waits on reads
 * there meanwhile, then tries a stream again (a proxy's configuration may have been mended).
 */
const HELD_BACK_FOR = 60_000;

/**
 * Sends JSON requests to the gateway: endpoint failover, a time budget per call and per attempt, abort,
 * jittered retries where the retry policy allows them, and the auth token on every request.
 */
export class Transport {
  readonly #config: GatewayConfig;
  readonly #baseHeaders: Record<string, string>;
  readonly #token: AuthToken | undefined;
  /** Every secret this client sends, kept out of the errors it throws. */
  readonly #secrets: Secrets;
  readonly #inFlight: InFlight;
  /** @internal Where events go; `events.on` is false when nobody listens. */
  readonly events: EventSink;
  /** Endpoints whose streams came back held back (a buffering proxy), with when that was last seen. */
  readonly #heldBack = new Map<string, number>();
  #current = 0;

  constructor(config: GatewayConfig) {
    this.#config = config;
    this.#baseHeaders = {
      "content-type": "application/json",
      "user-agent": `etcd-edge/${VERSION}`,
      ...(config.requireLeader ? { "grpc-metadata-hasleader": "true" } : {}),
      ...headersOf(config.headers),
    };
    this.#secrets = new Secrets(config);
    this.events = new EventSink(config.onEvent);
    this.#inFlight = new InFlight(config.maxConcurrentRequests);
    const auth = config.auth;
    this.#token =
      auth === undefined
        ? undefined
        : new AuthToken(() => this.#authenticate(auth.username, passwordOf(auth)), this.#secrets);
  }

  get config(): GatewayConfig {
    return this.#config;
  }

  /** The endpoint calls go to now (the next one after a failover). */
  get endpoint(): string {
    return this.#config.endpoints[this.#current]!;
  }

  /**
   * One request/response call, parsed and validated against its schema. `withToken: false` for signing in,
   * which neither waits for a token nor takes a place on the wire.
   */
  unary<T>(request: Unary<T>, options: CallOptions = {}, withToken = true): Promise<T> {
    const writes = request.writes ?? request.retry === "write";
    const call = new Call(
      request.path,
      request.retry,
      writes,
      resolveSignal(options.signal),
      this.#timeout(options.timeout),
      options,
    );
    call.avoid = options.avoid;
    // Serialised once, whatever the number of attempts.
    const body = request.json ?? JSON.stringify(request.body);
    const limits = { maxBytes: this.#config.maxResponseBytes, firstLine: request.firstLine };
    return traceRequest(call, () =>
      this.#withRetries(
        call,
        // One request and its answer, read and checked; the attempt bounds the whole exchange.
        (attempt) => attempt.bounded(receive(attempt, this.#post(attempt, request.path, body), request, limits)),
        withToken,
      ),
    );
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
    options: {
      timeout?: number | undefined;
      headers?: Record<string, string> | undefined;
      /** The endpoint not to try first, when there is another (a second stream beside one that may stall). */
      avoid?: string | undefined;
      /** Opened by the client on its own (a stream's renewal). */
      background?: boolean | undefined;
    } = {},
  ): Promise<OpenStream> {
    const call = new Call(path, "idempotent", false, signal, this.#timeout(options.timeout), options);
    call.avoid = options.avoid;
    const text = JSON.stringify(body);
    const opening = async (attempt: Attempt): Promise<OpenStream> => {
      const token = attempt.headers.authorization;
      if (options.headers !== undefined) attempt.headers = { ...attempt.headers, ...options.headers };
      // The stream outlives this attempt: once open it is bound to the caller's signal alone, but a failed
      // attempt closes its own request.
      const request = new AbortController();
      const unfollow = whenAborted(signal, () => request.abort(signal.reason));
      try {
        const response = await attempt.bounded(arrive(attempt, this.#post(attempt, path, text, request.signal)));
        if (response.status !== 200 || response.body === null) {
          const answer = readBody(response, { maxBytes: this.#config.maxResponseBytes }, attempt.endpoint);
          throw errorFromBody(response.status, await attempt.bounded(answer), attempt.endpoint);
        }
        return { response, body: response.body, endpoint: attempt.endpoint, token };
      } catch (error) {
        unfollow();
        request.abort();
        throw error;
      }
    };
    return traceRequest(call, () => this.#withRetries(call, opening));
  }

  /** A stream was cancelled for this token: the next request authenticates again. */
  tokenRejected(token: string | undefined): void {
    if (token !== undefined) this.#token?.rejected(token);
  }

  /**
   * @internal A stream through `endpoint` came back held back whole (a buffering proxy): remembered for
   * HELD_BACK_FOR, and told once (`onEvent`, diagnostics_channel).
   */
  streamHeldBack(endpoint: string): void {
    const told = this.#heldBack.has(endpoint);
    this.#heldBack.set(endpoint, performance.now());
    if (told) return;
    if (this.events.on) this.events.emit({ type: "watch.heldBack", endpoint });
    publishWatchHeldBack(endpoint);
  }

  /** @internal Whether a stream through the current endpoint came back held back within HELD_BACK_FOR. */
  get streamsHeldBack(): boolean {
    const seen = this.#heldBack.get(this.endpoint);
    return seen !== undefined && performance.now() - seen < HELD_BACK_FOR;
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
   * Runs `attempt` on the current endpoint, moving on to the next one when it fails in a way the call's
   * retry policy allows to repeat. A repeatable call gives each endpoint at most `attemptTimeout`, so one
   * silent member costs one attempt rather than the whole budget; a write that may not be repeated keeps the
   * whole budget for its one attempt. An error after the request was handed to fetch says whether the
   * outcome is unknown.
   */
  async #withRetries<T>(call: Call, run: (attempt: Attempt) => Promise<T>, withToken = true): Promise<T> {
    const perAttempt =
      call.policy === "write"
        ? undefined
        : (resolveTimeout(call.attemptTimeout, "attemptTimeout") ?? this.#config.attemptTimeout);
    for (; ; call.tries++) {
      // A place on the wire first: waiting for one spends the call's budget, not the attempt's. Signing in
      // takes none: the calls holding every place may be the ones waiting for its token.
      let placed = withToken && this.#inFlight.tryEnter();
      if (withToken && !placed) {
        await this.#waitForPlace(call);
        placed = true;
      }
      const endpoints = this.#config.endpoints;
      let index = this.#current;
      if (call.tries === 0 && call.avoid === endpoints[index] && endpoints.length > 1) {
        index = (index + 1) % endpoints.length;
      }
      const endpoint = endpoints[index]!;
      call.endpoint = endpoint;
      const left = call.remaining();
      // One timer per attempt: at the attempt's own limit when that comes first, else at the call's end.
      const attemptOnly = perAttempt !== undefined && perAttempt < left;
      const attempt = new Attempt(
        endpoint,
        this.#baseHeaders,
        call.signal,
        Math.max(0, attemptOnly ? perAttempt : left),
        call.onSent,
      );
      const startedAt = this.events.on ? performance.now() : 0;
      try {
        if (call.signal?.aborted) throw aborted(call.signal.reason, endpoint);
        if (left <= 0) throw timedOut(call.timeout, { endpoint, ...call.what });
        const pending = withToken ? this.#token?.get() : undefined;
        if (pending !== undefined)
          attempt.headers = { ...this.#baseHeaders, authorization: await attempt.bounded(pending) };
        const result = await run(attempt);
        if (this.events.on) this.#requestEvent(call.path, attempt, call.tries, startedAt);
        return result;
      } catch (thrown) {
        // The place goes back before any backoff: a waiting call may use it meanwhile.
        if (placed) this.#inFlight.leave();
        placed = false;
        await this.#afterFailure(call, attempt, this.#secrets.redact(thrown), { index, left, attemptOnly, startedAt });
      } finally {
        if (attempt.status !== undefined) call.status = attempt.status;
        attempt.dispose();
        if (placed) this.#inFlight.leave();
      }
    }
  }

  /** Waits for a place on the wire within the call's budget. */
  async #waitForPlace(call: Call): Promise<void> {
    const queued = new CallSignal(call.signal, Math.max(0, call.remaining()));
    try {
      await this.#inFlight.enter(queued.signal);
    } catch {
      throw call.signal?.aborted ? aborted(call.signal.reason) : timedOut(call.timeout, call.what);
    } finally {
      queued.dispose();
    }
  }

  /**
   * After a failed attempt: throws what the call fails with, or returns (after a backoff) when it is to be
   * tried again.
   */
  async #afterFailure(
    call: Call,
    attempt: Attempt,
    thrown: unknown,
    { index, left, attemptOnly, startedAt }: { index: number; left: number; attemptOnly: boolean; startedAt: number },
  ): Promise<void> {
    const { endpoint } = attempt;
    const signal = call.signal;
    // Cut off after the request left (abort, timeout), or failed in a way that leaves it open.
    call.undecided ||= call.writes && attempt.sent && (attempt.aborted || outcomeUnknown(thrown));
    const unknown = call.undecided;
    if (
      signal?.aborted ||
      (attempt.timedOut && !attemptOnly) ||
      (thrown instanceof EtcdError && thrown.code === "TIMEOUT" && left <= 0)
    ) {
      // The caller's signal, or the call's whole budget: nothing more is tried.
      const error = signal?.aborted
        ? aborted(signal.reason, endpoint, unknown)
        : timedOut(call.timeout, { endpoint, indeterminate: unknown, ...call.what });
      if (this.events.on && attempt.sent) this.#requestEvent(call.path, attempt, call.tries, startedAt, error.code);
      // An endpoint that lets a call time out is no place for the next call either.
      if (error.code === "TIMEOUT") this.#failedOver(index, error.code);
      throw error;
    }
    const timedOutHere = attempt.timedOut;
    const error = timedOutHere ? attempt.error(endpoint, unknown) : toEtcdError(thrown, endpoint, unknown);
    if (this.events.on && attempt.sent) this.#requestEvent(call.path, attempt, call.tries, startedAt, error.code);
    const token = attempt.headers.authorization;
    if (error.code === "UNAUTHENTICATED" && token !== undefined && !call.refreshedToken) {
      // The token expired or the server restarted with new tokens: the request was refused unapplied.
      call.refreshedToken = true;
      this.#token?.rejected(token);
      call.tries--;
      return;
    }
    if (
      call.tries >= this.#config.retries ||
      !(timedOutHere ? call.policy === "idempotent" : mayRetry(error, thrown, call.policy))
    )
      throw error;
    this.#failedOver(index, error.code);
    const wait = Math.min(backoff(call.tries), Math.max(0, call.remaining()));
    if (this.events.on)
      this.events.emit({
        type: "retry",
        path: call.path,
        endpoint: this.#config.endpoints[this.#current]!,
        attempt: call.tries + 1,
        code: error.code,
        delayMs: wait,
      });
    await delay(wait, signal).catch(() => {
      throw aborted(signal?.reason, endpoint);
    });
  }

  /** Hands the request to fetch. `requestSignal` is what the request is bound to (a stream outlives its attempt). */
  #post(attempt: Attempt, path: string, body: string, requestSignal = attempt.signal): Promise<FetchResponse> {
    const fetch: Fetch = resolveFetch(this.#config.fetch);
    const pending = fetch(attempt.endpoint + path, {
      method: "POST",
      headers: attempt.headers,
      body,
      signal: requestSignal,
      redirect: "manual",
    });
    attempt.sent = true;
    attempt.onSent?.();
    return pending;
  }

  /** Moves on from a failed endpoint, unless a concurrent call already did. */
  #failedOver(index: number, code: EtcdErrorCode): void {
    if (this.#current !== index) return;
    const endpoints = this.#config.endpoints;
    this.#current = (index + 1) % endpoints.length;
    if (this.events.on && this.#current !== index)
      this.events.emit({ type: "failover", from: endpoints[index]!, to: endpoints[this.#current]!, code });
  }

  #requestEvent(path: string, attempt: Attempt, tries: number, startedAt: number, code?: EtcdErrorCode): void {
    const ms = performance.now() - startedAt;
    this.events.emit({
      type: "request",
      path,
      endpoint: attempt.endpoint,
      status: attempt.status,
      code,
      ms,
      attempt: tries + 1,
    });
  }

  /** Not bound to any one caller's signal: concurrent callers share it, each waiting with its own. */
  async #authenticate(name: string, password: string): Promise<string> {
    const result = await this.unary(
      { path: "/v3/auth/authenticate", body: { name, password }, schema: authenticate, retry: "idempotent" },
      {},
      false,
    );
    if (!result.token) throw noToken();
    return result.token;
  }
}

/** One call: what it is, its time budget and the caller's signal, and what its attempts so far showed. */
class Call {
  readonly #startedAt = performance.now();
  readonly attemptTimeout: number | undefined;
  readonly onSent: (() => void) | undefined;
  /** Attempts made so far, less one. */
  tries = 0;
  /** Where its latest attempt went. */
  endpoint = "";
  /** The auth token was refreshed once after an UNAUTHENTICATED answer. */
  refreshedToken = false;
  /** Some attempt of this write was sent and its outcome never learned: it may have been applied. */
  undecided = false;
  /** The endpoint its first attempt should not use, when there is another. */
  avoid: string | undefined;
  /** The HTTP status of its latest answer, 0 before one. */
  status = 0;
  readonly background: boolean;

  constructor(
    readonly path: string,
    readonly policy: RetryPolicy,
    /** Whether the call changes the store, so that a lost answer leaves its outcome unknown. */
    readonly writes: boolean,
    readonly signal: AbortSignal | undefined,
    /** Milliseconds, Infinity for none. */
    readonly timeout: number,
    options: Pick<CallOptions, "attemptTimeout" | "onSent" | "background">,
  ) {
    this.attemptTimeout = options.attemptTimeout;
    this.onSent = options.onSent;
    this.background = options.background === true;
  }

  /** What a TIMEOUT names: the call, and where its budget comes from. */
  get what(): { what: string; hint: string } {
    return {
      what: `the ${this.path} call`,
      hint: ": that is its whole budget, retries included (the call's `timeout` option, else the client's)",
    };
  }

  /** Milliseconds left of the budget. */
  remaining(): number {
    return this.timeout - (performance.now() - this.#startedAt);
  }
}

/** The answer, read and checked, once it comes. */
async function receive<T>(
  attempt: Attempt,
  pending: Promise<FetchResponse>,
  expected: Expected<T>,
  limits: BodyLimits,
): Promise<T> {
  const response = await arrive(attempt, pending);
  const text = await readBody(response, limits, attempt.endpoint);
  return decodeAnswer(expected, response.status, text, attempt.endpoint);
}

/**
 * The response head, once it comes, with its status recorded. One that comes after its attempt gave up (a
 * fetch that ignores its signal) has its body dropped, so that it does not hold its connection.
 */
async function arrive(attempt: Attempt, pending: Promise<FetchResponse>): Promise<FetchResponse> {
  const response = await pending;
  attempt.status = response.status;
  if (attempt.aborted) {
    response.body?.cancel().catch(() => {});
    throw attempt.signal.reason;
  }
  return response;
}

/**
 * What etcd's gateway answers (503, gRPC code 14) when its own TLS connection to its member fails: the
 * member refused the gateway's certificate, which is its server certificate. Under TLS 1.3 the gateway may
 * learn it only on its first write, as a broken pipe or a reset on its loopback connection (met on 3.6.16 and
 * 3.7.3 in CI), or as its own side of that connection closed under it (met on 3.4.23 in CI). "preface": the
 * client's or the server's HTTP/2 preface, the first thing either side sends on it.
 */
const SELF_DIAL = new RegExp(
  "^(connection closed|use of closed network connection|" +
    "write tcp \\S+: write: (broken pipe|connection reset by peer))$|" +
    "preface|handshake failed|tls: bad certificate",
);

function toEtcdError(thrown: unknown, endpoint: string, indeterminate: boolean): EtcdError {
  if (thrown instanceof EtcdError) {
    const named =
      thrown instanceof EtcdServerError &&
      thrown.grpcCode === 14 &&
      endpoint.startsWith("https:") &&
      SELF_DIAL.test(thrown.message)
        ? gatewayCannotDial(thrown)
        : thrown;
    return indeterminate ? undecided(named) : named;
  }
  return unreachable(endpoint, networkFailure(thrown).why(endpoint), { cause: thrown, indeterminate });
}
