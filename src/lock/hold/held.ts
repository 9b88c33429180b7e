import type { KeyValue, LeaseId, ResponseHeader } from "../../api/codec.js";
import type { Bytes } from "../../api/bytes.js";
import { type AnyOp, cmp, type Compare, type OpResults, op, type TxnResult } from "../../api/txn.js";
import { heldLost, heldReleased, releaseRequested } from "../../errors/catalogue.js";
import { type EtcdError, unanswered } from "../../errors/etcd-error.js";
import { publishLockEnd, traceRelease } from "../../events/channels.js";
import { resolveSignal, resolveTimeout } from "../../gateway/config.js";
import { requestScopedIo } from "../../gateway/isolate.js";
import { backgroundTimer, whenAborted } from "../../gateway/signals.js";
import type { CallOptions } from "../../gateway/transport.js";
import type { LeaseSession } from "../lease/lease-session.js";
import type { Put } from "../lease/orphans.js";
import { ReleaseSends } from "../lease/release-sends.js";
import { releasedHere } from "../line/line-watch.js";
import { untilAnswered } from "../resend/until-answered.js";
import type { Request } from "../line/requests.js";
import { explainLoss, type Loss, type OwnKey } from "./explain.js";
import { FOLLOW_AFTER, follow } from "./follow.js";
import { type Subject, subjectText } from "./subject.js";

/** What every holding is made of. */
export interface HeldInit<S extends LeaseSession = LeaseSession> {
  session: S;
  /** The header of the response that showed it acquired. */
  header: ResponseHeader;
}

/**
 * Where a holding is in its life: the one value from which `held`, `signal`, every error and every event are
 * derived. Only `held` holds; `released` and `lost` are final.
 * - `releasing`: a release was sent and has no outcome yet. The caller gave it up, so it no longer holds, but
 *   its keys may still be there; `sends` decides what "already gone" means on a resend.
 * - `released`: deleted by its release, or with its lease by its session's `close()`. `untold`: a release
 *   finished in the background, which the next `unlock()` reports as its success.
 * - `lost`: its keys were gone, or no longer its own, before its release: the work under it was not protected to
 *   the end.
 */
export type Status =
  | { readonly is: "held" }
  | Releasing
  | { readonly is: "released"; readonly why: string; untold: boolean }
  | { readonly is: "lost"; readonly error: EtcdError };

export interface Releasing {
  readonly is: "releasing";
  readonly sends: ReleaseSends;
  /** The send in flight, shared by every caller of `unlock()` meanwhile. */
  sending?: Promise<void> | undefined;
  /** Resent in the background after a send went unanswered; `told`: a caller shares the current send. */
  background: boolean;
  told: boolean;
  /** Why `signal` aborted before the outcome was known: a send went unanswered. */
  pending?: EtcdError | undefined;
}

/** What a holding of one key is made of. */
export interface HeldKeyInit<S extends LeaseSession = LeaseSession> extends HeldInit<S> {
  name: string;
  key: string;
  revision: number;
}

/**
 * Something held under a session's lease (a lock, a permit, a read or write lock, several locks, leadership), the
 * owner of its keys, which no other acquisition uses. Each key is held at one version (its mod revision): its
 * release is a delete guarded by it, resent until answered, in the background once a caller's call failed
 * without an answer (Go's `Unlock` leaves the key to a caller gone). A key written by anyone else, whatever the
 * lease it is written with, is no longer this holding's.
 */
