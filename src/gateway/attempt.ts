import { aborted, timedOut } from "../errors/catalogue.js";
import type { EtcdError } from "../errors/etcd-error.js";

/** Beyond 2^31-1 ms timers fire at once; such a limit is as good as none. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * One attempt of a call on one endpoint: the signal its request is bound to, which aborts at the attempt's
 * limit or with the caller's signal, and the waits it bounds. Every request makes one, so it is built for
 * the common case of an answer well within the limit: one controller and one timer, no closure per attempt,
 * and no listener on its own signal (aborting rejects the wait in progress directly).
 */
export class Attempt {
  /** The request's headers; the auth token is added once known. */
  headers: Record<string, string>;
  /** Whether fetch has the request: from then on a write may have been applied even if no answer comes. */
  sent = false;
  /** The answer's HTTP status, once one came (for events). */
  status: number | undefined;
  readonly #controller = new AbortController();
  readonly #parent: AbortSignal | undefined;
  readonly #limit: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timedOut = false;
  /** Rejects the wait in progress (there is at most one at a time). */
  #cut: ((reason: unknown) => void) | undefined;

  /** Starts the clock (`limit` ms) and follows `parent`, the caller's signal; `dispose()` stops both. */
  constructor(
    readonly endpoint: string,
    headers: Record<string, string>,
    parent: AbortSignal | undefined,
    limit: number,
    /** Told each time the request is handed to fetch. */
    readonly onSent: (() => void) | undefined,
  ) {
    this.headers = headers;
    this.#parent = parent;
    this.#limit = limit;
    if (parent?.aborted) {
      this.#abort(parent.reason);
      return;
    }
    // The attempt is its own listener (`handleEvent`): no closure is allocated for it.
    parent?.addEventListener("abort", this);
    if (limit <= MAX_TIMER_MS) this.#timer = setTimeout(expire, limit, this);
  }

  /** What the request is bound to. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  get aborted(): boolean {
    return this.#controller.signal.aborted;
  }

  /** The attempt's own limit ended it (not the caller's signal). */
  get timedOut(): boolean {
    return this.#timedOut;
  }

  /**
   * `promise`, or the attempt's abort reason as soon as it aborts, whichever comes first: a fetch that queues
   * a request and ignores its signal still cannot hold the attempt past its limit. One wait at a time.
   */
  bounded<T>(promise: Promise<T>): Promise<T> {
    const signal = this.#controller.signal;
    if (signal.aborted) return Promise.reject(signal.reason as unknown);
    return new Promise<T>((resolve, reject) => {
      this.#cut = reject;
      promise.then(resolve, reject);
    });
  }

  /** The error to throw now that it aborted; `indeterminate` when a write was sent unanswered. */
  error(endpoint?: string, indeterminate = false): EtcdError {
    if (this.#timedOut) return timedOut(this.#limit, { endpoint, indeterminate });
    return aborted(this.#parent?.reason, endpoint, indeterminate);
  }

  /** The caller's signal aborted. */
  handleEvent(): void {
    this.#abort(this.#parent?.reason);
  }

  /** @internal The limit passed. */
  expire(): void {
    this.#timedOut = true;
    this.#abort(timedOut(this.#limit));
  }

  dispose(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#cut = undefined;
    this.#parent?.removeEventListener("abort", this);
  }

  #abort(reason: unknown): void {
    const signal = this.#controller.signal;
    if (signal.aborted) return;
    this.#controller.abort(reason);
    // The signal's reason: an AbortError when `reason` is undefined, as fetch would reject with.
    this.#cut?.(signal.reason);
  }
}

function expire(attempt: Attempt): void {
  attempt.expire();
}
