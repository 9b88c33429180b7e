import { unanswered } from "../../errors/etcd-error.js";
import { backoff } from "../../gateway/retry-policy.js";
import { delay } from "../../gateway/signals.js";

/**
 * Sends a request of an acquisition again, while it goes unanswered and the acquisition still waits: its join
 * (a create-if-absent) or a read of its line, both safe to repeat.
 *
 * The transport gives up on one call after its attempts, within the client's `timeout`; the acquisition's own
 * budget is often longer (the caller's timeout, or as long as the session lives). Pooled connections that went
 * silent together (a NAT that dropped its flows) cost one attempt each, so one call can spend every attempt on
 * them while the member is fine. Failing then would turn a few dead connections into a failed lock whose caller
 * asked to wait longer. The caller's abort or timeout and the session's loss still end the acquisition at once
 * (`waiter.signal`, looked at only after a failure), and an answer that refused the request is final.
 */
export async function untilAnswered<A, T>(
  send: (request: A) => Promise<T>,
  request: A,
  waiter: { readonly signal: AbortSignal },
): Promise<T> {
  for (let failures = 0; ; failures++) {
    try {
      return await send(request);
    } catch (error) {
      const signal = waiter.signal;
      if (signal.aborted || !unanswered(error)) throw error;
      await delay(backoff(failures), signal).catch(() => {
        throw error;
      });
    }
  }
}
