import { locked, sessionClosed, sessionExpired, waitTimedOut } from "../../errors/catalogue.js";
import { type EtcdError, isEtcdError, unanswered } from "../../errors/etcd-error.js";
import { startingAcquisition, traceWaiting } from "../../events/channels.js";
import { anySignal, CallSignal, delay, untilAborted } from "../../gateway/signals.js";
import type { Held } from "../hold/held.js";
import { type Subject, subjectText } from "../hold/subject.js";
import type { JoinCall } from "../line/join.js";
import { leave } from "../line/leave.js";
import { untilAnswered } from "../line/until-answered.js";
import type { WaitContext } from "../line/wait.js";
import { type LockOptions, type WaitMode, waitSettings } from "../line/wait-options.js";
import type { JoinSends } from "../session/late-joins.js";
import type { LeaseSession } from "../session/lease-session.js";
import type { LocalTurns } from "../session/local-turns.js";

/** How long a failed acquisition waits for its join and cleanup before leaving the cleanup to run on its own. */
const JOIN_GRACE_MS = 500;
/** Tries to delete a failed acquisition's key (1, 2, 3, 4 s apart): a short outage does not strand it. */
const CLEANUP_TRIES = 5;

/** A line's join as an acquisition sends it: a create-if-absent whose answer gives our revision. */
export interface LineJoin<J extends { revision: number }> {
  /** The value our key is put with, which a late copy of the join would write again. */
  readonly value?: string | undefined;
  send(call: JoinCall): Promise<J>;
}

/**
 * One acquisition of a lock, permit, read or write lock, several locks, or leadership: the scope that owns
 * everything a failed acquisition must undo. A recipe reads top to bottom with it:
 *
 *     const acquisition = new Acquisition(session, options, subject, keys); // checks; sends nothing
 *     try {
 *       await acquisition.claim(true);            // the session's own callers of these keys go one at a time
 *       const line = await acquisition.join(join); // our key in the line
 *       ...wait in the line with `acquisition` as the wait's context...
 *       return acquisition.hold(new Lock(...));   // the holding owns the keys from here on
 *     } catch (error) {
 *       throw await acquisition.fail(error);      // leaves the line; says why it failed
 *     } finally {
 *       acquisition.dispose();
 *     }
 *
 * One signal stands for the caller's abort, the session's loss and the timeout. On failure the acquisition
 * leaves the line (so it blocks nobody) and reports the session's end first, then the abort or timeout, else
 * the cause; it never hands out a holding whose session can no longer be trusted.
 */
export class Acquisition implements WaitContext {
  /** `timeout: 0`: try once, never wait. */
  readonly tryOnly: boolean;
  readonly mode: WaitMode;
  readonly pollInterval: number;
  readonly #session: LeaseSession;
  readonly #subject: Subject;
  /** The keys it joins with: in use by this session until released or cleaned up. */
  readonly #keys: readonly string[];
  readonly #timeout: number | undefined;
  /** The caller's abort, the session's loss and the timeout in one: made on first use (see `signal`). */
  #call: CallSignal | undefined;
  /** When the client's timeout ends the wait, if it alone bounds it: `signal` starts its timer from here. */
  #deadline: number | undefined;
  /** What this acquisition has claimed of its session, undone once by `#unclaim` unless a holding took it. */
  #claimed: { turns: (() => void) | undefined } | undefined;
  /** The join, once sent: in flight, landed or failed. */
  #joining: Promise<{ revision: number }> | undefined;
  #sends: JoinSends | undefined;
  /** Our key left the line while we waited (see `expired`). */
  #keyGone = false;
  #startedAt = 0;
  /** Its `etcd-edge:lock` context, when someone traces it. */
  readonly #trace = startingAcquisition();

