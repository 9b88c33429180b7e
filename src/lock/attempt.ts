import type { EtcdClient } from "../api/client.js";
import type { ResponseHeader } from "../api/codec.js";
import { locked, sessionExpired } from "../errors/catalogue.js";
import type { EtcdError } from "../errors/etcd-error.js";
import { anySignal, CallSignal, delay, untilAborted } from "../gateway/signals.js";
import { Held } from "./held.js";
import { unanswered } from "./sends.js";
import type { LeaseSession } from "./lease-session.js";
import { type Subject, subjectText } from "./subject.js";
import type { LockOptions } from "./queue.js";
import { type LineState, waitSettings } from "./queue.js";
import { type LineReader, type WaitContext, waitFailure, waitForTurn } from "./wait.js";

/** How long a failed acquisition waits for its join and cleanup before leaving the cleanup to run on its own. */
const JOIN_GRACE_MS = 500;
/** Tries to delete a failed acquisition's key (1, 2, 3, 4 s apart): a short outage does not strand it. */
const CLEANUP_TRIES = 5;

/** What a join's request is sent with: the session's signal, and a count of its sends. */
export interface JoinCall {
  signal: AbortSignal;
  onSent: () => void;
}

/** One acquisition in progress, as its steps see it. */
export interface Attempt {
  /** Aborts on the caller's signal, the session's loss or the timeout (none with `tryOnly`). */
  readonly signal: AbortSignal;
  /** `timeout: 0`: try once, never wait. */
  readonly tryOnly: boolean;
  /** What a wait needs: signal, wait mode, and the error for "our key is gone". */
  readonly context: WaitContext;
  /**
   * Sends the join (a create-if-absent whose answer gives our revision) and waits for its answer unless the
   * attempt is given up first. The join itself is cut off only by the session's loss, never by the caller's
   * abort or timeout: a join cut off in flight may still land after we deleted our key, leaving a key that
   * blocks the line until the lease ends. So a given-up attempt lets it land, then deletes what it made.
   */
  join<J extends { revision: number }>(send: (call: JoinCall) => Promise<J>, value?: string): Promise<J>;
  /** Hands on the session's local turn(s) this attempt took; called on failure. */
  local: (() => void) | undefined;
  /** Tells `onEvent` the attempt must wait; `position` counts the keys ahead of it, when known. */
  waiting(position?: number): void;
}

/**
 * The frame every recipe's acquisition shares with the mutex's: one signal for the caller's abort, the
 * session's loss and the timeout; on failure, leave the line (so the attempt blocks nobody) and report the
 * session's loss first, then the abort or timeout, else the cause; never hand out a holding whose session
 * can no longer be trusted. `leave(revision)` deletes our key(s), guarded by the revision; unguarded
 * (`undefined`) when the join's answer was lost and it may have landed. What it cannot delete goes with the
 * lease. The cleanup is awaited before the attempt fails when the join has settled; a join still in flight
 * when the caller's budget ends is cleaned up after it settles, so the call keeps its timeout and a failed
 * acquisition still leaves no key behind.
 */
