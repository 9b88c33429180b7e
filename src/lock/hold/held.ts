import type { LeaseId, ResponseHeader } from "../../api/codec.js";
import { type AnyOp, cmp, type Compare, type OpResults, op, type TxnResult } from "../../api/txn.js";
import { heldLost, heldReleased } from "../../errors/catalogue.js";
import { type EtcdError, unanswered } from "../../errors/etcd-error.js";
import { publishLockLost, traceRelease } from "../../events/channels.js";
import { resolveSignal, resolveTimeout } from "../../gateway/config.js";
import { requestScopedIo } from "../../gateway/isolate.js";
import { backgroundTimer, delay } from "../../gateway/signals.js";
import type { CallOptions } from "../../gateway/transport.js";
import { type LeaseSession, ReleaseSends, resendPause } from "../lease/lease-session.js";
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
 * - `held`: its keys are its own, and no release has been sent.
 * - `releasing`: a release was sent and has no outcome yet (its answer was lost): the caller gave it up, so it
 *   no longer holds, but its keys may still be there. `sends` decides what "already gone" means on a resend.
 * - `released`: its keys were deleted by its release, or with its lease by its session's `close()`.
 * - `lost`: its keys were gone, or no longer its own, before its release: the work under it was not protected
 *   to the end. `error` is what every later call is told.
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
  /** Why `signal` aborted before the outcome was known: a send went unanswered (see `#unsent`). */
  pending: EtcdError | undefined;
}