  /**
   * Checks the options and that the session can still hold anything: SESSION_CLOSED or SESSION_EXPIRED, and
   * nothing sent, when it cannot. Sends nothing and claims nothing.
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
    // What is left of the client's timeout, when it alone bounds the acquisition: read once, as the signal is made.
    const deadline = this.#deadline;
    this.#call ??= new CallSignal(
      this.#session.signal,
      deadline === undefined ? undefined : Math.max(0, deadline - performance.now()),
    );
    return this.#call.signal;
  }

  /**
   * Claims the keys for this caller: marks them in use by the session (no sweep touches them, see LateJoins)
   * and, with `turns`, takes the session's local turn on each. etcd sees one key per session and name for a
   * mutex, so the session's own callers of one name take turns here first. With `tryOnly` a turn taken by
   * another caller is LOCKED.
   */
  async claim(turns: boolean): Promise<void> {
    const session = this.#session;
    this.#startedAt = performance.now();
    session.lateJoins.use(this.#keys);
    const claimed: { turns: (() => void) | undefined } = { turns: undefined };
    this.#claimed = claimed;
    if (!turns) return;
    // Nearly always free: taken at once, with no signal made and no promise.
    claimed.turns = tryTakeAll(session.turns, this.#keys);
    if (claimed.turns !== undefined) return;
    if (this.tryOnly) throw locked(this.#subject.name, "another caller of this session");
    claimed.turns = await takeAll(session.turns, this.#keys, this.signal);
  }

  /**
   * Sends the join and waits for its answer, unless the acquisition is given up first. The join itself is cut
   * off only by the session's loss, never by the caller's abort or timeout: a join cut off in flight may still
   * land after we deleted our key, leaving a key that blocks the line until the lease ends. So a given-up
   * acquisition lets it land, then deletes what it made (`fail`). Sent again while unanswered and the caller
   * still waits; `timeout: 0` tries once, as it asks.
   */
  async join<J extends { revision: number }>(join: LineJoin<J>): Promise<J> {
    const session = this.#session;
    this.#throwIfOver();
    // A sweep of a key we join (a late copy of an earlier join) must be answered first: see LateJoins.
    const swept = session.lateJoins.swept(this.#keys);
    if (swept !== undefined) {
      await untilAborted(swept, this.signal);
      this.#throwIfOver();
    }
    const sends = session.lateJoins.track(this.#keys, join.value);
    this.#sends = sends;
    const call: JoinCall = { signal: session.signal, onSent: sends.sent, refused: sends.refused, idempotent: true };
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

  /**
   * The acquisition succeeded: `holding` owns the keys and the local turns from here on (its end gives them
   * back). SESSION_EXPIRED instead when the session can no longer be trusted.
   */
  hold<H extends Held>(holding: H): H {
    const session = this.#session;
    this.#sends?.settle("landed");
    this.#joining = undefined;
    if (!session.alive) throw this.expired();
    const claimed = this.#claimed;
    this.#claimed = undefined;
    const events = session.client.transport.events;
    if (events.on) {
      const waitedMs = performance.now() - this.#startedAt;
      events.emit({ type: "lock.acquired", ...this.#subject, revision: holding.revision, waitedMs });
    }
    return holding.begin({ keys: this.#keys, handOn: claimed?.turns ?? noTurns });
  }

  /**
   * The acquisition failed with `thrown`: leaves the line once the join has settled (guarded by its revision
   * if it landed; unguarded if its answer was lost, as it may have landed; not at all if it was refused) and
   * returns the error to throw. The cleanup is awaited while the join settles within a round trip or so; a join
   * still in flight when the caller's budget ends is cleaned up after it settles, so the call keeps its timeout
   * and a failed acquisition still leaves no key behind. The local turns and the keys stay claimed until our
   * key is gone, so this session's next caller cannot meet it and a sweep cannot race the cleanup.
   */
  async fail(thrown: unknown): Promise<unknown> {
    const session = this.#session;
    // A key that left the line says the lease ended: one renewal asks etcd, and a lease found gone ends the
    // session for every caller and handle on it, not for this one alone (renew() loses it on LEASE_NOT_FOUND).
    // Awaited as the cleanup is, for a grace at most; the renewal is bounded by its own deadline.
    if (this.#keyGone && session.alive) await withinGrace(session.renew().catch(() => {}));
    const error = this.#why(thrown);
    const joining = this.#joining;
    this.#joining = undefined;
    if (joining === undefined) {
      this.#unclaim();
      return error;
    }
    const sends = this.#sends;
    joining.then(
      () => sends?.settle("landed"),
      (failure: unknown) => sends?.settle(unanswered(failure) ? "unanswered" : "refused"),
    );
    const cleanup = session.closed ? Promise.resolve() : this.#leaveAfter(joining);
    const unclaim = () => this.#unclaim();
    await withinGrace(cleanup.then(unclaim, unclaim));
    return error;
  }

  dispose(): void {
    this.#call?.dispose();
  }

  /** Gives back what `claim` took: the keys' use and the local turns. Once. */
  #unclaim(): void {
    const claimed = this.#claimed;
    this.#claimed = undefined;
    if (claimed === undefined) return;
    this.#session.lateJoins.done(this.#keys);
    claimed.turns?.();
  }

  /** Deletes what the join made, best effort: a lost session's keys go with its lease anyway. */
  async #leaveAfter(joining: Promise<{ revision: number }>): Promise<void> {
    const session = this.#session;
    const revision = await joining.then(
      (joined) => joined.revision,
      (error: unknown) => (unanswered(error) ? undefined : null),
    );
    // Refused: nothing of ours is there.
    if (revision === null) return;
    // Retried through a short outage (an election, a member restarting): a key left here blocks the line until
    // the lease ends.
    for (let tries = 0; tries < CLEANUP_TRIES && !session.closed && session.alive; tries++) {
      try {
        await leave(session.client, this.#keys, revision);
        return;
      } catch {
        // Cut short when the session ends (closed or lost): its keys go with the lease, and no timer outlives it.
        await delay(1_000 * (tries + 1), session.signal);
      }
    }
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

  /** Given up already (a signal aborted before the call, say): send nothing. */
  #throwIfOver(): void {
    const session = this.#session.signal;
    if (this.#call?.aborted) throw this.#call.signal.reason;
    if (session.aborted) throw session.reason;
  }
}

function noTurns(): void {}

/** Waits for `work` for JOIN_GRACE_MS at most; what is left of it runs on by itself. */
async function withinGrace(work: Promise<unknown>): Promise<void> {
  const grace = new AbortController();
  await Promise.race([work, delay(JOIN_GRACE_MS, grace.signal).catch(() => {})]);
  grace.abort();
}

/** Local turns on every key, taken in sorted order so two acquisitions of one session never wait in a cycle. */
async function takeAll(turns: LocalTurns, keys: readonly string[], signal: AbortSignal): Promise<() => void> {
  const taken: Array<() => void> = [];
  try {
    for (const key of [...keys].sort()) taken.push(await turns.take(key, signal));
  } catch (error) {
    for (const handOn of taken) handOn();
    throw error;
  }
  return () => {
    for (const handOn of taken) handOn();
  };
}

/** Every turn if each is free now, else none (undefined). */
function tryTakeAll(turns: LocalTurns, keys: readonly string[]): (() => void) | undefined {
  const taken: Array<() => void> = [];
  for (const key of [...keys].sort()) {
    const handOn = turns.tryTake(key);
    if (handOn === undefined) {
      for (const earlier of taken) earlier();
      return undefined;
    }
    taken.push(handOn);
  }
  return () => {
    for (const handOn of taken) handOn();
  };
}
