import { backgroundTimer } from "../gateway/signals.js";

/**
 * One watch connection's life: closed when the caller aborts, when the watch moves on, or when it has been
 * silent too long. A half-open connection (a paused member, a NAT that dropped the flow) delivers nothing
 * and reports no error: only silence gives it away. The server is asked (gRPC-gateway's `Grpc-Timeout`) to
 * end a quiet stream cleanly after `idle`, so a healthy stream always speaks within `idle`; the watchdog
 * waits a little longer before it calls the connection dead.
 */
export class WatchStream {
  readonly signal: AbortSignal;
  /** Milliseconds the watchdog allows between two messages. */
  readonly #deadAfter: number;
  readonly #controller = new AbortController();
  readonly #outer: AbortSignal | undefined;
  readonly #onOuterAbort = () => this.#controller.abort(this.#outer?.reason);
  readonly #openedAt = performance.now();
  #watchdog: ReturnType<typeof setTimeout> | undefined;
  #silent = false;

  constructor(outer: AbortSignal | undefined, idle: number) {
    this.signal = this.#controller.signal;
    this.#outer = outer;
    // The server's clean end may come a little late (a busy member, a slow proxy): a second of grace.
    this.#deadAfter = idle + 1_000;
  }

  /** The `Grpc-Timeout` header that makes the server end a quiet stream after `idle` ms. */
  static serverTimeout(idle: number): Record<string, string> {
    return { "grpc-timeout": `${Math.max(1, Math.round(idle))}m` };
  }

  /** Follows the caller's signal; call before opening. */
  follow(): void {
    if (this.#outer?.aborted) this.#controller.abort(this.#outer.reason);
    else this.#outer?.addEventListener("abort", this.#onOuterAbort, { once: true });
  }

  /** A message arrived (or the consumer is done with the last one): the silence starts over. */
  heard(): void {
    this.pause();
    this.#watchdog = backgroundTimer(() => {
      this.#silent = true;
      this.#controller.abort();
    }, this.#deadAfter);
  }

  /** While the consumer handles a batch, its slowness is not the server's silence. */
  pause(): void {
    if (this.#watchdog !== undefined) clearTimeout(this.#watchdog);
    this.#watchdog = undefined;
  }

  /** Whether the watchdog closed the connection. */
  get silent(): boolean {
    return this.#silent;
  }

  /** Milliseconds since the connection was opened. */
  get age(): number {
    return performance.now() - this.#openedAt;
  }

  close(): void {
    this.pause();
    this.#outer?.removeEventListener("abort", this.#onOuterAbort);
    this.#controller.abort();
  }
}
