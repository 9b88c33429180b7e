import type { ConnectionOptions } from "node:tls";
import { buildConnector, type Dispatcher } from "undici";
import { ByteBuffer } from "../gateway/byte-buffer.js";
import { type FetchInit, type FetchResponse, READ_BOUNDED, type ReadBounded } from "../gateway/fetch.js";

/**
 * One gateway request through undici's `dispatch` with a handler of our own, for less client CPU per
 * request than `request()`, which wraps every answer in a Node Readable and an async resource. Redirects
 * are not followed: `dispatch` never does.
 */
export function send(dispatcher: Dispatcher, target: Target, init: FetchInit): Promise<FetchResponse> {
  // The SDK always passes a signal; direct callers (the benchmarks' raw baseline) may not, as with fetch.
  const signal: AbortSignal | undefined = init.signal;
  // Nothing is sent for a call that already gave up.
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  return new Promise((resolve, reject) => {
    const exchange = new Exchange(signal, resolve, reject);
    dispatcher.dispatch(
      { origin: target.origin, path: target.path, method: init.method, headers: init.headers, body: init.body },
      exchange,
    );
  });
}

/**
 * undici's connector with these TLS options, keeping a TLS alert as the error of the request it ends. A TLS
 * 1.3 server refuses a client certificate (or its absence) once the client's side of the handshake is done,
 * on a connection undici already uses; undici would report the close that follows ("other side closed").
 * Destroyed at the alert, the socket closes with the alert as its error.
 */
export function connector(tls: ConnectionOptions): buildConnector.connector {
  const connect = buildConnector(tls);
  return (options, callback) =>
    connect(options, (...args) => {
      const socket = args[1];
      socket?.once("error", (error: { code?: unknown }) => {
        if (typeof error.code === "string" && error.code.startsWith("ERR_SSL_")) socket.destroy();
      });
      callback(...args);
    });
}

/** Where a request goes, as `dispatch` takes it. */
export interface Target {
  origin: string;
  path: string;
}

/**
 * The targets of URLs seen lately: a client sends to its few endpoints' few paths, and parsing a URL costs
 * more than the rest of handing a request to undici. Bounded: cleared when full.
 */
export class Targets {
  readonly #seen = new Map<string, Target>();

  of(url: string): Target {
    let target = this.#seen.get(url);
    if (target === undefined) {
      const { origin, pathname, search } = new URL(url);
      target = { origin, path: pathname + search };
      if (this.#seen.size >= 64) this.#seen.clear();
      this.#seen.set(url, target);
    }
    return target;
  }
}

/**
 * Body bytes held while nobody reads them yet (the caller has the head but has not asked for the body):
 * past this the connection is paused until a reader comes, whatever the server keeps sending. An answer
 * smaller than this, which is almost every answer, completes without a pause.
 */
const UNREAD_LIMIT = 64 * 1024;

/** How long the rest of a body read to its first line may take to end before it is dropped (see readBounded). */
const REST_MS = 250;

/** Where the body goes once someone reads it: `false` from `data` asks for a pause until `resume`. */
interface Sink {
  data(chunk: Uint8Array): boolean;
  end(): void;
  error(error: unknown): void;
}

/**
 * The handler of one request and the reading of its answer. Undici calls the `on…` methods, the caller's
 * signal `handleEvent`; the answer's one reader (READ_BOUNDED, `body` or `text()`) attaches a {@link Sink}.
 */
class Exchange implements Dispatcher.DispatchHandler {
  readonly #signal: AbortSignal | undefined;
  /** The fetch promise's, until the head comes or the exchange fails. */
  #resolve: ((response: FetchResponse) => void) | undefined;
  #reject: ((error: unknown) => void) | undefined;
  #controller: Dispatcher.DispatchController | undefined;
  /** Bytes that came before the reader; allocated only then (most readers come before the body does). */
  #unread: Uint8Array[] | undefined;
  #unreadBytes = 0;
  #sink: Sink | undefined;
  /** A reader has attached (its sink may since have let go). */
  #read = false;
  /** Undici has delivered the whole body (the reader may not have it all yet). */
  #ended = false;
  /** Undici's error, the signal's abort, or the reader dropping the rest: no more bytes are passed on. */
  #failed = false;
  #error: unknown;

