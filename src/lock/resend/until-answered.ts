import { unanswered } from "../../errors/etcd-error.js";
import { backoff } from "../../gateway/retry-policy.js";
import { delay } from "../../gateway/signals.js";

/**
 * Resending until etcd answers: the one loop of the lock core for a request that must reach etcd for as long as
 * what it serves lives (a join, a read of the line, a release, a cleanup, a revocation). The transport has already
 * tried each call on the other endpoints within its timeout; this repeats the whole call after a pause. Only a
 * failure without an answer is repeated (no answer, a cut connection, an answer that says nothing): an answer
 * that refused the request is final, and so is the last failure once `signal` aborts or `over()` says so.
 */
export interface Resending {
  /** Stops the resends: the caller gave up, or the session ended. Read only after a failure. */
  readonly signal?: AbortSignal | undefined;
  /** Stops the resends once true: a deadline on the client's clock. */
  readonly over?: (() => boolean) | undefined;
  /** Pauses on timers that keep no process alive: work that nobody awaits. */
  readonly background?: boolean | undefined;
}

/** The pause before resend `failures + 1`: full jitter, from 50 ms doubling to 2 s at most. */
export function resendPause(failures: number): number {
  return backoff(failures, 50, 2_000);
}

/**
 * `send()`, sent again after each unanswered failure while `resending` allows it (see the module's comment). Pass
 * a bound function (`join.send.bind(join, call)`), not a closure: a lock's path then reads in call order.
 */
export async function untilAnswered<T>(send: () => Promise<T>, resending: Resending = {}): Promise<T> {
  for (let failures = 0; ; failures++) {
    try {
      return await send();
    } catch (error) {
      const signal = resending.signal;
      if (!unanswered(error) || signal?.aborted || resending.over?.()) throw error;
      await delay(resendPause(failures), signal, resending.background).catch(() => {
        throw error;
      });
    }
  }
}
