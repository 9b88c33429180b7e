import type { EtcdClient } from "../api/client.js";
import type { ResponseHeader } from "../api/codec.js";
import { locked, sessionExpired } from "../errors/catalogue.js";
import type { EtcdError } from "../errors/etcd-error.js";
import { anySignal, CallSignal, delay, untilAborted } from "../gateway/signals.js";
import { Held } from "./held.js";
import { unanswered } from "../errors/etcd-error.js";
import { untilAnswered } from "./until-answered.js";
import type { LeaseSession } from "./lease-session.js";
import { type Subject, subjectText } from "./subject.js";
import type { LockOptions } from "./queue.js";
import { type JoinCall, type LineState, type WaitMode, waitSettings } from "./queue.js";
import { type LineReader, steadfast, type WaitContext, waitFailure, waitForTurn } from "./wait.js";

/** How long a failed acquisition waits for its join and cleanup before leaving the cleanup to run on its own. */
const JOIN_GRACE_MS = 500;
/** Tries to delete a failed acquisition's key (1, 2, 3, 4 s apart): a short outage does not strand it. */
const CLEANUP_TRIES = 5;

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
  const frame = new Frame(session, options, subject, keys);
  const events = session.client.transport.events;
  const startedAt = events.on ? performance.now() : 0;
  session.keys.use(keys);
  try {
    const result = await steps(frame);
    frame.joinSettled(true);
    if (!session.alive) throw frame.expired();
    if (events.on) {
      const revision = result instanceof Held ? result.revision : (result as number);
      events.emit({ type: "lock.acquired", ...subject, revision, waitedMs: performance.now() - startedAt });
      if (result instanceof Held) result.observe();
    }
    return result;
  } catch (thrown) {
    const error = waitFailure(session, frame.call, thrown, (cause) => frame.expired(cause));
    const joining = frame.joining;
    joining?.then(
      () => frame.joinSettled(true),
      (error: unknown) => frame.joinSettled(false, error),
    );
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
    frame.dispose();
  }
}

/**
 * One acquisition in progress: its steps' view (`Attempt`) and its waits' (`WaitContext`). A class, since every
 * lock builds one: its signal is made only when something needs it (an uncontended acquisition with no limit
 * of the caller's is bounded by the session's signal, which its join already carries), and its methods are
 * shared rather than closures per acquisition.
 */
class Frame implements Attempt, WaitContext {
  readonly tryOnly: boolean;
  readonly mode: WaitMode;
  readonly pollInterval: number;
  local: (() => void) | undefined = undefined;
  /** The join, once sent: in flight, landed or failed. */
  joining: Promise<{ revision: number }> | undefined = undefined;
  readonly #session: LeaseSession;
  readonly #subject: Subject;
  readonly #keys: readonly string[];
  #call: CallSignal | undefined;
  /** How often the join was handed to fetch, and the value it writes. */
  #sends = 0;
  #value: string | undefined;
  readonly #countSend = (sends = 1): void => void (this.#sends += sends);

  constructor(session: LeaseSession, options: LockOptions, subject: Subject, keys: readonly string[]) {
    ({ mode: this.mode, pollInterval: this.pollInterval } = waitSettings(options));
    this.tryOnly = options.timeout === 0;
    this.#session = session;
    this.#subject = subject;
    this.#keys = keys;
    // A signal of its own only when the caller brings a limit (a signal, a timeout) or the attempt must wait.
    this.#call =
      options.signal !== undefined || (options.timeout !== undefined && !this.tryOnly)
        ? new CallSignal(anySignal(options.signal, session.signal), this.tryOnly ? undefined : options.timeout)
        : undefined;
  }

  /** The caller's abort, the session's loss and the timeout in one: made on first use. */
  get call(): CallSignal {
    return (this.#call ??= new CallSignal(this.#session.signal, undefined));
  }

  get signal(): AbortSignal {
    return this.call.signal;
  }

  get context(): WaitContext {
    return this;
  }

  /** SESSION_EXPIRED for this acquisition: its session's lease ended (`cause`, else the session's reason). */
  expired(cause?: unknown): EtcdError {
    const session = this.#session;
    return sessionExpired(session.leaseId, cause ?? session.signal.reason, `waiting for ${subjectText(this.#subject)}`);
  }

  join<J extends { revision: number }>(send: (call: JoinCall) => Promise<J>, value?: string): Promise<J> {
    const session = this.#session;
    const call = this.#call;
    // Given up already (a signal aborted before the call, say): send nothing.
    if (call?.aborted || session.signal.aborted) return Promise.reject(call?.signal.reason ?? session.signal.reason);
    // A sweep of a key we join (a late copy of an earlier join) must be answered first: see KeysInUse. An
    // attempt given up meanwhile sends nothing, and so has nothing to clean up.
    const swept = session.keys.swept(this.#keys);
    const sent =
      swept === undefined
        ? this.#sendJoin(send, value)
        : swept.then(() => {
            if (this.#call?.aborted || session.signal.aborted) throw this.#call?.signal.reason ?? session.signal.reason;
            return this.#sendJoin(send, value);
          });
    return call === undefined ? sent : untilAborted(sent, call.signal);
  }

  waiting(position?: number): void {
    const events = this.#session.client.transport.events;
    if (events.on) events.emit({ type: "lock.waiting", ...this.#subject, position });
  }

  dispose(): void {
    this.#call?.dispose();
  }

  /**
   * The join settled (`landed`, or failed with `error`): a join sent more than once, or once with its outcome
   * unknown, may land again later, after this acquisition is over, so its keys become suspects for the
   * session to sweep (see KeysInUse). One never handed to fetch (no send) left nothing.
   */
  joinSettled(landed: boolean, error?: unknown): void {
    if (this.#sends > 1 || (this.#sends === 1 && !landed && !refused(error)))
      this.#session.keys.suspect(this.#keys, this.#value);
  }

  #sendJoin<J extends { revision: number }>(
    send: (call: JoinCall) => Promise<J>,
    value: string | undefined,
  ): Promise<J> {
    this.#value = value;
    const call: JoinCall = { signal: this.#session.signal, onSent: this.#countSend, idempotent: true };
    // Sent again while unanswered and the caller still waits; `timeout: 0` tries once, as it asks.
    const sent = this.tryOnly ? send(call) : untilAnswered(() => send(call), this);
    this.joining = sent;
    return sent;
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
  reader: LineReader,
  joined: LineState & { created: boolean },
): Promise<ResponseHeader> {
  const read = steadfast(reader);
  const start = joined.created ? joined : await read(frame.signal);
  if (!start.ownExists) throw frame.context.expired();
  if (start.predecessor !== undefined) {
    if (frame.tryOnly) throw locked(name, start.predecessor.key);
    frame.waiting();
  }
  return waitForTurn(client, read, start, frame.context);
}