/**
 * Something held under a session's lease: a lock, a permit, a read or write lock, several locks at once,
 * leadership. They share one life (see `Status`): it ends when released or when the lease is lost (`signal`
 * aborts, `held` turns false), and it is released with guarded deletes resent until answered. It owns its
 * keys, which no other acquisition uses (see keys.ts), so nothing it does can touch another's.
 *
 * A release whose call failed without an answer goes on in the background while the session lives: Go's
 * `Mutex.Unlock` leaves the key to the caller then, and a caller that moves on leaves the lock blocked for
 * every contender until the lease ends.
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
  readonly #keys: readonly OwnKey[];
  /** Its release is guarded by its key's mod revision (a mutex's lock, whose key a ticket rewrites). */
  readonly #byVersion: boolean;
  /** A ticket of it was handed out: a later change of its key's lease is that ticket's takeover. */
  #ticketed = false;
  #status: Status = { is: "held" };
  /** When it was acquired, for `lock.released`'s `heldMs`. */
  #acquiredAt = 0;
  /** Made on first use of `signal`: most holdings are never asked for one, and aborting costs an Error. */
  #controller: AbortController | undefined;
  /** Ends following its keys (see `follow`); a timer until it starts. */
  #unfollow: (() => void) | undefined;
  readonly #onSessionEnd = () => this.#sessionEnded();
  /** A send of its join was never answered: it may land after the holding ends (see Orphans). */
  #lateJoin = false;

  /** @internal Sends nothing and subscribes to nothing: its acquisition starts it (`begin`). */
  constructor(init: HeldInit<S>, subject: Subject, keys: readonly OwnKey[], byVersion: boolean) {
    this.session = init.session;
    this.leaseId = init.session.leaseId;
    this.header = init.header;
    this.#subject = subject;
    this.#keys = keys;
    this.#byVersion = byVersion;
  }

  /**
   * @internal Its life starts: it follows its session, whose end ends it. Where the session renews its lease with
   * streams (`keepAlive: "auto"`), a holding that lasts FOLLOW_AFTER follows its keys on a watch, so an outside
   * delete, overwrite or revocation ends it within one event; a short one (a warm withLock) opens nothing.
   */
  begin(lateJoin = false): this {
    this.#lateJoin = lateJoin;
    this.#acquiredAt = performance.now();
    const session = this.session;
    if (session.signal.aborted) this.#sessionEnded();
    else session.signal.addEventListener("abort", this.#onSessionEnd);
    if (session.keepAlive === "auto" && this.#status.is === "held" && !requestScopedIo()) {
      const timer = backgroundTimer(() => {
        this.#unfollow = follow(session, this.#keys, this.#byVersion, () => this.#gone());
      }, FOLLOW_AFTER);
      this.#unfollow = () => clearTimeout(timer);
    }
    return this;
  }

  /** Aborts when it is lost or released; its reason is the error a later `unlock()` gives. */
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
   * True while it is held: not released (nor being released), not lost, and its session's lease trusted (within
   * its deadline). In a session with `keepAlive: "auto"`, a holding older than a second also learns within one
   * watch event that another client deleted or overwrote its key; elsewhere its release finds that out.
   */
  get held(): boolean {
    // Reading `alive` notices a deadline passed unrenewed: the session is then lost, and this with it.
    return this.session.alive && this.#status.is === "held";
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
   * finished in the background); `lost` is LOCK_LOST with its reason.
   */
  protected releaseHeld(options: CallOptions = {}): Promise<void> {
    return traceRelease(this.#subject, this.revision, this.#acquiredAt, () => this.#release(options));
  }

  async #release(options: CallOptions): Promise<void> {
    checkOptions(options);
    // A closed session ends its holdings once its revocation is known.
    const revocation = this.session.revocation;
    if (revocation !== undefined) await revocation.catch(() => {});
    const status = this.#status;
    switch (status.is) {
      case "lost":
        throw status.error;
      case "released":
        if (status.untold) {
          status.untold = false;
          return;
        }
        throw heldReleased(this.#what, status.why);
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
      pending: undefined,
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
      // Its session ended while this send was in flight and left the outcome to it: unanswered, decide now.
      if (this.#status === releasing && this.session.signal.aborted) this.#sessionEnded();
    };
    sending.then(clear, clear);
    return sending;
  }

  async #sendOnce(releasing: Releasing, options: CallOptions): Promise<void> {
    let deleted: boolean;
    try {
      deleted = await this.#delete({ ...options, onSent: releasing.sends.sent });
    } catch (error) {
      if (this.#status === releasing) this.#unsent(releasing, error);
      throw this.#ended() ?? error;
    }
    if (this.#status !== releasing) {
      // Ended meanwhile by its session's close: that is the outcome.
      const ended = this.#ended();
      if (this.#status.is === "lost") throw ended;
      return;
    }
    // Deleted while its own: protected to the end, whatever the local deadline says now.
    if (deleted || releasing.sends.goneMeansDone)
      return this.#end({ is: "released", why: "it was released", untold: false });
    const loss = await this.#explain(options);
    if (this.#status === releasing) this.#lose(loss);
    throw this.#ended();
  }

  /**
   * @internal The release behind `unlockWith()` / `releaseWith()`: one transaction that runs `ops` and deletes
   * the keys, only while the keys are still the holding's (its fencing compares), so "work, write, release" is
   * two round trips instead of three. If the compares fail, nothing is written and nothing deleted: LOCK_LOST
   * with the reason. Sent once (it writes): a lost answer rejects with the error marked `indeterminate`, and the
   * release goes on in the background as a plain guarded delete, which an earlier landing makes a success.
   */
  protected releaseHeldWith<Ops extends AnyOp[]>(ops: Ops, options: CallOptions = {}): Promise<OpResults<Ops>> {
    return traceRelease(this.#subject, this.revision, this.#acquiredAt, () => this.#releaseWith(ops, options));
  }

  async #releaseWith<Ops extends AnyOp[]>(ops: Ops, options: CallOptions): Promise<OpResults<Ops>> {
    checkOptions(options);
    const revocation = this.session.revocation;
    if (revocation !== undefined) await revocation.catch(() => {});
    const status = this.#status;
    if (status.is === "lost") throw status.error;
    if (status.is !== "held") throw this.#ended() ?? heldReleased(this.#what, "its release was already sent");
    const releasing = this.#releasing();
    const keys = this.#keys;
    let result: TxnResult<AnyOp[], []>;
    try {
      result = await this.session.client
        .txn()
        .if(...this.#guards())
        .then(...ops, ...keys.map((own) => op.delete(own.key)))
        .commit({ ...options, onSent: releasing.sends.sent });
    } catch (error) {
      if (this.#status === releasing) this.#unsent(releasing, error);
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
   * A send of the release failed. Unanswered: it no longer holds, its outcome is not known yet, and the release
   * goes on in the background. Refused (etcd answered, nothing was deleted) with no earlier send that may have
   * landed: it still holds.
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
    return this.#keys.map((own) =>
      this.#byVersion
        ? cmp.modRevision(own.key, "==", own.modRevision)
        : cmp.createRevision(own.key, "==", own.revision),
    );
  }

  /**
   * The guarded delete of its keys, one request; true if they were there to delete. A single key's release goes
   * with other releases started in the same turn (TxnBatcher).
   */
  async #delete(options: CallOptions): Promise<boolean> {
    const keys = this.#keys;
    const release = this.session.client
      .txn()
      .if(...this.#guards())
      .then(...keys.map((own) => op.delete(own.key)))
      .prepare();
    const call = { ...options, idempotent: true } as const;
    const result = keys.length === 1 ? await release.commitWithOthers(keys[0]!.key, call) : await release.commit(call);
    return result.succeeded;
  }

  /** Why its keys were gone or changed; "gone" when even that cannot be read. */
  #explain(options: CallOptions): Promise<Loss> {
    return explainLoss(this.session.client, this.leaseId, this.#keys, {
      ...options,
      ticketed: this.#ticketed,
      byVersion: this.#byVersion,
    }).catch((error: unknown) => ({ why: "its keys were gone when it was released", cause: error }));
  }

  /** Its keys went or changed while it held (seen by `follow`): why, and, if its lease ended, the session too. */
  async #gone(): Promise<void> {
    if (this.#status.is !== "held") return;
    const loss = await this.#explain({});
    if (this.#status.is !== "held") return;
    this.#lose(loss);
    if (loss.leaseGone) this.session.lostLease(heldLost(this.#what, loss.why));
  }

  /**
   * Resends the release until it is answered, after growing pauses, while the session lives: a lost or closed
   * session's keys go with its lease, and its signal cuts the pause short, so no timer outlives it.
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
   * Its session ended. Closed by its owner: released once the revocation is known (its keys went with the lease),
   * unless the lease had ended before. Lost (expired, revoked, past its deadline unrenewed): lost, unless a
   * release was sent before (the work was done by then) or is in flight (its answer decides).
   */
  #sessionEnded(): void {
    const status = this.#status;
    if (status.is === "released" || status.is === "lost") return;
    if (status.is === "releasing") {
      if (status.sending !== undefined) return;
      if (status.sends.sentWithinDeadline) return this.#end({ is: "released", why: "it was released", untold: true });
    }
    const session = this.session;
    const revocation = session.revocation;
    if (session.closed && revocation !== undefined) {
      this.#unfollow?.();
      void revocation.then(
        (revoked) =>
          revoked
            ? this.#end({ is: "released", why: "its session was closed", untold: false })
            : this.#lose({ why: "its session's lease had ended before the session was closed" }),
        () =>
          this.#end({
            is: "released",
            why: "its session was closed, but the revocation of its lease failed: its keys go when the lease expires",
            untold: false,
          }),
      );
      return;
    }
    const reason = session.signal.reason as { code?: unknown };
    const why =
      reason.code === "PERMISSION_DENIED" ? "its session's lease could not be renewed" : "its session's lease ended";
    this.#lose({ why, cause: reason });
  }

  #lose(loss: Loss): void {
    this.#end({ is: "lost", error: heldLost(this.#what, loss.why, loss.cause) });
  }

  /** The one transition out of `held` or `releasing`: told to `onEvent`, to `signal`, and to the session. */
  #end(next: Extract<Status, { is: "released" | "lost" }>): void {
    const was = this.#status.is;
    if (was === "released" || was === "lost") return;
    this.#status = next;
    this.#unfollow?.();
    this.#unfollow = undefined;
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
    this.session.signal.removeEventListener("abort", this.#onSessionEnd);
    if (this.#lateJoin) this.session.orphans.watch(this.#keys.map((own) => own.key));
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

/** A release's options, checked before anything changes: a refused call leaves it held. */
function checkOptions(options: CallOptions): void {
  resolveSignal(options.signal);
  resolveTimeout(options.timeout, "timeout");
  resolveTimeout(options.attemptTimeout, "attemptTimeout");
}

/** What a holding of one key is made of. */
export interface HeldKeyInit<S extends LeaseSession = LeaseSession> extends HeldInit<S> {
  name: string;
  key: string;
  revision: number;
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

  /**
   * @internal Its key is written once, by its join, unless `modRevision` says otherwise: then its release is
   * guarded by that version (a mutex's lock).
   */
  constructor(init: HeldKeyInit<S>, subject: Subject, modRevision?: number) {
    const own = { key: init.key, revision: init.revision, modRevision: modRevision ?? init.revision };
    super(init, subject, [own], modRevision !== undefined);
    this.name = init.name;
    this.key = init.key;
    this.revision = init.revision;
  }

  /** The compare "its key still has this create revision", for fenced transactions. */
  ifHeld(): Compare {
    return cmp.createRevision(this.key, "==", this.revision);
  }
}
