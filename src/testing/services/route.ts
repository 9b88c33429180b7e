import type { Caller, Member } from "../member.js";
import type { Dialect } from "../wire/dialect.js";
import type { Out } from "../wire/encode.js";
import type { Msg } from "../wire/message.js";
import type { MessageDesc } from "../wire/schema.js";

/** One decoded request as an endpoint sees it. */
export interface Call extends Caller {
  readonly msg: Msg;
  /** Aborts when the client goes away. */
  readonly signal: AbortSignal;
}

/** A request/response endpoint; `handle` may wait (v3lock's lock, v3election's campaign). */
export interface UnaryRoute {
  readonly kind: "unary";
  request(dialect: Dialect): MessageDesc;
  handle(member: Member, call: Call): Out | Promise<Out>;
}

/** A server-streaming endpoint (v3election's observe): one request, NDJSON results until the client leaves. */
export interface ServerStreamRoute {
  readonly kind: "server-stream";
  request(dialect: Dialect): MessageDesc;
  open(member: Member, call: Call): ReadableStream<Uint8Array>;
}

/** A bidirectional stream (lease keepalive, watch): every JSON value of the body is one request. */
export interface BidiRoute {
  readonly kind: "bidi";
  request(dialect: Dialect): MessageDesc;
  /** Whether answers start before the request body ends (watch) or only after it (keepalive, through the gateway). */
  readonly incremental: boolean;
  open(member: Member, caller: Caller, signal: AbortSignal): BidiSession;
}

export interface BidiSession {
  /** Handles one request. */
  receive(msg: Msg): void;
  /** The request body ended (cleanly, or at a request that did not decode). */
  end(): void;
  readonly body: ReadableStream<Uint8Array>;
}

export type Route = UnaryRoute | ServerStreamRoute | BidiRoute;

export const unary = (request: MessageDesc, handle: UnaryRoute["handle"]): UnaryRoute => ({
  kind: "unary",
  request: () => request,
  handle,
});

const encoder = new TextEncoder();

/** An NDJSON response body the caller feeds line by line. */
export class LineStream {
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private done = false;
  /** Lines sent so far. */
  lines = 0;
  readonly body = new ReadableStream<Uint8Array>({
    start: (c) => {
      this.controller = c;
    },
    cancel: () => {
      this.done = true;
    },
  });

  get closed(): boolean {
    return this.done;
  }

  result(result: Out): void {
    this.line({ result });
  }

  /** An error line as the dialect writes it (see Dialect.streamErrorLine). */
  error(line: string): void {
    this.text(line);
  }

  private line(value: Out): void {
    this.text(`${JSON.stringify(value)}\n`);
  }

  private text(text: string): void {
    if (this.done) return;
    this.controller.enqueue(encoder.encode(text));
    this.lines++;
  }

  close(): void {
    if (this.done) return;
    this.done = true;
    this.controller.close();
  }

  fail(reason: unknown): void {
    if (this.done) return;
    this.done = true;
    this.controller.error(reason);
  }
}
