import type { EtcdClient } from "../api/client.js";
import type { ResponseHeader } from "../api/codec.js";
import { locked, sessionExpired } from "../errors/catalogue.js";
import type { EtcdError } from "../errors/etcd-error.js";
import { anySignal, CallSignal } from "../gateway/signals.js";
import type { LeaseSession } from "./lease-session.js";
import type { LockOptions } from "./mutex.js";
import { type LineState, waitSettings } from "./queue.js";
import { type LineReader, type WaitContext, waitFailure, waitForTurn } from "./wait.js";

/** One acquisition in progress, as its steps see it. */
export interface Attempt {
  /** Aborts on the caller's signal, the session's loss or the timeout (none with `tryOnly`). */
  readonly signal: AbortSignal;
  /** `timeout: 0`: try once, never wait. */
  readonly tryOnly: boolean;
  /** What a wait needs: signal, wait mode, and the error for "our key is gone". */
  readonly context: WaitContext;
  /**
   * Records what of ours is in the line, for leaving it on failure: `null` while the join is in flight (it
   * may land), its revision once known, `undefined` when nothing of ours is there.
   */
  joined(revision: number | null | undefined): void;
  /** Hands on the session's local turn(s) this attempt took; called on failure. */
  local: (() => void) | undefined;
}

/**
 * The frame every recipe's acquisition shares with the mutex's: one signal for the caller's abort, the
 * session's loss and the timeout; on failure, leave the line (so the attempt blocks nobody) and report the
 * session's loss first, then the abort or timeout, else the cause; never hand out a holding whose session
 * can no longer be trusted. `leave(revision)` deletes our key(s): guarded when the revision is known,
 * unguarded when the join was cut off and may have landed. It is best effort: what it cannot delete goes
 * with the lease.
 */
export async function attempt<T>(
  session: LeaseSession,
  options: LockOptions,
  what: string,
  leave: (revision: number | undefined) => Promise<unknown>,
  steps: (attempt: Attempt) => Promise<T>,
): Promise<T> {
  const settings = waitSettings(options);
  const tryOnly = options.timeout === 0;
  const call = new CallSignal(anySignal(options.signal, session.signal), tryOnly ? undefined : options.timeout);
  const expired = (cause?: unknown): EtcdError => sessionExpired(session.leaseId, cause ?? session.signal.reason, `waiting for ${what}`);
  let joined: number | null | undefined;
  const frame: Attempt = {
    signal: call.signal,
    tryOnly,
    context: { ...settings, signal: call.signal, expired: () => expired() },
    joined: (revision) => (joined = revision),
    local: undefined,
  };
  try {
    const result = await steps(frame);
    if (!session.alive) throw expired();
    return result;
  } catch (thrown) {
    const error = waitFailure(session, call, thrown, expired);
    if (joined !== undefined && !session.closed) await leave(joined ?? undefined).catch(() => {});
    frame.local?.();
    throw error;
  } finally {
    call.dispose();
  }
}

/**
 * Waits in the line of lock `name` from what the join showed (`created: false`: the join found our key from
 * an earlier send, so one read finds our place first). With `tryOnly`, LOCKED instead of waiting.
 */
export async function waitAfterJoin(
  client: EtcdClient,
  frame: Attempt,
  name: string,
  read: LineReader,
  joined: LineState & { created: boolean },
): Promise<ResponseHeader> {
  const start = joined.created ? joined : await read(frame.signal);
  if (!start.ownExists) throw frame.context.expired();
  if (start.predecessor !== undefined && frame.tryOnly) throw locked(name, start.predecessor.key);
  return waitForTurn(client, read, start, frame.context);
}
