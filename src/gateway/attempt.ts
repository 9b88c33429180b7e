import { CallSignal } from "./signals.js";

/**
 * One attempt of a call on one endpoint: the signal its request is bound to (a CallSignal: it aborts at the
 * attempt's limit or with the caller's signal), the waits it bounds, and what became of its request.
 * Aborting rejects the wait in progress directly, with no listener on its own signal.
 */
export class Attempt extends CallSignal {
  /** The request's headers; the auth token is added once known. */
  headers: Record<string, string>;
  /** Whether fetch has the request: from then on a write may have been applied even if no answer comes. */
  sent = false;
  /** The answer's HTTP status, once one came (for events). */
  status: number | undefined;
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
    super(parent, limit);
    this.headers = headers;
  }

  /**
   * `promise`, or the attempt's abort reason as soon as it aborts, whichever comes first: a fetch that queues
   * a request and ignores its signal still cannot hold the attempt past its limit. One wait at a time.
   */
  bounded<T>(promise: Promise<T>): Promise<T> {
    const signal = this.signal;
    if (signal.aborted) return Promise.reject(signal.reason as unknown);
    return new Promise<T>((resolve, reject) => {
      this.#cut = reject;
      promise.then(resolve, reject);
    });
  }

  override dispose(): void {
    super.dispose();
    this.#cut = undefined;
  }

  protected override onAbort(reason: unknown): void {
    this.#cut?.(reason);
  }
}
