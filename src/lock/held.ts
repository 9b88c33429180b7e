import type { LeaseId, ResponseHeader } from "../api/codec.js";
import { cmp, type Compare } from "../api/txn.js";
import { heldLost, heldReleased } from "../errors/catalogue.js";
import type { EtcdError } from "../errors/etcd-error.js";
import { delay } from "../gateway/signals.js";
import type { CallOptions } from "../gateway/transport.js";
import type { LeaseSession } from "./lease-session.js";
import { deleteOwnKey } from "./queue.js";
import { unanswered } from "../errors/etcd-error.js";
import { ReleaseSends, resendPause } from "./sends.js";
import { type Subject, subjectText } from "./subject.js";

/** What every holding is made of. */
export interface HeldState<S extends LeaseSession = LeaseSession> {
  session: S;
  /** The header of the response that showed it acquired. */
  header: ResponseHeader;
  /** Hands this session's local turn(s) on to the next caller. */
  releaseLocal?: (() => void) | undefined;
}

/**
 * Something held under a session's lease: a lock, a permit, a read or write lock, several locks at once.
 * They share one life: it ends when released or when the lease is lost (`signal` aborts, `held` turns
 * false), and it is released with guarded deletes resent until answered, where "already gone" after an
 * earlier send within the lease's deadline is success (see ReleaseSends).
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
  /** When it was acquired, for `onEvent` only. */
  readonly #acquiredAt: number;
  readonly #releaseLocal: () => void;
  /** Created on first use of `signal`: most holdings are never asked for one, and aborting costs an Error. */
  #controller: AbortController | undefined;
  #stopWatchingSession: (() => void) | undefined;
  #ended: (() => EtcdError) | undefined;
  /** The release's outcome is known (released, or found lost). */
  #released = false;
  #releasing: Promise<void> | undefined;
  /** The release's sends, from its first one on. */
  #releaseSends: ReleaseSends | undefined;
  /** The release goes on in the background after a caller's call failed. */
  #resending = false;
  /** The outcome of a release finished in the background, for the next caller of `unlock()` to learn. */
  #untold: { failure: unknown } | undefined;
  /** A caller's call shares the send in flight, so it learns its outcome. */
  #told = true;

  /** @internal Subscribes to nothing until `signal` is read. */
  constructor(state: HeldState<S>, subject: Subject) {
    this.session = state.session;
    this.leaseId = state.session.leaseId;
    this.header = state.header;
    this.#subject = subject;
    this.#acquiredAt = state.session.client.transport.events.on ? performance.now() : 0;
    this.#releaseLocal = state.releaseLocal ?? (() => {});
  }

  /** Aborts when it is lost (its session's lease ended) or released. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#ended) this.#controller.abort(this.#ended());
      else this.#watchSession();
    }
    return this.#controller.signal;
  }

  /** False once released, or once the session's lease can no longer be trusted. */
  get held(): boolean {
    return this.#ended === undefined && this.session.alive;
  }

  /** Renews the session's lease (one request). SESSION_EXPIRED if it is gone. */
  renew(options?: CallOptions): Promise<number> {
    return this.session.renew(options);
  }

  /** For `await using`: releases it unless that already happened. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#released) await this.releaseHeld();
  }

  /** @internal The guarded delete(s) of its key(s), one request; true if they were there to delete. */
  protected abstract deleteKeys(options: CallOptions): Promise<boolean>;

  /** @internal Its key(s), in use by its session until it ends. */
  protected abstract ownKeys(): readonly string[];

  /**
   * @internal The release behind `unlock()` / `release()`: LOCK_RELEASED if released already; LOCK_LOST if
   * the keys had gone before (the lease expired under the work). After a failure without an answer (TIMEOUT,
   * UNAVAILABLE) the release goes on in the background; calling it again sends again at once, or tells the
   * outcome if the background finished it.
   */
  protected releaseHeld(options: CallOptions = {}): Promise<void> {
    if (this.#released) {
      const untold = this.#untold;
      this.#untold = undefined;
      if (untold === undefined) return Promise.reject(heldReleased(this.#what, "it was already released"));
      return untold.failure === undefined ? Promise.resolve() : Promise.reject(untold.failure);
    }
    if (this.session.closed) {
      this.#released = true;
      this.#end(() => heldReleased(this.#what, "its session was closed"));
      return Promise.reject(heldReleased(this.#what, "its session was closed"));
    }
    this.#releasing ??= this.#release(options).finally(() => (this.#releasing = undefined));
    this.#told = true;
    return this.#releasing;
  }

  /** Ends it when its session is lost; removed on release, so a long-lived session collects no listeners. */
  #watchSession(): void {
    const session = this.session.signal;
    const onLost = () =>
      this.#end(
        () =>
          this.session.closed
            ? heldReleased(this.#what, "its session was closed")
            : heldLost(this.#what, undefined, session.reason),
        !this.session.closed,
      );
    if (session.aborted) return onLost();
    session.addEventListener("abort", onLost, { once: true });
    this.#stopWatchingSession = () => session.removeEventListener("abort", onLost);
  }

  async #release(options: CallOptions): Promise<void> {
    let deleted: boolean;
    try {
      deleted = await this.deleteKeys({
        ...options,
        onSent: (this.#releaseSends ??= new ReleaseSends(this.session)).sent,
      });
    } catch (error) {
      if (unanswered(error)) this.#resendInBackground();
      throw error;
    }
    if (this.#released) return;
    this.#released = true;
    const lost = !deleted && !this.#releaseSends?.goneMeansDone;
    this.#emit(lost ? "lock.lost" : "lock.released");
    this.#end(() => heldReleased(this.#what, "it was released"));
    if (lost) throw heldLost(this.#what);
  }

  /**
   * Resends the release until it is answered, after growing pauses, while the session lives: a lost or closed
   * session's keys go with its lease, and its signal cuts the pause short, so no timer outlives it (nor keeps a
   * process alive: one that exits leaves the key to its lease). A caller's own `unlock()` shares the send in flight.
   */
  #resendInBackground(): void {
    if (this.#resending) return;
    this.#resending = true;
    void (async () => {
      for (let failures = 0; !this.#released && !this.session.closed && this.session.alive; failures++) {
        await delay(resendPause(failures), this.session.signal, true);
        if (this.#released) break;
        if (this.#releasing === undefined) {
          this.#told = false;
          this.#releasing = this.#release({}).finally(() => (this.#releasing = undefined));
        }
        const failure = await this.#releasing.then(
          () => undefined,
          (error: unknown) => error ?? new Error("release failed"),
        );
        if (failure !== undefined && unanswered(failure)) continue;
        // Finished here (released, found lost, or refused for good): the next unlock() learns how, unless a
        // caller's unlock() shared this send and learned it already.
        if (!this.#told) this.#untold = { failure };
        break;
      }
    })()
      .catch(() => {})
      .finally(() => (this.#resending = false));
  }

  /** How errors name it ("lock x", "permit of semaphore y"): only an error needs it. */
  get #what(): string {
    return subjectText(this.#subject);
  }

  /**
   * @internal With an `onEvent` handler set, follows the session from the moment of acquisition so that
   * its loss is told at once (otherwise nothing is subscribed until `signal` is read).
   */
  observe(): void {
    if (this.#controller === undefined) void this.signal;
  }

  #emit(type: "lock.released" | "lock.lost"): void {
    const events = this.session.client.transport.events;
    if (!events.on) return;
    const { kind, name } = this.#subject;
    if (type === "lock.lost") events.emit({ type, kind, name, revision: this.revision });
    else events.emit({ type, kind, name, revision: this.revision, heldMs: performance.now() - this.#acquiredAt });
  }

  /** Ends it once; `lost` when its session's lease ended under it (told to `onEvent`). */
  #end(reason: () => EtcdError, lost = false): void {
    if (this.#ended) return;
    if (lost) this.#emit("lock.lost");
    this.#ended = reason;
    this.session.keys.done(this.ownKeys());
    this.#stopWatchingSession?.();
    this.#controller?.abort(reason());
    this.#releaseLocal();
  }
}

/** What a holding of one key is made of. */
export interface HeldKeyState<S extends LeaseSession = LeaseSession> extends HeldState<S> {
  name: string;
  key: string;
  revision: number;
}

/**
 * A holding of one key: a lock, a permit, a read or write lock. `revision` (the key's create revision) is
 * its fencing token: it strictly increases across successive holders, so storage guarded by `ifHeld()`
 * refuses a stale holder's write.
 */
export abstract class HeldKey<S extends LeaseSession = LeaseSession> extends Held<S> {
  /** The name it was taken on. */
  readonly name: string;
  /** Its key in etcd. */
  readonly key: string;
  /** The fencing token: the create revision of its key. */
  readonly revision: number;

  /** @internal */
  constructor(state: HeldKeyState<S>, subject: Subject) {
    super(state, subject);
    this.name = state.name;
    this.key = state.key;
    this.revision = state.revision;
  }

  /** The compare "its key still has this create revision", for fenced transactions. */
  ifHeld(): Compare {
    return cmp.createRevision(this.key, "==", this.revision);
  }

  /** @internal */
  protected deleteKeys(options: CallOptions): Promise<boolean> {
    return deleteOwnKey(this.session.client, this.key, this.revision, options);
  }

  /** @internal */
  protected ownKeys(): readonly string[] {
    return [this.key];
  }
}
