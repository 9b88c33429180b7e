import { describe, invalidArgument, sessionClosed, sessionExpired, waitTimedOut } from "../../errors/catalogue.js";
import { type EtcdError, isEtcdError, unanswered } from "../../errors/etcd-error.js";
import { startingAcquisition, traceWaiting } from "../../events/channels.js";
import type { KeyValue } from "../../api/codec.js";
import { lockDelayArg } from "../../api/config.js";
import { resolveTimeout } from "../../gateway/config.js";
import { anySignal, CallSignal, delay, untilAborted } from "../../gateway/signals.js";
import type { Held } from "../hold/held.js";
import { refusedHere, type Subject, subjectText } from "../hold/subject.js";
import type { LeaseSession } from "../lease/lease-session.js";
import type { Put } from "../lease/orphans.js";
import { KeyTaken } from "../line/keys.js";
import type { JoinCall, WaitContext, WaitMode } from "../line/standing.js";
import { untilAnswered } from "../resend/until-answered.js";
import { uncleanExit } from "./lock-delay.js";
import type { LockOptions } from "./options.js";

export type { LockOptions, WaitOptions } from "./options.js";

/** Below this a waiter's polls become a request flood; above it a released lock goes unnoticed too long. */
const MIN_POLL_INTERVAL = 50;
const MAX_POLL_INTERVAL = 60_000;

/** The wait mode, poll interval and time budget of a wait, checked before anything is sent. */
export function waitSettings(options: LockOptions): {
  mode: WaitMode;
  pollInterval: number;
  tryOnly: boolean;
  lockDelay: number | undefined;
} {
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
  return { mode, pollInterval, tryOnly: options.timeout === 0, lockDelay: lockDelayArg(options.lockDelay) };
}

/** How long a failed acquisition waits for its join and cleanup before leaving the cleanup to run on its own. */
const JOIN_GRACE_MS = 500;

/**
 * One acquisition of a lock, permit, read or write lock, several locks, or leadership. It owns its keys (made
 * for it alone, see keys.ts) until it hands them to its holding (`hold`) or, on failure, to its session's
 * orphans (`fail`), which delete them. A recipe reads top to bottom with it: `new Acquisition(...)` (checks,
 * sends nothing), `join`, its wait with the acquisition as context, `hold`; `fail` in its catch, `dispose` in
 * its finally. One signal stands for the caller's abort, the session's loss and the timeout; a failure reports
 * the session's end first, then the abort or timeout, else the cause.
 */
export class Acquisition implements WaitContext {
  /** `timeout: 0`: try once, never wait. */
  readonly tryOnly: boolean;
  readonly mode: WaitMode;
  readonly pollInterval: number;
  /** Milliseconds to wait before holding after the contender ahead left uncleanly (0: none, and nothing read). */
  readonly #lockDelay: number;
  readonly #session: LeaseSession;
  readonly #subject: Subject;
  /** Its keys, each with the value its join puts: what is deleted if it fails, or swept if a join lands late. */
  readonly #puts: readonly Put[];
  readonly #timeout: number | undefined;
  /** The caller's abort, the session's loss and the timeout in one, made on first use; or when the timeout ends. */
  #call: CallSignal | undefined;
  #deadline: number | undefined;
  /** The join, once sent; its sends handed to fetch and those answered without effect (the rest may land late). */
  #joining: Promise<unknown> | undefined;
  #sent = 0;
  #refused = 0;
  /** Our key left the line while we waited (see `expired`). */
  #keyGone = false;
  #startedAt = 0;
  readonly #trace = startingAcquisition();

