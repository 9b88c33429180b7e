import { describe, invalidArgument, sessionClosed, sessionExpired, waitTimedOut } from "../../errors/catalogue.js";
import { type EtcdError, isEtcdError, unanswered } from "../../errors/etcd-error.js";
import { startingAcquisition, traceWaiting } from "../../events/channels.js";
import { resolveTimeout } from "../../gateway/config.js";
import { anySignal, CallSignal, delay, untilAborted } from "../../gateway/signals.js";
import type { Held } from "../hold/held.js";
import { type Subject, subjectText } from "../hold/subject.js";
import type { LeaseSession } from "../lease/lease-session.js";
import type { JoinCall } from "../line/join.js";
import { untilAnswered } from "../line/read.js";
import type { WaitContext, WaitMode } from "../line/wait.js";

/** How a contender waits for its turn. */
export interface WaitOptions {
  /** Follow the predecessor with a watch stream (default), or poll for runtimes that cannot hold one open. */
  wait?: WaitMode | undefined;
  /** Poll interval in milliseconds with `wait: "poll"`: from 50 to 60 000. Default 500: one read per waiter. */
  pollInterval?: number | undefined;
}

/** Below this a waiter's polls become a request flood; above it a released lock goes unnoticed too long. */
export const MIN_POLL_INTERVAL = 50;
export const MAX_POLL_INTERVAL = 60_000;

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
}

/** The wait mode, poll interval and time budget of a wait, checked before anything is sent. */
export function waitSettings(options: LockOptions): { mode: WaitMode; pollInterval: number; tryOnly: boolean } {
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
  if (mode !== "watch" && mode !== "poll")
    throw invalidArgument(`wait must be "watch" or "poll", got ${describe(mode)}`);
  return { mode, pollInterval, tryOnly: options.timeout === 0 };
}

/** How long a failed acquisition waits for its join and cleanup before leaving the cleanup to run on its own. */
const JOIN_GRACE_MS = 500;

/**
 * One acquisition of a lock, permit, read or write lock, several locks, or leadership. It owns its keys (made
 * for it alone, see keys.ts) from its join until it hands them to its holding, or, on failure, to its
 * session's orphans, which delete them. A recipe reads top to bottom with it:
 *
 *     const acquisition = new Acquisition(session, options, subject, keys); // checks; sends nothing
 *     try {
 *       const line = await acquisition.join(join);   // our key in the line
 *       ...wait in the line with `acquisition` as the wait's context...
 *       return acquisition.hold(new Lock(...));     // the holding owns the keys from here on
 *     } catch (error) {
 *       throw await acquisition.fail(error);        // leaves the line; says why it failed
 *     } finally {
 *       acquisition.dispose();
 *     }
 *
 * One signal stands for the caller's abort, the session's loss and the timeout. On failure it reports the
 * session's end first, then the abort or timeout, else the cause; it never hands out a holding whose session
 * can no longer be trusted.
 */
export class Acquisition implements WaitContext {
  /** `timeout: 0`: try once, never wait. */
  readonly tryOnly: boolean;
  readonly mode: WaitMode;
  readonly pollInterval: number;
  readonly #session: LeaseSession;
  readonly #subject: Subject;
  readonly #keys: readonly string[];
  readonly #timeout: number | undefined;
  /** The caller's abort, the session's loss and the timeout in one: made on first use (see `signal`). */
  #call: CallSignal | undefined;
  /** When the client's timeout ends the wait, if it alone bounds it: `signal` starts its timer from here. */
  #deadline: number | undefined;
  /** The join, once sent: in flight, landed or failed. */
  #joining: Promise<unknown> | undefined;
  /** Sends of the join handed to fetch, and those answered without effect: the rest may land late. */
  #sent = 0;
  #refused = 0;
  /** Our key left the line while we waited (see `expired`). */
  #keyGone = false;
  #startedAt = 0;
  /** Its `etcd-edge:lock` context, when someone traces it. */
  readonly #trace = startingAcquisition();

  /**
   * Checks the options and that the session can still hold anything: SESSION_CLOSED or SESSION_EXPIRED, and
   * nothing sent, when it cannot.
   */
  constructor(session: LeaseSession, options: LockOptions, subject: Subject, keys: readonly string[]) {
    const settings = waitSettings(options);
    this.tryOnly = settings.tryOnly;
    this.mode = settings.mode;
    this.pollInterval = settings.pollInterval;
    this.#session = session;
    this.#subject = subject;
    this.#keys = keys;
    // Without a timeout of its own a wait is bounded by the client's `timeout`, as every call is; a campaign
    // waits until elected, as a standby does.
    const bound = subject.kind === "leadership" ? undefined : session.client.transport.config.timeout;
    this.#timeout = this.tryOnly ? undefined : (options.timeout ?? bound);
    if (session.closed) throw sessionClosed(session.leaseId, `${subjectText(subject)} was not attempted`);
    if (!session.alive) {
      throw sessionExpired(session.leaseId, session.signal.reason, `${subjectText(subject)} was not attempted`);
    }
    // A signal of its own at once only when the caller brings a limit (a signal, a timeout). Bounded by the
    // client's timeout alone, an acquisition makes its signal when something first waits on it (see `signal`):
    // an uncontended one never does, as its join is bounded by that same timeout and by the session's signal.
    if (options.signal !== undefined || (options.timeout !== undefined && this.#timeout !== undefined)) {
      this.#call = new CallSignal(anySignal(options.signal, session.signal), this.#timeout);
    } else if (this.#timeout !== undefined) {
      this.#deadline = performance.now() + this.#timeout;
    }
  }

  /** Aborts on the caller's signal, the session's loss or the timeout (none with `tryOnly`). */
  get signal(): AbortSignal {
    const deadline = this.#deadline;
    this.#call ??= new CallSignal(
      this.#session.signal,
      deadline === undefined ? undefined : Math.max(0, deadline - performance.now()),
    );
    return this.#call.signal;
  }

