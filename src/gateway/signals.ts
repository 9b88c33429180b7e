import { aborted, timedOut } from "../errors/catalogue.js";
import type { EtcdError } from "../errors/etcd-error.js";
import { resolveSignal } from "./config.js";

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
    resolveSignal(parent);
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
        this.#controller.abort(timedOut(timeout));
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
    if (this.#timedOut) return timedOut(this.#timeout ?? 0, { endpoint });
    return aborted(this.#parent?.reason, endpoint);
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

/** Waits `ms`, or rejects with the abort error as soon as `signal` fires. Never keeps a timer after that. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(aborted(signal.reason));
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted(signal?.reason));
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

/** Aborts with whichever signal aborts first; AbortSignal.any holds its sources weakly, so nothing leaks. */
export function anySignal(...signals: Array<AbortSignal | undefined>): AbortSignal {
  const present = signals.filter((s): s is AbortSignal => resolveSignal(s) !== undefined);
  return present.length === 1 ? present[0]! : AbortSignal.any(present);
}