export abstract class Held<S extends LeaseSession = LeaseSession> {
  /** The lease its keys are bound to: its session's. */
  readonly leaseId: LeaseId;
  /** The header of the response that showed it acquired. */
  readonly header: ResponseHeader;
  /** The session whose lease it is bound to. */
  readonly session: S;
  /** The fencing token: the create revision of its key(s). */
  abstract readonly revision: number;
  readonly #subject: Subject;
  /** Its keys, each at the version it holds: a leader's proclamation moves it on (`rewrite`). */
  readonly #keys: readonly OwnKey[];
  /** A ticket of it went out: a later change of its key's lease is that ticket's takeover. */
  #ticketed = false;
  /** Its caller asked for its release (`unlock()`, valid options): disposal neither sends nor tells it again. */
  #asked = false;
  #status: Status = { is: "held" };
  #acquiredAt = 0;
  /** Made on first use of `signal`: most holdings are never asked for one, and aborting costs an Error. */
  #controller: AbortController | undefined;
  /** An operator's request to release it, once following saw one (line/requests.ts), and its record's version. */
  #request: (Request & { record: string; at: number }) | undefined;
  /** Made on first use of `releaseRequested`, as `#controller`. */
  #requests: AbortController | undefined;
  /** Stops following its keys (a timer until it starts). */
  #unfollow: (() => void) | undefined;
  /** Its keys as its join put them, when a send of that join went unanswered: swept for once it ends. */
  #lateJoin: readonly Put[] | undefined;
  /** Takes its keys back once its own release deleted them (keys.ts). */
  #reuse: ((keys: readonly string[]) => void) | undefined;
  /**
   * Rewrites of its key and the judgments of what following saw, one at a time: a judgment never reads the key
   * while a rewrite of the holding's own is on its way, which it would take for someone else's.
   */
  #turns: Promise<unknown> | undefined;
  /** A judgment waiting for its turn: events meanwhile need no other, since its read comes after them. */
  #judgment: Promise<void> | undefined;
  /** Stops listening for the session's end: set by `begin`, called by the end of the holding. */
  #unfollowSession: (() => void) | undefined;

  /** @internal Sends nothing and subscribes to nothing: its acquisition starts it (`begin`). */
  constructor(init: HeldInit<S>, subject: Subject, keys: readonly OwnKey[]) {
    this.session = init.session;
    this.leaseId = init.session.leaseId;
    this.header = init.header;
    this.#subject = subject;
    this.#keys = keys;
  }

