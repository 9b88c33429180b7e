import { describe, invalidArgument } from "../errors/catalogue.js";
import { resolveTimeout } from "../gateway/config.js";
import { backgroundTimer, whenAborted } from "../gateway/signals.js";

/**
 * How late the server's end of a stream (or its next message) may come before the client stops waiting for it:
 * at most this, and at most half the stream's life, so that a short stream's silence is told as soon.
 */
export const GRACE_MS = 1_000;

/** The grace a stream of `life` ms gets (see GRACE_MS). */
export function graceOf(life: number): number {
  return Math.min(GRACE_MS, life / 2);
}

/** The longest stream life a timer can keep (setTimeout's limit, about 24.8 days). */
const MAX_IDLE_TIMEOUT = 2_147_483_647;

/**
 * One watch connection's life: closed when the caller aborts, when the watch moves on, or when it has been
 * silent too long. A half-open connection (a paused member, a NAT that dropped the flow) delivers nothing
 * and reports no error: only silence gives it away. The server is asked (gRPC-gateway's `Grpc-Timeout`, the
 * call's deadline) to end the stream cleanly `idle` after it opened, so a healthy stream always speaks within
 * `idle`; the watchdog waits a little longer before it calls the connection dead.
 */
export class WatchStream {
  readonly signal: AbortSignal;
  /** How long the server was asked to keep it open (its Grpc-Timeout), in milliseconds. */
  readonly life: number;
  /** Milliseconds the watchdog allows between two messages. */
  readonly #deadAfter: number;
  readonly #controller = new AbortController();
  readonly #outer: AbortSignal | undefined;
  #unfollow: (() => void) | undefined;
  readonly #openedAt = performance.now();
  #watchdog: ReturnType<typeof setTimeout> | undefined;
  /** When the last message came; undefined while the consumer handles one. */
  #heardAt: number | undefined;
  #silent = false;
  #retired = false;

  constructor(outer: AbortSignal | undefined, life: number) {
    this.signal = this.#controller.signal;
    this.life = life;
    this.#outer = outer;
    // The server's clean end may come a little late (a busy member, a slow proxy).
    this.#deadAfter = life + graceOf(life);
  }

  /** The `Grpc-Timeout` header that makes the server end the stream `idle` ms after it opened, however busy. */
  static serverTimeout(idle: number): Record<string, string> {
    return { "grpc-timeout": `${Math.max(1, Math.round(idle))}m` };
  }

  /** Follows the caller's signal; call before opening. */
  follow(): void {
    const outer = this.#outer;
    if (outer !== undefined) this.#unfollow = whenAborted(outer, () => this.#controller.abort(outer.reason));
  }

  /**
   * A message arrived (or the consumer is done with the last one): the silence starts over. Returns the silence it
   * ends, in milliseconds: after the consumer's pause, how long the stream itself took to send this message.
   */
  heard(): number {
    const last = this.#heardAt ?? 0;
    this.#heardAt = performance.now();
    if (this.#watchdog === undefined && !this.signal.aborted) this.#arm(this.#deadAfter);
    return this.#heardAt - last;
  }

  /** While the consumer handles a batch, its slowness is not the server's silence. */
  pause(): void {
    this.#heardAt = undefined;
  }

  /**
   * One timer per silence rather than one per message (a hot line's stream carries a message per handoff): when
   * it fires it measures the silence since the last message, and sleeps again for what is left of the limit.
   */
  #arm(ms: number): void {
    this.#watchdog = backgroundTimer(() => {
      this.#watchdog = undefined;
      const silence = this.#heardAt === undefined ? 0 : performance.now() - this.#heardAt;
      if (silence < this.#deadAfter) return this.#arm(this.#deadAfter - silence);
      this.#silent = true;
      this.#controller.abort();
    }, ms);
  }

  /** Closes the connection for a successor that takes over (see `retired`). */
  retire(): void {
    this.#retired = true;
    this.close();
  }

  /** Whether the connection was closed because its successor took over: an end as clean as the server's. */
  get retired(): boolean {
    return this.#retired;
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
    clearTimeout(this.#watchdog);
    this.#watchdog = undefined;
    this.#unfollow?.();
    this.#controller.abort();
  }
}

/**
 * `idleTimeout`, which must be finite: every stream is given an end the server keeps to (Grpc-Timeout), so
 * that silence past it tells a dead connection, and etcd refuses a timeout that is not a number.
 */
export function resolveIdleTimeout(value: unknown): number | undefined {
  const idle = resolveTimeout(value, "idleTimeout");
  if (idle !== undefined && !(idle <= MAX_IDLE_TIMEOUT)) {
    throw invalidArgument(
      `idleTimeout must be at most ${MAX_IDLE_TIMEOUT} ms: each watch stream needs an end the server keeps to, ` +
        `got ${describe(value)}`,
    );
  }
  return idle;
}
