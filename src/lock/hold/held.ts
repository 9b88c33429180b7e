import type { LeaseId, ResponseHeader } from "../../api/codec.js";
import { type AnyOp, cmp, type OpResults, op, type TxnResult } from "../../api/txn.js";
import { heldLost, heldReleased } from "../../errors/catalogue.js";
import { type EtcdError, unanswered } from "../../errors/etcd-error.js";
import { publishLockLost, traceRelease } from "../../events/channels.js";
import { delay } from "../../gateway/signals.js";
import type { CallOptions } from "../../gateway/transport.js";
import type { LeaseSession } from "../session/lease-session.js";
import { ReleaseSends, resendPause } from "../session/release-sends.js";
import { leave, leaveVersion } from "../line/leave.js";
import { explainLoss, type Loss, type OwnKey } from "./explain.js";
import { type Subject, subjectText } from "./subject.js";

/** What a holding owns in its session from its acquisition on: its keys, and the local turn(s) it took. */
export interface Claim {
  /** Its keys: in use by the session (see LateJoins) until the holding ends. */
  keys: readonly string[];
  /** Hands the session's local turn(s) on to its next caller; called once, when the holding ends. */
  handOn: () => void;
}

/** What every holding is made of. */
export interface HeldInit<S extends LeaseSession = LeaseSession> {
  session: S;
  /** The header of the response that showed it acquired. */
  header: ResponseHeader;
}

/** Its keys, and how its release guards them. */
export interface HeldKeys {
  keys: readonly OwnKey[];
  /**
   * The release deletes its key only while the key's mod revision is the holding's (a mutex's lock, whose key a
   * ticket rewrites): else while each key's create revision is.
   */
  byVersion: boolean;
}

/**
 * Where a holding is in its life: the one value from which `held`, `signal`, every error and every event are
 * derived. `held` and `releasing` are the holding's; `released` and `lost` are final.
 * - `held`: its keys are its own, and no release has been sent.
 * - `releasing`: a release was sent and has no outcome yet (its answer was lost, or etcd refused it); its keys
 *   may still be there, so it still holds. `sends` decides what "already gone" means on a resend.
 * - `released`: its keys were deleted by its release, or with its lease by its session's `close()`.
 * - `lost`: its keys were gone, or were no longer its own, before its release: the work under it was not
 *   protected to the end. `error` is what every later call is told.
 */
type Status =
  | { readonly is: "held" }
  | Releasing
  | { readonly is: "released"; readonly why: string; untold: boolean }
  | { readonly is: "lost"; readonly error: EtcdError };

interface Releasing {
  readonly is: "releasing";
  readonly sends: ReleaseSends;
  /** The send in flight, shared by every caller of `unlock()` meanwhile. */
  sending: Promise<void> | undefined;
  /** Resends go on in the background after a caller's call failed without an answer. */
  background: boolean;
  /** A caller of `unlock()` shares the send in flight, and so learns its outcome. */
  told: boolean;
}

