import { EtcdError, EtcdTimeoutError } from "../errors.js";

const MAX_TIMER_MS = 2_147_483_647;

/**
 * One signal for one call: aborts when the caller's signal does or when the call's time budget runs out,
 * and remembers which of the two it was so the error says so.
 */
export class CallSignal {
  readonly signal: AbortSignal;
  readonly #controller = new AbortController();
  readonly #parent: AbortSignal | undefined;
  readonly #timeout: number | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timedOut = false;
  readonly #onParentAbort = () => this.#controller.abort(this.#parent?.reason);

  constructor(parent: AbortSignal | undefined, timeout: number | undefined) {
    this.signal = this.#controller.signal;
    this.#parent = parent;
    this.#timeout = timeout;
    if (parent?.aborted) {
      this.#controller.abort(parent.reason);
      return;
    }
    parent?.addEventListener("abort", this.#onParentAbort, { once: true });
    // Beyond 2^31-1 ms timers fire at once; such a budget is as good as none.
    if (timeout !== undefined && timeout <= MAX_TIMER_MS) {
      this.#timer = setTimeout(() => {
        this.#timedOut = true;
        this.#controller.abort(new EtcdTimeoutError(timeout));
      }, timeout);
    }
  }

  get timedOut(): boolean {
    return this.#timedOut;
  }

  get aborted(): boolean {
    return this.#controller.signal.aborted;
  }

  /** The error to throw now that the signal has fired. */
  error(endpoint?: string): EtcdError {
    if (this.#timedOut) return new EtcdTimeoutError(this.#timeout ?? 0, endpoint === undefined ? {} : { endpoint });
    return abortError(this.#parent?.reason, endpoint);
  }

  /** Stops the clock: the rest of the call (a stream's life) is bounded only by the caller's signal. */
  stopTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  dispose(): void {
    this.stopTimer();
    this.#parent?.removeEventListener("abort", this.#onParentAbort);
  }
}

export function abortError(reason: unknown, endpoint?: string): EtcdError {
  if (reason instanceof EtcdError) return reason;
  return new EtcdError("ABORTED", "the operation was aborted", endpoint === undefined ? { cause: reason } : { cause: reason, endpoint });
}

/** Waits `ms`, or rejects with the abort error as soon as `signal` fires. Never keeps a timer after that. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal.reason));
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal?.reason));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Waits for `promise` unless `signal` aborts first (the work behind the promise goes on for others). */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** Full-jitter exponential backoff: a random wait in [0, min(cap, base * 2^attempt)). */
export function backoff(attempt: number, base = 25, cap = 1_000): number {
  return Math.random() * Math.min(cap, base * 2 ** attempt);
}
