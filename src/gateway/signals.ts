import { aborted, timedOut } from "../errors/catalogue.js";
import type { EtcdError } from "../errors/etcd-error.js";
import { resolveSignal } from "./config.js";

const MAX_TIMER_MS = 2_147_483_647;

/**
 * One signal for one call (or one attempt of it): aborts when the parent signal does or when the time
 * budget runs out, and remembers which of the two it was so the error says so. Every request makes one (see
 * Attempt), so it allocates no closure: it is its own listener on the parent (`handleEvent`), and its timer
 * calls back with it as the argument.
 */
export class CallSignal {
  readonly #controller = new AbortController();
  readonly #parent: AbortSignal | undefined;
  readonly #timeout: number | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timedOut = false;

  /** Starts the clock and follows `parent`; `dispose()` stops both. */
  constructor(
    parent: AbortSignal | undefined,
    timeout: number | undefined,
    /** What a TIMEOUT names ("tryLock of lock x"); "request" when unsaid. */
    readonly what?: string,
  ) {
    resolveSignal(parent);
    this.#parent = parent;
    this.#timeout = timeout;
    if (parent?.aborted) {
      // Aborted from the start: nothing can be waiting on it yet, so `onAbort` is not told.
      this.#controller.abort(parent.reason);
      return;
    }
    parent?.addEventListener("abort", this);
    // Beyond 2^31-1 ms timers fire at once; such a budget is as good as none.
    if (timeout !== undefined && timeout <= MAX_TIMER_MS) this.#timer = setTimeout(expire, timeout, this);
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  get timedOut(): boolean {
    return this.#timedOut;
  }

  get aborted(): boolean {
    return this.#controller.signal.aborted;
  }

  /** The error to throw now that the signal has fired; `indeterminate` when a write was sent unanswered. */
  error(endpoint?: string, indeterminate = false): EtcdError {
    if (this.#timedOut) return timedOut(this.#timeout ?? 0, { endpoint, indeterminate, what: this.what });
    return aborted(this.#parent?.reason, endpoint, indeterminate);
  }

  /** @internal The parent signal aborted. */
  handleEvent(): void {
    this.#abort(this.#parent?.reason);
  }

  /** @internal The time budget ran out. */
  expire(): void {
    this.#timedOut = true;
    this.#abort(timedOut(this.#timeout ?? 0, { what: this.what }));
  }

  dispose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#parent?.removeEventListener("abort", this);
  }

  /** Told once when it aborts after construction, with the signal's reason: a subclass ends its waits here. */
  protected onAbort(_reason: unknown): void {}

  #abort(reason: unknown): void {
    const signal = this.#controller.signal;
    if (signal.aborted) return;
    this.#controller.abort(reason);
    // The signal's reason: an AbortError when `reason` is undefined, as fetch would reject with.
    this.onAbort(signal.reason);
  }
}

function expire(signal: CallSignal): void {
  signal.expire();
}

/** A pause that `signal` cuts short (ABORTED); `background`: one that does not keep a Node or Bun process alive. */
export function delay(ms: number, signal?: AbortSignal, background = false): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(aborted(signal.reason));
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted(signal?.reason));
    };
    const done = () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    };
    const timer = background ? backgroundTimer(done, ms) : setTimeout(done, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Calls `act` once when `signal` aborts, at once if it already has (a listener added to an aborted signal never
 * fires: a wait given up before it began would wait on), and returns what stops listening.
 */
export function whenAborted(signal: AbortSignal, act: () => void): () => void {
  if (signal.aborted) {
    act();
    return ignore;
  }
  signal.addEventListener("abort", act, { once: true });
  return () => signal.removeEventListener("abort", act);
}

function ignore(): void {}

/** Waits for `promise` unless `signal` aborts first (the work behind the promise goes on for others). */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * Waits in `line` (callers in order) until the one ahead hands on by calling the first function in it, or
 * rejects with `signal`'s reason, leaving the line, when it aborts first.
 */
export function queueUp(line: Array<() => void>, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const admit = () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    };
    const onAbort = () => {
      const at = line.indexOf(admit);
      if (at >= 0) line.splice(at, 1);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    line.push(admit);
  });
}

/** Aborts with whichever signal aborts first; AbortSignal.any holds its sources weakly, so nothing leaks. */
export function anySignal(...signals: Array<AbortSignal | undefined>): AbortSignal {
  const present = signals.filter((s): s is AbortSignal => resolveSignal(s) !== undefined);
  return present.length === 1 ? present[0]! : AbortSignal.any(present);
}

/**
 * A timer that does not keep a Node or Bun process alive; elsewhere a plain timer. The delay is clamped to
 * [0, 2^31-1] ms (a longer one fires at once in every runtime), so a long lease renews every 24.8 days at
 * most instead of in a tight loop; callers re-check their deadline when it fires.
 */
export function backgroundTimer(callback: () => void, ms: number): ReturnType<typeof setTimeout> {
  const timer = setTimeout(callback, Math.min(MAX_TIMER_MS, Math.max(0, ms)));
  (timer as { unref?: () => void }).unref?.();
  return timer;
}