  readonly #onSent = (): void => {
    this.#sent++;
  };

  readonly #onRefused = (): void => {
    this.#refused++;
  };

  /**
   * Sends the join and waits for its answer, unless the acquisition is given up first. The join itself is cut
   * off only by the session's loss, never by the caller's abort or timeout: a join cut off in flight may still
   * land after we deleted our key, so a given-up acquisition lets it land, then deletes what it made (`fail`).
   * Sent again while unanswered and the caller still waits; `timeout: 0` tries once, as it asks.
   */
  join<J>(join: { send(call: JoinCall): Promise<J> }): Promise<J> {
    const session = this.#session;
    this.#startedAt = performance.now();
    if (this.#call?.aborted) return Promise.reject(this.#call.signal.reason);
    const call: JoinCall = {
      signal: session.signal,
      onSent: this.#onSent,
      onRefused: this.#onRefused,
      idempotent: true,
    };
    const sent = this.tryOnly ? join.send(call) : untilAnswered(join.send.bind(join), call, this);
    this.#joining = sent;
    return this.#call === undefined ? sent : untilAborted(sent, this.#call.signal);
  }

  /** Tells `onEvent` the acquisition must wait; `position` counts the keys ahead of it, when known. */
  waiting(position?: number): void {
    traceWaiting(this.#trace, position);
    const events = this.#session.client.transport.events;
    if (events.on) events.emit({ type: "lock.waiting", ...this.#subject, position });
  }

  /**
   * SESSION_EXPIRED for this acquisition: our own key left the line, so our session's lease ended (as Go's
   * `Mutex.Lock` concludes). An inference: `fail` asks etcd, so that the session learns it too.
   */
  expired(): EtcdError {
    const session = this.#session;
    this.#keyGone = true;
    return sessionExpired(session.leaseId, session.signal.reason, `${subjectText(this.#subject)} was not acquired`);
  }

  /** The acquisition succeeded: `holding` owns the keys from here on. SESSION_EXPIRED if the lease is not trusted. */
  hold<H extends Held>(holding: H): H {
    const session = this.#session;
    this.#joining = undefined;
    if (!session.alive) throw this.expired();
    const events = session.client.transport.events;
    if (events.on) {
      const waitedMs = performance.now() - this.#startedAt;
      events.emit({ type: "lock.acquired", ...this.#subject, revision: holding.revision, waitedMs });
    }
    // A send of the join never answered may land after the holding's release: its session sweeps for it then.
    return holding.begin(this.#sent > this.#refused + 1);
  }

  /**
   * The acquisition failed with `thrown`: hands its keys to its session's orphans, which delete them once the
   * join has settled (resent until answered while the session lives), and returns the error to throw. The
   * cleanup is awaited for a grace at most, so the call keeps its timeout; the rest runs on its own.
   */
  async fail(thrown: unknown): Promise<unknown> {
    const session = this.#session;
    // A key that left the line says the lease ended: one renewal asks etcd, and a lease found gone ends the
    // session for every caller and handle on it (renew() loses it on LEASE_NOT_FOUND).
    if (this.#keyGone && session.alive) await withinGrace(session.renew().catch(() => {}));
    const error = this.#why(thrown);
    const joining = this.#joining;
    this.#joining = undefined;
    // Nothing sent, or a closed session's keys went with its lease.
    if (joining === undefined || session.closed) return error;
    const answered = joining.then(
      () => 1,
      (failure: unknown) => (unanswered(failure) ? 0 : 1),
    );
    const cleanup = answered.then((last) =>
      session.orphans.leave(this.#keys, joining, this.#sent > this.#refused + last),
    );
    await withinGrace(cleanup);
    return error;
  }

  dispose(): void {
    this.#call?.dispose();
  }

  /** What a failed acquisition reports: the session's end first, then the caller's abort or timeout, else the cause. */
  #why(thrown: unknown): unknown {
    const session = this.#session;
    const what = subjectText(this.#subject);
    // etcd refused our key for want of our lease: the session has lost it, whatever its deadline says.
    if (isEtcdError(thrown, "LEASE_NOT_FOUND")) session.lostLease(thrown);
    if (session.signal.aborted) {
      if (isEtcdError(thrown, "SESSION_EXPIRED") || isEtcdError(thrown, "SESSION_CLOSED")) return thrown;
      return session.closed
        ? sessionClosed(session.leaseId, `${what} was not acquired`)
        : sessionExpired(session.leaseId, thrown, `${what} was not acquired`);
    }
    const call = this.#call;
    if (call?.aborted) return call.timedOut ? waitTimedOut(what, this.#timeout ?? 0, thrown) : call.error();
    return thrown;
  }
}

/** Waits for `work` for JOIN_GRACE_MS at most; what is left of it runs on by itself. */
async function withinGrace(work: Promise<unknown>): Promise<void> {
  const grace = new AbortController();
  await Promise.race([work, delay(JOIN_GRACE_MS, grace.signal).catch(() => {})]);
  grace.abort();
}