  /**
   * @internal Its life starts; its session's end ends it. In an `"auto"` session, one that lasts FOLLOW_AFTER
   * follows its keys on its line's watch (an outside change ends it within one event); a short one opens nothing.
   */
  begin(lateJoin?: readonly Put[], reuse?: (keys: readonly string[]) => void): this {
    this.#lateJoin = lateJoin;
    this.#reuse = reuse;
    this.#acquiredAt = performance.now();
    const session = this.session;
    this.#unfollowSession = whenAborted(session.signal, () => this.#sessionEnded());
    if (session.keepAlive === "auto" && this.#status.is === "held" && !requestScopedIo()) {
      const timer = backgroundTimer(() => {
        this.#unfollow = follow(session, this.#keys, {
          gone: () => void this.#gone(),
          asked: (request, record) => this.#requested(request, record),
        });
      }, FOLLOW_AFTER);
      this.#unfollow = () => clearTimeout(timer);
    }
    return this;
  }

  /** Aborts when it is lost or released (or its release goes on in the background); the reason says which. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      const status = this.#status;
      const ended = this.#ended() ?? (status.is === "releasing" ? status.pending : undefined);
      if (ended !== undefined) this.#controller.abort(ended);
    }
    return this.#controller.signal;
  }

  /**
   * Aborts when an operator asks for its release (`operator.requestRelease`, `npx etcd-edge locks request-release`),
   * with RELEASE_REQUESTED whose message gives their reason. Nothing else changes: it is still held until released.
   * Learned as `held` learns of an outside delete: in an `"auto"` session, by a holding older than a second,
   * within one watch event.
   */
  get releaseRequested(): AbortSignal {
    if (this.#requests === undefined) {
      this.#requests = new AbortController();
      if (this.#request !== undefined) this.#requests.abort(releaseRequested(this.#what, this.#request.reason));
    }
    return this.#requests.signal;
  }

  /**
   * True while it is held: no release sent, not lost, and its session's lease trusted (within its deadline). In
   * an `"auto"` session, a holding older than a second also learns within one watch event that another client
   * deleted or overwrote its key; elsewhere its release finds that out.
   */
  get held(): boolean {
    return this.session.alive && this.#status.is === "held";
  }

  /** Renews the session's lease (one request). SESSION_EXPIRED if it is gone. */
  renew(options?: CallOptions): Promise<number> {
    return this.session.renew(options);
  }

  /** For `await using`: releases it unless `unlock()` was called (whatever it answered) or it was released. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#asked && this.#status.is !== "released") await this.releaseHeld();
  }

  /** @internal A ticket of it was handed out (see `Lock.ticket`). */
  protected ticketed(): void {
    this.#ticketed = true;
  }

  /**
   * @internal Writes `value` to its one key, keeping its lease, only while the key is the version it holds (a
   * leader's proclamation); the key's new version is the one it holds from then on. False when it was not.
   */
  protected rewrite(value: Bytes, options: CallOptions): Promise<boolean> {
    return this.#inTurn(async () => {
      const own = this.#keys[0]!;
      const result = await this.session.client
        .txn()
        .if(cmp.modRevision(own.key, "==", own.modRevision))
        .then(op.put(own.key, value, { lease: this.leaseId }))
        .commit(options);
      if (result.succeeded) own.modRevision = result.header.revision;
      return result.succeeded;
    });
  }

  /** Runs `work` after the rewrites and judgments before it (see `#turns`). */
  #inTurn<T>(work: () => Promise<T>): Promise<T> {
    const turn = (this.#turns ?? Promise.resolve()).then(work);
    this.#turns = turn.catch(() => {});
    return turn;
  }

  /**
   * @internal `unlock()` / `release()`: `held` sends it; `releasing` shares the send in flight or sends again;
   * `released` is LOCK_RELEASED (once, a background release's success); `lost` is LOCK_LOST with its reason.
   * Several calls at once share one send and its outcome.
   */
  protected releaseHeld(options: CallOptions = {}): Promise<void> {
    return traceRelease(this.#subject, this.revision, this.#acquiredAt, () => this.#release(options));
  }

  async #release(options: CallOptions): Promise<void> {
    await this.#settled(options);
    // Read after the last await, never before it: calls at once see one `releasing` and share its send.
    const status = this.#status;
    switch (status.is) {
      case "lost":
        throw status.error;
      case "released":
        if (!status.untold) throw heldReleased(this.#what, status.why);
        status.untold = false;
        return;
      case "held":
        return this.#send(this.#releasing(), options);
      case "releasing":
        status.told = true;
        return status.sending ?? this.#send(status, options);
    }
  }

  /**
   * What a release does before it looks at the status: bad options refused before anything changes; then it is
   * asked for, its lease's deadline checked (a frozen process's holding is lost without a request), and a
   * session's close settled.
   */
  async #settled(options: CallOptions): Promise<void> {
    resolveSignal(options.signal);
    resolveTimeout(options.timeout, "timeout");
    resolveTimeout(options.attemptTimeout, "attemptTimeout");
    this.#asked = true;
    this.session.trusted();
    const revocation = this.session.revocation;
    if (revocation !== undefined) await revocation.catch(() => {});
  }

  #releasing(): Releasing {
    const releasing: Releasing = {
      is: "releasing",
      sends: new ReleaseSends(this.session),
      background: false,
      told: true,
    };
    this.#status = releasing;
    return releasing;
  }

  /** One send of the release, shared by callers until it settles. */
  #send(releasing: Releasing, options: CallOptions): Promise<void> {
    const sending = this.#sendOnce(releasing, options);
    releasing.sending = sending;
    const clear = () => {
      if (releasing.sending === sending) releasing.sending = undefined;
      // Its session ended meanwhile and left the outcome to this send, which went unanswered: decide now.
      if (this.#status === releasing && this.session.signal.aborted) this.#sessionEnded();
    };
    sending.then(clear, clear);
    return sending;
  }

  async #sendOnce(releasing: Releasing, options: CallOptions): Promise<void> {
    let deleted: ResponseHeader | undefined;
    try {
      deleted = await this.#delete({ ...options, onSent: releasing.sends.sent });
    } catch (error) {
      if (this.#status === releasing) this.#unsent(releasing, error);
      throw this.#ended() ?? error;
    }
    // Ended meanwhile by its session's close: that is the outcome.
    if (this.#status !== releasing) return this.#outcome();
    // Deleted while its own: protected to the end, whatever the local deadline says by now.
    if (deleted) return this.#released(deleted);
    return this.#refused(releasing, options);
  }

  /**
   * @internal `unlockWith()` / `releaseWith()`: `ops` and the deletes in one transaction under the fencing
   * compares. Sent once (it writes): a lost answer goes on in the background as a guarded delete.
   */
  protected releaseHeldWith<Ops extends AnyOp[]>(ops: Ops, options: CallOptions = {}): Promise<OpResults<Ops>> {
    return traceRelease(this.#subject, this.revision, this.#acquiredAt, () => this.#releaseWith(ops, options));
  }

  async #releaseWith<Ops extends AnyOp[]>(ops: Ops, options: CallOptions): Promise<OpResults<Ops>> {
    await this.#settled(options);
    // Ended: its end's error (LOCK_LOST with its reason, or LOCK_RELEASED); releasing: its release was sent.
    const status = this.#status;
    if (status.is !== "held") throw this.#ended() ?? heldReleased(this.#what, "its release was already sent");
    const releasing = this.#releasing();
    let result: TxnResult<AnyOp[], []>;
    try {
      result = await this.session.client
        .txn()
        .if(...this.#guards())
        .then(...ops, ...this.#keys.map((own) => op.delete(own.key)))
        .commit({ ...options, onSent: releasing.sends.sent });
    } catch (error) {
      if (this.#status === releasing) this.#unsent(releasing, error);
      throw this.#ended() ?? error;
    }
    if (result.succeeded) {
      // The writes landed while the keys were the holding's: protected to the end, whatever ended it meanwhile.
      this.#released(result.header);
      return result.responses.slice(0, ops.length) as OpResults<Ops>;
    }
    // Its first send, refused: lost (only a resend's refusal can follow a send that deleted its keys).
    await this.#refused(releasing, options);
    throw this.#ended();
  }

  /**
   * Its release found its keys changed or gone: lost, and why (one read), unless something ended it meanwhile. A
   * resend's refusal after a send that may have landed: gone, that send deleted them (or their lease ended after
   * the work), a release; still there as their joins made them but changed by another client, none did.
   */
  async #refused(releasing: Releasing, options: CallOptions): Promise<void> {
    const loss = await this.#explain(options);
    // Its own session's close may be what took the keys while this send was on its way: the close decides, once
    // its revocation is known (#sessionEnded), and released by it is this release's outcome, as in #sendOnce.
    if (!loss?.stillThere) await this.session.revocation?.catch(() => {});
    if (this.#status === releasing) {
      if (releasing.sends.goneMeansDone && !loss?.stillThere) return this.#released();
      this.#lose(loss ?? { why: "its keys had changed when it was released" });
    }
    this.#outcome();
  }

  /** A release's outcome once its holding has ended: LOCK_LOST if it was lost; released, it resolves. */
  #outcome(): void {
    const status = this.#status;
    if (status.is === "lost") throw status.error;
  }

  /** Released; `deleted` by this very send (its header): its keys may serve another acquisition, its waiters wake. */
  #released(deleted?: ResponseHeader): void {
    // This client's waiters behind its keys wake on the answer, which may come before the watch's event.
    if (deleted) for (const own of this.#keys) releasedHere(this.session.client, own.key, deleted);
    const was = this.#status;
    this.#end({ is: "released", why: "it was released", untold: false });
    this.#forgetRequest();
    const reuse = this.#reuse;
    if (deleted && was.is === "releasing" && !was.background && !this.#ticketed && !this.#lateJoin && reuse) {
      reuse(this.#keys.map((own) => own.key));
    }
  }

  /**
   * A send of the release failed. Unanswered: it goes on in the background (and `signal` says so). Refused, with no
   * earlier send that may have landed: nothing changed, it holds.
   */
  #unsent(releasing: Releasing, error: unknown): void {
    if (!unanswered(error)) {
      if (!releasing.background) this.#status = { is: "held" };
      return;
    }
    this.#resendInBackground(releasing);
    releasing.pending ??= heldReleased(this.#what, "its release was sent; it goes on in the background");
    this.#controller?.abort(releasing.pending);
  }

  /** Its fencing compares: each key still the version the holding has. */
  #guards(): Compare[] {
    return this.#keys.map((own) => cmp.modRevision(own.key, "==", own.modRevision));
  }

  /** The guarded delete, one request; its header if the keys were there. One key goes with others of the turn. */
  async #delete(options: CallOptions): Promise<ResponseHeader | undefined> {
    const keys = this.#keys;
    const release = this.session.client
      .txn()
      .if(...this.#guards())
      .then(...keys.map((own) => op.delete(own.key)))
      .prepare();
    const call = { ...options, idempotent: true } as const;
    const result = keys.length === 1 ? await release.commitWithOthers(keys[0]!.key, call) : await release.commit(call);
    return result.succeeded ? result.header : undefined;
  }

  /** Why its keys were gone or changed (undefined: they were not); "gone" when even that cannot be read. */
  #explain(options: CallOptions): Promise<Loss | undefined> {
    const why = { ...options, ticketed: this.#ticketed };
    return explainLoss(this.session.client, this.leaseId, this.#keys, why).catch((error: unknown) => ({
      why: "its keys were gone when it was released",
      cause: error,
    }));
  }

  /**
   * What follows its keys saw a change (`follow`): a read says whether it is still its own (a leader's own
   * proclamation, whose event may come before its answer, is), else why it is not; a lease gone ends its session.
   */
  #gone(): Promise<void> {
    if (this.#judgment !== undefined) return this.#judgment;
    const judgment = this.#inTurn(async () => {
      this.#judgment = undefined;
      if (this.#status.is !== "held") return;
      const loss = await this.#explain({});
      if (loss === undefined || this.#status.is !== "held") return;
      this.#lose(loss);
      if (loss.leaseGone) this.session.lostLease(heldLost(this.#what, loss.why));
    });
    this.#judgment = judgment;
    return judgment;
  }

  /**
   * Released after an operator asked for it: the request's record goes too, once its release is answered. A
   * request of its own, in the background (the release never waits for it, nor fails for it: a holder whose role
   * cannot delete the records leaves them to its lease), guarded by the record's version.
   */
  #forgetRequest(): void {
    const request = this.#request;
    if (request === undefined) return;
    void this.session.client
      .txn()
      .if(cmp.modRevision(request.record, "==", request.at))
      .then(op.delete(request.record))
      .commit({ background: true })
      .catch(() => {});
  }

  /** Following saw an operator's record for it: a request to release it is told once; a revocation ends it. */
  #requested(request: Request, record: KeyValue): void {
    if (request.kind === "revoke") return void this.#gone();
    if (this.#request !== undefined || this.#status.is !== "held") return;
    this.#request = { ...request, record: record.key, at: record.modRevision };
    this.#requests?.abort(releaseRequested(this.#what, request.reason));
  }

  /**
   * Resends the release until answered, after growing pauses, while the session lives (its keys go with it) and
   * the release has no outcome: a caller's own send meanwhile is shared, not doubled.
   */
  #resendInBackground(releasing: Releasing): void {
    if (releasing.background) return;
    releasing.background = true;
    const resend = (): Promise<void> => {
      if (this.#status !== releasing) return Promise.resolve();
      if (releasing.sending === undefined) {
        releasing.told = false;
        this.#send(releasing, {});
      }
      return releasing.sending!;
    };
    const over = () => this.#status !== releasing;
    void untilAnswered(resend, { signal: this.session.signal, over, background: true }).then(
      () => {
        // Finished here: the next unlock() learns the success once, unless a caller shared this send.
        const status = this.#status as Status;
        if (status.is === "released" && !releasing.told) status.untold = true;
      },
      () => {},
    );
  }

  /**
   * Its session ended. A release that left within the deadline and is not on its way: released (the work was done
   * by then). Closed: released once the revocation is known, unless the lease had ended before (then lost, or what a
   * release on its way is answered). Lost: lost, unless a release is on its way (its answer decides).
   * Never called once it has ended: `#end` stops listening to the session, and a send's end checks the status.
   */
  #sessionEnded(): void {
    const status = this.#status;
    const onItsWay = status.is === "releasing" && status.sending !== undefined;
    if (status.is === "releasing" && !onItsWay && status.sends.sentWithinDeadline) {
      return this.#end({ is: "released", why: "it was released", untold: true });
    }
    const session = this.session;
    // Set by close() (`closed` says the same), and only by it.
    const revocation = session.revocation;
    if (revocation !== undefined) {
      this.#unfollow?.();
      const failed = "its session was closed, but the revocation of its lease failed: its keys go when it expires";
      void revocation.then(
        (revoked) => {
          if (revoked) this.#end({ is: "released", why: "its session was closed", untold: false });
          else if (!onItsWay) this.#lose({ why: "its session's lease had ended before the session was closed" });
        },
        () => this.#end({ is: "released", why: failed, untold: false }),
      );
      return;
    }
    if (onItsWay) return;
    const reason = session.signal.reason as { code?: unknown };
    const why =
      reason.code === "PERMISSION_DENIED" ? "its session's lease could not be renewed" : "its session's lease ended";
    this.#lose({ why, cause: reason });
  }

  #lose(loss: Loss): void {
    this.#end({ is: "lost", error: heldLost(this.#what, loss.why, loss.cause) });
  }

  /** The one transition out of `held` or `releasing`: told to `onEvent`, the channels and `signal`. */
  #end(next: Extract<Status, { is: "released" | "lost" }>): void {
    const was = this.#status.is;
    if (was === "released" || was === "lost") return;
    this.#status = next;
    this.#unfollow?.();
    this.#unfollow = undefined;
    publishLockEnd(next.is === "lost" ? "lock.lost" : "lock.released", this.#subject, this.revision, this.#acquiredAt);
    const events = this.session.client.transport.events;
    if (events.on) {
      const { kind, name } = this.#subject;
      const revision = this.revision;
      if (next.is === "lost") events.emit({ type: "lock.lost", kind, name, revision });
      else events.emit({ type: "lock.released", kind, name, revision, heldMs: performance.now() - this.#acquiredAt });
    }
    this.#unfollowSession?.();
    if (this.#lateJoin) this.session.orphans.watch(this.#lateJoin);
    const controller = this.#controller;
    if (controller !== undefined && !controller.signal.aborted) controller.abort(this.#ended());
  }

  /** The error a call on it gets once it has ended; undefined while it holds. */
  #ended(): EtcdError | undefined {
    const status = this.#status;
    if (status.is === "lost") return status.error;
    if (status.is === "released") return heldReleased(this.#what, status.why);
    return undefined;
  }

  /** How errors name it ("lock x", "permit of semaphore y"): only an error needs it. */
  get #what(): string {
    return subjectText(this.#subject);
  }
}

/**
 * A holding of one key: a lock, a permit, a read or write lock, leadership. `revision` (the key's create
 * revision) is its fencing token: it strictly increases across successive holders, so storage guarded by
 * `ifHeld()` refuses a stale holder's write.
 */
export abstract class HeldKey<S extends LeaseSession = LeaseSession> extends Held<S> {
  /** The name it was taken on. */
  readonly name: string;
  /** Its key in etcd: its own, used by no other acquisition. */
  readonly key: string;
  /** The fencing token: the create revision of its key. */
  readonly revision: number;
  /** Its key as it holds it: the version its fencing compare checks. */
  readonly #own: OwnKey;

  /** @internal Written once, by its join, unless `modRevision` says otherwise (a ticket's takeover rewrote it). */
  constructor(init: HeldKeyInit<S>, subject: Subject, modRevision?: number) {
    const own = { key: init.key, revision: init.revision, modRevision: modRevision ?? init.revision };
    super(init, subject, [own]);
    this.#own = own;
    this.name = init.name;
    this.key = init.key;
    this.revision = init.revision;
  }

  /**
   * The compare "this handle still holds it", for fenced transactions: its key is still the very version this
   * handle holds, so after a takeover with a ticket or a write by anyone else, its fenced writes are refused.
   */
  ifHeld(): Compare {
    return cmp.modRevision(this.key, "==", this.#own.modRevision);
  }
}