/**
 * Something held under a session's lease: a lock, a permit, a read or write lock, several locks at once,
 * leadership. They share one life (see `Status`): it ends when released or when the lease is lost (`signal`
 * aborts, `held` turns false), and it is released with guarded deletes resent until answered, where "already
 * gone" after an earlier send within the lease's deadline is success (the earlier send did it).
 *
 * A release whose call failed without an answer (TIMEOUT, UNAVAILABLE) goes on in the background while the
 * session lives. Go's `Mutex.Unlock` leaves the key to the caller then, and a caller that moves on leaves
 * the lock blocked for every contender until the lease ends; worse, this session's own next `lock()` of the
 * name waits for the local turn the holding still has. The key must go as soon as etcd answers again.
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
  /** What it is, for errors and events. */
  readonly #subject: Subject;
  readonly #keys: HeldKeys;
  /** A ticket of it was handed out: a later change of its key's lease is that ticket's takeover. */
  #ticketed = false;
  #status: Status = { is: "held" };
  #claim: Claim | undefined;
  /** When it was acquired, for `lock.released`'s `heldMs`. */
  #acquiredAt = 0;
  /** Made on first use of `signal`: most holdings are never asked for one, and aborting costs an Error. */
  #controller: AbortController | undefined;

  /** @internal Sends nothing and subscribes to nothing: its acquisition starts it (`begin`). */
  constructor(init: HeldInit<S>, subject: Subject, keys: HeldKeys) {
    this.session = init.session;
    this.leaseId = init.session.leaseId;
    this.header = init.header;
    this.#subject = subject;
    this.#keys = keys;
  }

  /**
   * @internal Its life starts: it owns `claim` until it ends, and follows its session, whose loss ends it. A
   * session lost already ends it at once.
   */
  begin(claim: Claim): this {
    this.#claim = claim;
    this.#acquiredAt = performance.now();
    const session = this.session.signal;
    if (session.aborted) this.handleEvent();
    else session.addEventListener("abort", this);
    return this;
  }

  /** Aborts when it is lost or released; its reason is the error a later `unlock()` gives. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      const ended = this.#ended();
      if (ended !== undefined) this.#controller.abort(ended);
    }
    return this.#controller.signal;
  }

  /**
   * True while it is held: not released, not lost, and its session's lease trusted (within its deadline). What
   * the handle cannot see without asking etcd (another client deleting or overwriting its key) turns it false
   * when its release or `verify()` finds it.
   */
  get held(): boolean {
    // Reading `alive` notices a deadline passed unrenewed: the session is then lost, and this with it.
    const alive = this.session.alive;
    const is = this.#status.is;
    return alive && (is === "held" || is === "releasing");
  }

  /** Renews the session's lease (one request). SESSION_EXPIRED if it is gone. */
  renew(options?: CallOptions): Promise<number> {
    return this.session.renew(options);
  }

  /** For `await using`: releases it unless that already happened (LOCK_LOST if it was lost). */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#status.is !== "released") await this.releaseHeld();
  }

  /** @internal A ticket of it was handed out (see `Lock.ticket`). */
  protected ticketed(): void {
    this.#ticketed = true;
  }

  /**
   * @internal The release behind `unlock()` / `release()`, by status: `held` sends it; `releasing` shares the
   * send in flight or sends again at once; `released` is LOCK_RELEASED (or, once, the success of a release
   * finished in the background); `lost` is LOCK_LOST with its reason. After a failure without an answer
   * (TIMEOUT, UNAVAILABLE) the release goes on in the background while the session lives.
   */
  protected releaseHeld(options: CallOptions = {}): Promise<void> {
    return traceRelease(this.#subject, this.revision, this.#acquiredAt, () => this.#release(options));
  }

  #release(options: CallOptions): Promise<void> {
    const status = this.#status;
    switch (status.is) {
      case "lost":
        return Promise.reject(status.error);
      case "released":
        if (status.untold) {
          status.untold = false;
          return Promise.resolve();
        }
        return Promise.reject(heldReleased(this.#what, status.why));
      case "held":
        return this.#send(this.#releasing(), options);
      case "releasing":
        status.told = true;
        return status.sending ?? this.#send(status, options);
    }
  }

  /** The transition from `held` to `releasing`: the first send of a release. */
  #releasing(): Releasing {
    const releasing: Releasing = {
      is: "releasing",
      sends: new ReleaseSends(this.session),
      sending: undefined,
      background: false,
      told: true,
    };
    this.#status = releasing;
    return releasing;
  }

  /** Why its keys were gone or changed at its release; "gone" when even that cannot be read. */
  #explain(options: CallOptions): Promise<Loss> {
    const { client } = this.session;
    return explainLoss(client, this.leaseId, this.#keys.keys, { ...options, ticketed: this.#ticketed }).catch(
      (error: unknown) => ({ why: "its keys were gone when it was released", cause: error }),
    );
  }

  /** One send of the release, shared by callers until it settles. */
  #send(releasing: Releasing, options: CallOptions): Promise<void> {
    const sending = this.#sendOnce(releasing, options);
    releasing.sending = sending;
    const clear = () => {
      if (releasing.sending === sending) releasing.sending = undefined;
    };
    sending.then(clear, clear);
    return sending;
  }

  async #sendOnce(releasing: Releasing, options: CallOptions): Promise<void> {
    let deleted: boolean;
    try {
      deleted = await this.#delete({ ...options, onSent: releasing.sends.sent });
    } catch (error) {
      if (this.#status === releasing && unanswered(error)) this.#resendInBackground(releasing);
      throw this.#ended() ?? error;
    }
    // Ended meanwhile (its session was lost or closed): what it ended with is the outcome.
    if (this.#status !== releasing) {
      const ended = this.#ended();
      if (ended !== undefined && this.#status.is === "lost") throw ended;
      return;
    }
    if (deleted || releasing.sends.goneMeansDone) {
      this.#end({ is: "released", why: "it was released", untold: false });
      return;
    }
    const loss = await this.#explain(options);
    if (this.#status === releasing) this.#lose(loss);
    throw this.#ended();
  }

  /**
   * @internal The release behind `unlockWith()` / `releaseWith()`: one transaction that runs `ops` and deletes
   * the keys, only while the keys are still the holding's (its fencing compares), so "work, write, release" is
   * two round trips instead of three. Resolves with the results of `ops`; the holding is then released. If
   * the compares fail, nothing is written and nothing deleted: LOCK_LOST with the reason. Sent once (it
   * writes): a lost answer rejects with the transport's error marked `indeterminate` (the writes may have
   * landed), and the release goes on in the background as a plain guarded delete, which an earlier landing of
   * this transaction makes a success.
   */
  protected releaseHeldWith<Ops extends AnyOp[]>(ops: Ops, options: CallOptions = {}): Promise<OpResults<Ops>> {
    return traceRelease(this.#subject, this.revision, this.#acquiredAt, () => this.#releaseWith(ops, options));
  }

  async #releaseWith<Ops extends AnyOp[]>(ops: Ops, options: CallOptions): Promise<OpResults<Ops>> {
    const status = this.#status;
    if (status.is === "lost") throw status.error;
    if (status.is !== "held") throw this.#ended() ?? heldReleased(this.#what, "its release was already sent");
    const releasing = this.#releasing();
    const { keys, byVersion } = this.#keys;
    const guards = byVersion
      ? [cmp.modRevision(keys[0]!.key, "==", keys[0]!.modRevision)]
      : keys.map((own) => cmp.createRevision(own.key, "==", own.revision));
    let result: TxnResult<AnyOp[], []>;
    try {
      result = await this.session.client
        .txn()
        .if(...guards)
        .then(...ops, ...keys.map((own) => op.delete(own.key)))
        .commit({ ...options, onSent: releasing.sends.sent });
    } catch (error) {
      if (this.#status === releasing && unanswered(error)) this.#resendInBackground(releasing);
      throw this.#ended() ?? error;
    }
    if (result.succeeded) {
      // The writes landed while the keys were the holding's: protected to the end, whatever ended it meanwhile.
      this.#end({ is: "released", why: "it was released", untold: false });
      return result.responses.slice(0, ops.length) as OpResults<Ops>;
    }
    if (this.#status === releasing) this.#lose(await this.#explain(options));
    throw this.#ended();
  }

  /**
   * The guarded delete of its keys, one request; true if they were there to delete. A lock's one key goes
   * with other releases started in the same turn (see `leaveVersion`).
   */
  #delete(options: CallOptions): Promise<boolean> {
    const { keys, byVersion } = this.#keys;
    const client = this.session.client;
    if (byVersion) return leaveVersion(client, keys[0]!.key, keys[0]!.modRevision, options);
    return leave(
      client,
      keys.map((own) => own.key),
      keys[0]!.revision,
      options,
    );
  }

  /**
   * Resends the release until it is answered, after growing pauses, while the session lives: a lost or closed
   * session's keys go with its lease, and its signal cuts the pause short, so no timer outlives it (nor keeps a
   * process alive: one that exits leaves the key to its lease). A caller's own `unlock()` shares the send in
   * flight.
   */
  #resendInBackground(releasing: Releasing): void {
    if (releasing.background) return;
    releasing.background = true;
    void (async () => {
      for (let failures = 0; this.#status === releasing; failures++) {
        await delay(resendPause(failures), this.session.signal, true);
        if (this.#status !== releasing) break;
        if (releasing.sending === undefined) {
          releasing.told = false;
          this.#send(releasing, {});
        }
        const failure = await releasing.sending!.then(
          () => undefined,
          (error: unknown) => error ?? new Error("release failed"),
        );
        if (failure !== undefined && unanswered(failure) && this.#status === releasing) continue;
        // Finished here: the next unlock() learns a success once, unless a caller's unlock() shared this send.
        // (Read again: the send above may have ended it.)
        const status = this.#status as Status;
        if (status.is === "released" && !releasing.told) status.untold = true;
        break;
      }
    })()
      .catch(() => {})
      .finally(() => {
        releasing.background = false;
      });
  }

  /**
   * @internal Its session's signal aborted: closed by its owner (the revocation deleted its keys: released),
   * or its lease lost (expired, revoked, past its deadline unrenewed).
   */
  handleEvent(): void {
    if (this.session.closed) {
      this.#end({ is: "released", why: "its session was closed", untold: false });
    } else {
      const reason = this.session.signal.reason as { code?: unknown };
      const why =
        reason.code === "PERMISSION_DENIED" ? "its session's lease could not be renewed" : "its session's lease ended";
      this.#lose({ why, cause: reason });
    }
  }

  #lose(loss: Loss): void {
    this.#end({ is: "lost", error: heldLost(this.#what, loss.why, loss.cause) });
  }

  /** The one transition out of `held` or `releasing`: told to `onEvent`, to `signal`, and to the session. */
  #end(next: Extract<Status, { is: "released" | "lost" }>): void {
    const was = this.#status.is;
    if (was === "released" || was === "lost") return;
    this.#status = next;
    if (next.is === "lost") publishLockLost(this.#subject, this.revision, this.#acquiredAt);
    const events = this.session.client.transport.events;
    if (events.on) {
      const { kind, name } = this.#subject;
      if (next.is === "lost") events.emit({ type: "lock.lost", kind, name, revision: this.revision });
      else {
        const heldMs = performance.now() - this.#acquiredAt;
        events.emit({ type: "lock.released", kind, name, revision: this.revision, heldMs });
      }
    }
    this.session.signal.removeEventListener("abort", this);
    if (this.#claim !== undefined) {
      this.session.lateJoins.done(this.#claim.keys);
      this.#claim.handOn();
    }
    this.#controller?.abort(this.#ended());
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