export async function attempt<T>(
  session: LeaseSession,
  options: LockOptions,
  subject: Subject,
  /** The keys the acquisition joins with: in use by this session until released or cleaned up. */
  keys: readonly string[],
  leave: (revision: number | undefined) => Promise<unknown>,
  steps: (attempt: Attempt) => Promise<T>,
): Promise<T> {
  const settings = waitSettings(options);
  const tryOnly = options.timeout === 0;
  // A signal of its own only when the caller brings a limit (a signal, a timeout) or the attempt must wait:
  // an uncontended acquisition is bounded by the session's signal, which its join already carries.
  let call: CallSignal | undefined =
    options.signal !== undefined || (options.timeout !== undefined && !tryOnly)
      ? new CallSignal(anySignal(options.signal, session.signal), tryOnly ? undefined : options.timeout)
      : undefined;
  const callSignal = (): CallSignal => (call ??= new CallSignal(session.signal, undefined));
  const expired = (cause?: unknown): EtcdError => sessionExpired(session.leaseId, cause ?? session.signal.reason, `waiting for ${subjectText(subject)}`);
  const events = session.client.transport.events;
  const startedAt = events.on ? performance.now() : 0;
  /** The join, once sent: in flight, landed or failed. */
  let joining: Promise<{ revision: number }> | undefined;
  const context: WaitContext = {
    ...settings,
    get signal() {
      return callSignal().signal;
    },
    expired: () => expired(),
  };
  const frame: Attempt = {
    get signal() {
      return callSignal().signal;
    },
    tryOnly,
    context,
    join: (send, value) => {
      // Given up already (a signal aborted before the call, say): send nothing.
      if (call?.aborted || session.signal.aborted) return Promise.reject(call?.signal.reason ?? session.signal.reason);
      const sendJoin = () => {
        let sends = 0;
        const sent = send({ signal: session.signal, onSent: () => void sends++ });
        joining = sent;
        sent.then(
          () => sends > 1 && session.keys.suspect(keys, value),
          // Never handed to fetch (sends 0): nothing of it can land.
          (error: unknown) => (sends > 1 || (sends === 1 && !refused(error))) && session.keys.suspect(keys, value),
        );
        return sent;
      };
      // A sweep of a key we join (a late copy of an earlier join) must be answered first: see KeysInUse. An
      // attempt given up meanwhile sends nothing, and so has nothing to clean up.
      const swept = session.keys.swept(keys);
      const sent =
        swept === undefined
          ? sendJoin()
          : swept.then(() => {
              if (call?.aborted || session.signal.aborted) throw call?.signal.reason ?? session.signal.reason;
              return sendJoin();
            });
      return call === undefined ? sent : untilAborted(sent, call.signal);
    },
    local: undefined,
    waiting: (position) => events.on && events.emit({ type: "lock.waiting", ...subject, position }),
  };
  session.keys.use(keys);
  try {
    const result = await steps(frame);
    if (!session.alive) throw expired();
    if (events.on) {
      const revision = result instanceof Held ? result.revision : (result as number);
      events.emit({ type: "lock.acquired", ...subject, revision, waitedMs: performance.now() - startedAt });
      if (result instanceof Held) result.observe();
    }
    return result;
  } catch (thrown) {
    const error = waitFailure(session, callSignal(), thrown, expired);
    const cleanup = joining !== undefined && !session.closed ? leaveAfter(joining, leave, session) : Promise.resolve();
    // The local turn and the keys stay taken until our key is gone, so this session's next caller cannot
    // meet it and a sweep cannot race the cleanup.
    const handOn = () => {
      session.keys.done(keys);
      frame.local?.();
    };
    // A join still on the wire usually answers within a round trip, and its cleanup takes one more: wait for
    // them a little, so that the failed call normally leaves no key behind. Longer (a member gone silent, no
    // leader for a while) the caller's budget is spent: it gets its error now, and the cleanup goes on.
    const done = cleanup.then(handOn, handOn);
    const grace = new AbortController();
    await Promise.race([done, delay(JOIN_GRACE_MS, grace.signal).catch(() => {})]);
    grace.abort();
    throw error;
  } finally {
    call?.dispose();
  }
}

/**
 * Leaves the line once the join has settled: guarded by its revision if it landed; unguarded if its answer
 * was lost (it may have landed); not at all if it was refused (nothing of ours is there). Best effort.
 */
async function leaveAfter(
  joining: Promise<{ revision: number }>,
  leave: (revision: number | undefined) => Promise<unknown>,
  session: LeaseSession,
): Promise<void> {
  const revision = await joining.then(
    (line) => line.revision,
    (error: unknown) => (refused(error) ? null : undefined),
  );
  if (revision === null) return;
  // Retried through a short outage (an election, a member restarting): a key left here blocks the line until
  // the lease ends. A lost session's keys go with its lease anyway.
  for (let tries = 0; tries < CLEANUP_TRIES && !session.closed && session.alive; tries++) {
    try {
      await leave(revision);
      return;
    } catch {
      // Cut short when the session ends (closed or lost): its keys go with the lease, and no timer outlives it.
      await delay(1_000 * (tries + 1), session.signal);
    }
  }
}

/** An answer from etcd that refused the join: it did not land. Anything else (a lost answer, a cut-off send) may have. */
function refused(error: unknown): boolean {
  return !unanswered(error);
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
  if (start.predecessor !== undefined) {
    if (frame.tryOnly) throw locked(name, start.predecessor.key);
    frame.waiting();
  }
  return waitForTurn(client, read, start, frame.context);
}
