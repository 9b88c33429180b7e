import type { WaitMode } from "../line/standing.js";

/** How a contender waits for its turn. */
export interface WaitOptions {
  /** Follow the predecessor with a watch stream (default), or poll for runtimes that cannot hold one open. */
  wait?: WaitMode | undefined;
  /** Poll interval in milliseconds with `wait: "poll"`: from 50 to 60 000. Default 500: one read per waiter. */
  pollInterval?: number | undefined;
}

/** Options of every wait for a lock, permit or leadership. */
export interface LockOptions extends WaitOptions {
  /** Gives up waiting: the waiter deletes its key and the call throws ABORTED. */
  signal?: AbortSignal | undefined;
  /**
   * Longest wait in milliseconds; TIMEOUT after it (the key is deleted). `0` tries once and throws LOCKED if
   * another contender holds the lock; `Infinity` waits as long as the session lives. Default: the client's
   * `timeout` (10 000 ms unless set), as for every call; `election.campaign()` waits until elected.
   */
  timeout?: number | undefined;
  /**
   * Milliseconds (0 to 60 000) to wait before holding when the contender ahead left uncleanly: its lease ended
   * (it crashed, froze or lost its network) or it was revoked (`operator.revokeLock`), so it may still be writing
   * to a store that cannot check a fence. After a clean release the lock is taken at once, and with 0 nothing
   * is asked. Telling the two apart costs two reads at such a handoff. Default: the client's `lockDelay` (0).
   * Applies to waits behind a contender that leaves; a contender that finds the lock free holds at once.
   */
  lockDelay?: number | undefined;
}