  /** Checks the options, and that the session can still hold anything (else SESSION_CLOSED, SESSION_EXPIRED). */
  constructor(session: LeaseSession, options: LockOptions, subject: Subject, puts: readonly Put[]) {
    const settings = waitSettings(options);
    this.tryOnly = settings.tryOnly;
    this.mode = settings.mode;
    this.pollInterval = settings.pollInterval;
    this.#lockDelay = settings.lockDelay ?? session.client.lockDelay;
    this.#session = session;
    this.#subject = subject;
    this.#puts = puts;
    // Without a timeout of its own a wait is bounded by the client's `timeout`, as every call is; a campaign
    // waits until elected, as a standby does.
    const bound = subject.kind === "leadership" ? undefined : session.client.transport.config.timeout;
    this.#timeout = this.tryOnly ? undefined : (options.timeout ?? bound);
    if (session.closed) throw sessionClosed(session.leaseId, `${subjectText(subject)} was not attempted`);
    if (!session.trusted()) {
      throw sessionExpired(session.leaseId, session.signal.reason, `${subjectText(subject)} was not attempted`);
    }
    // A signal of its own at once only when the caller brings a limit; bounded by the client's timeout alone, it
    // is made when something first waits on it (`signal`): an uncontended acquisition never makes one.
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
   * Sends the join (again while unanswered, but with `timeout: 0`) and waits for its answer unless given up
   * first. Only the session's loss cuts the join off: one cut off in flight could still land after our cleanup,
   * so a given-up acquisition lets it land, then deletes what it made (`fail`).
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
      tryOnly: this.tryOnly,
    };
    const sent = this.tryOnly ? join.send(call) : untilAnswered(join.send.bind(join, call), this);
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
   * Nothing is ahead of us any more, since `departed` left: with a lockDelay, held only that long later if it
   * left uncleanly (lock-delay.ts), as Chubby's lock-delay. Told to `onEvent` (`lock.delayed`).
   */
  async handover(departed: KeyValue): Promise<void> {
    if (this.#lockDelay === 0) return;
    const signal = this.signal;
    const why = await uncleanExit(this.#session.client, departed, signal);
    if (why === undefined) return;
    const events = this.#session.client.transport.events;
    if (events.on) events.emit({ type: "lock.delayed", ...this.#subject, delayMs: this.#lockDelay, why });
    await delay(this.#lockDelay, signal);
  }

  /** SESSION_EXPIRED: our key left the line, so our lease ended (Go concludes so too); `fail` asks etcd. */
  expired(): EtcdError {
    const session = this.#session;
    this.#keyGone = true;
    return sessionExpired(session.leaseId, session.signal.reason, `${subjectText(this.#subject)} was not acquired`);
  }

  /**
   * The acquisition succeeded: `holding` owns the keys from here on, and gives them to `reuse` once its release
   * deleted them (see keys.ts). SESSION_EXPIRED if the lease is not trusted.
   */
  hold<H extends Held>(holding: H, reuse?: (keys: readonly string[]) => void): H {
    const session = this.#session;
    this.#joining = undefined;
    if (!session.trusted()) throw this.expired();
    const events = session.client.transport.events;
    if (events.on) {
      const waitedMs = performance.now() - this.#startedAt;
      events.emit({ type: "lock.acquired", ...this.#subject, revision: holding.revision, waitedMs });
    }
    // A send of the join never answered may land after the holding's release: its session sweeps for it then.
    return holding.begin(this.#sent > this.#refused + 1 ? this.#puts : undefined, reuse);
  }

  /**
   * Failed with `thrown`: hands its keys to its session's orphans (deleted once the join has settled, resent
   * until answered while the session lives) and returns the error to throw; the cleanup is awaited for a grace
   * at most, so the call keeps its timeout.
   */
  async fail(thrown: unknown): Promise<unknown> {
    const session = this.#session;
    // A reused key found under another value: nothing of ours is there to delete.
    if (thrown instanceof KeyTaken) return thrown;
    // Our key left the line: one renewal asks etcd, and a lease found gone ends the session for all on it.
    if (this.#keyGone && session.trusted()) await withinGrace(session.renew().catch(() => {}));
    const error = this.#why(thrown);
    const joining = this.#joining;
    this.#joining = undefined;
    // Nothing sent, every send answered "not applied" (a busy try), or a closed session's keys went with its lease.
    if (joining === undefined || (this.#sent > 0 && this.#sent === this.#refused) || session.closed) return error;
    const answered = joining.then(
      () => 1,
      (failure: unknown) => (unanswered(failure) ? 0 : 1),
    );
    const cleanup = answered.then((last) =>
      session.orphans.leave(this.#puts, joining, this.#sent > this.#refused + last),
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
    if (isEtcdError(thrown, "PERMISSION_DENIED")) {
      return refusedHere(
        this.#subject,
        this.#puts.map((put) => put.key),
        thrown,
      );
    }
    return thrown;
  }
}

/** Waits for `work` for JOIN_GRACE_MS at most; what is left of it runs on by itself. */
async function withinGrace(work: Promise<unknown>): Promise<void> {
  const grace = new AbortController();
  await Promise.race([work, delay(JOIN_GRACE_MS, grace.signal).catch(() => {})]);
  grace.abort();
}
