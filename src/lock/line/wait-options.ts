import { describe, invalidArgument } from "../../errors/catalogue.js";
import { resolveTimeout } from "../../gateway/config.js";

/** How a contender waits: a watch on the key ahead of it (the default), or polls of the line. */
export type WaitMode = "watch" | "poll";

/** How a contender waits for its turn. */
export interface WaitOptions {
  /** Follow the predecessor with a watch stream (default), or poll for runtimes that cannot hold one open. */
  wait?: WaitMode | undefined;
  /**
   * Poll interval in milliseconds with `wait: "poll"`: from 50 to 60 000. Default 500. Each poll is one read
   * per waiter.
   */
  pollInterval?: number | undefined;
}

/** Below this a waiter's polls become a request flood (20 reads/s per waiter at most). */
export const MIN_POLL_INTERVAL = 50;
/** Above this a released lock could stay unnoticed for longer than any reasonable lease. */
export const MAX_POLL_INTERVAL = 60_000;

/** Options of every wait for a lock, permit or leadership. */
export interface LockOptions extends WaitOptions {
  /** Gives up waiting: the waiter deletes its key and the call throws ABORTED. */
  signal?: AbortSignal | undefined;
  /**
   * Longest wait in milliseconds; TIMEOUT after it (the key is deleted). `0` tries once and throws LOCKED if
   * another session holds the lock; `Infinity` waits as long as the session lives. Default: the client's
   * `timeout` (10 000 ms unless set), as for every call; `election.campaign()` waits until elected.
   */
  timeout?: number | undefined;
}

/** What a wait needs of its options, checked before anything is sent. */
export interface WaitSettings {
  mode: WaitMode;
  pollInterval: number;
  /** `timeout: 0`: try once, never wait. */
  tryOnly: boolean;
}

/** The wait mode, poll interval and time budget of a wait, checked before anything is sent. */
export function waitSettings(options: LockOptions): WaitSettings {
  const pollInterval = options.pollInterval === undefined ? 500 : options.pollInterval;
  if (typeof pollInterval !== "number" || !(pollInterval >= MIN_POLL_INTERVAL && pollInterval <= MAX_POLL_INTERVAL)) {
    throw invalidArgument(
      `pollInterval must be a number of milliseconds from ${MIN_POLL_INTERVAL} to ${MAX_POLL_INTERVAL}, ` +
        `got ${describe(pollInterval)}`,
    );
  }
  // As the transport's: positive, or Infinity for no limit; 0 alone means "try once".
  if (options.timeout !== 0) resolveTimeout(options.timeout, "timeout");
  const mode = options.wait === undefined ? "watch" : options.wait;
  if (mode !== "watch" && mode !== "poll") {
    throw invalidArgument(`wait must be "watch" or "poll", got ${describe(mode)}`);
  }
  return { mode, pollInterval, tryOnly: options.timeout === 0 };
}