  constructor(
    signal: AbortSignal | undefined,
    resolve: (response: FetchResponse) => void,
    reject: (error: unknown) => void,
  ) {
    this.#signal = signal;
    this.#resolve = resolve;
    this.#reject = reject;
    // The exchange itself listens (handleEvent): no closure per request, and the same object to remove.
    signal?.addEventListener("abort", this);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // Aborted while queued for a connection: the promise is already rejected, and the request must not go out.
    if (this.#failed) controller.abort(this.#error as Error);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    // 1xx heads are followed by the real one (as undici's `request` does, they are skipped).
    const resolve = this.#resolve;
    if (statusCode < 200 || resolve === undefined) return;
    this.#resolve = this.#reject = undefined;
    resolve(new Answer(this, statusCode));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Uint8Array): void {
    // A parser resumed in the middle of a body chunk reports an empty one: passing it on would wake a
    // stream's reader for nothing, which reads again, resumes again, and so on without end.
    if (this.#failed || chunk.byteLength === 0) return;
    if (this.#sink !== undefined) {
      if (!this.#sink.data(chunk)) controller.pause();
      return;
    }
    (this.#unread ??= []).push(chunk);
    this.#unreadBytes += chunk.byteLength;
    if (this.#unreadBytes > UNREAD_LIMIT) controller.pause();
  }

  onResponseEnd(): void {
    if (this.#failed) return;
    this.#ended = true;
    this.#release();
    this.#sink?.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.#fail(error);
  }

  /** The caller's signal aborted: before the head the fetch rejects, after it the body read does. */
  handleEvent(): void {
    const reason = abortReason(this.#signal);
    this.#fail(reason);
    // Frees the connection; undici answers with onResponseError, which finds the exchange already failed.
    this.#controller?.abort(reason as Error);
  }

  /** Ends the exchange with `error`: the pending head, or the reader (now or once it comes), gets it. */
  #fail(error: unknown): void {
    if (this.#failed || this.#ended) return;
    this.#failed = true;
    this.#error = error;
    this.#unread = undefined;
    this.#release();
    const reject = this.#reject;
    this.#resolve = this.#reject = undefined;
    reject?.(error);
    this.#sink?.error(error);
  }

  /**
   * The reader let go before the end: the rest is dropped with its connection (a pooled one
   * cannot be reused mid-answer).
   */
  #drop(): void {
    this.#sink = undefined;
    if (this.#failed || this.#ended) return;
    this.#fail(new DOMException("The answer's body was dropped", "AbortError"));
    this.#controller?.abort(this.#error as Error);
  }

  /** No listener outlives the request: the signal may be long-lived (a caller's, shared by many calls). */
  #release(): void {
    this.#signal?.removeEventListener("abort", this);
  }

  /** Hands the bytes held so far to `sink`, then the rest as it comes (resuming a paused connection). */
  #attach(sink: Sink): void {
    // As with fetch's Response, a body is read once: a second reader gets an error, not half the bytes.
    if (this.#read) return sink.error(new TypeError("The answer's body is already being read"));
    this.#read = true;
    if (this.#failed) return sink.error(this.#error);
    this.#sink = sink;
    const unread = this.#unread;
    this.#unread = undefined;
    this.#unreadBytes = 0;
    let more = true;
    for (const chunk of unread ?? []) {
      // The sink may stop reading (a bounded read that has enough) in the middle.
      if (this.#sink !== sink) return;
      more = sink.data(chunk);
    }
    if (this.#sink !== sink) return;
    if (this.#ended) sink.end();
    else if (more) this.#controller?.resume();
  }

  /**
   * The SDK's bounded read (see READ_BOUNDED), with the same limits as its reading of a web stream. After a
   * first line the rest is read and discarded for REST_MS: a keepalive's answer ends right after its line (through
   * a proxy, in a later packet), and a body read to its end keeps its connection for the next request, where a
   * dropped one costs that request a new connection (and a TLS handshake). A body that goes on is dropped then.
   */
  readBounded(maxBytes: number, firstLine: boolean): Promise<Uint8Array | undefined> {
    return new Promise((resolve, reject) => {
      const received = new ByteBuffer(maxBytes);
      let rest: ReturnType<typeof setTimeout> | undefined;
      this.#attach({
        data: (chunk) => {
          if (rest !== undefined) return true;
          const outcome = received.appendBounded(chunk, firstLine);
          if (outcome === "over") {
            this.#drop();
            resolve(undefined);
          } else if (outcome === "line") {
            resolve(received.take());
            rest = setTimeout(() => this.#drop(), REST_MS).unref();
          }
          return true;
        },
        end: () => {
          clearTimeout(rest);
          resolve(received.take());
        },
        error: (error) => {
          clearTimeout(rest);
          reject(error);
        },
      });
    });
  }

  text(): Promise<string> {
    return new Promise((resolve, reject) => {
      const decoder = new TextDecoder();
      let text = "";
      this.#attach({
        data: (chunk) => {
          text += decoder.decode(chunk, { stream: true });
          return true;
        },
        end: () => resolve(text + decoder.decode()),
        error: reject,
      });
    });
  }

  /**
   * The body as a web stream with backpressure (the connection pauses while a chunk waits to be read) and
   * cancellation (which drops the connection): for watch streams, and for the SDK's reading of an error.
   */
  webStream(): ReadableStream<Uint8Array> {
    return new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.#attach({
          data: (chunk) => {
            controller.enqueue(chunk);
            return (controller.desiredSize ?? 0) > 0;
          },
          end: () => controller.close(),
          error: (error) => controller.error(error),
        });
      },
      pull: () => this.#controller?.resume(),
      cancel: () => this.#drop(),
    });
  }
}

/**
 * The response handed to the SDK. A class rather than an object literal with a getter and a symbol key,
 * which V8 builds on its slow path (measured at about 20 times the cost of this class, per request).
 */
class Answer implements FetchResponse {
  readonly status: number;
  /** An own bound function: the SDK takes it off the response and calls it without a receiver. */
  readonly [READ_BOUNDED]: ReadBounded;
  readonly #exchange: Exchange;
  #body: ReadableStream<Uint8Array> | undefined;

  constructor(exchange: Exchange, status: number) {
    this.status = status;
    this.#exchange = exchange;
    this[READ_BOUNDED] = (maxBytes, firstLine) => exchange.readBounded(maxBytes, firstLine);
  }

  get body(): ReadableStream<Uint8Array> {
    this.#body ??= this.#exchange.webStream();
    return this.#body;
  }

  text(): Promise<string> {
    return this.#exchange.text();
  }
}

function abortReason(signal: AbortSignal | undefined): unknown {
  return signal?.reason ?? new DOMException("This operation was aborted", "AbortError");
}
