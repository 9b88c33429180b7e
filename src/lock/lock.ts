import type { LeaseId, ResponseHeader } from "../api/codec.js";
import { cmp, type Compare } from "../api/txn.js";
import { lockLost, lockReleased } from "../errors/catalogue.js";
import type { EtcdError } from "../errors/etcd-error.js";
import type { CallOptions } from "../gateway/transport.js";
import type { LeaseSession } from "./lease-session.js";
import { deleteOwnKey } from "./queue.js";
import { ReleaseSends } from "./sends.js";

/** What another process or invocation needs to take over a held lock: small and JSON-serialisable. */
export interface LockTicket {
  name: string;
  key: string;
  leaseId: LeaseId;
  revision: number;
}

/** What a held lock is made of. */
export interface LockState<S extends LeaseSession = LeaseSession> {
  name: string;
  key: string;
  session: S;
  revision: number;
  header: ResponseHeader;
  /** Hands this session's local turn for the key on to its next caller. */
  releaseLocal?: (() => void) | undefined;
}

/**
 * A held lock. `revision` (the key's create revision) is the fencing token: it strictly increases across
 * successive holders, so storage guarded by `ifHeld()` refuses a stale holder's write.
 */
export class Lock<S extends LeaseSession = LeaseSession> {
  readonly name: string;
  /** The lock key, `<name>/<leaseIdHex>`. */
  readonly key: string;
  readonly leaseId: LeaseId;
  /** The fencing token: the create revision of the lock key. */
  readonly revision: number;
  /** The header of the response that showed the lock acquired. */
  readonly header: ResponseHeader;
  /** The session whose lease the lock is bound to. */
  readonly session: S;
  readonly #releaseLocal: () => void;
  /** Created on first use of `signal`: most locks are never asked for one, and aborting costs an Error. */
  #controller: AbortController | undefined;
  #stopWatchingSession: (() => void) | undefined;
  #ended: (() => EtcdError) | undefined;
  /** The release's outcome is known (released, or found lost). */
  #released = false;
  #releasing: Promise<void> | undefined;
  readonly #releaseSends: ReleaseSends;

  /** Made by `mutex.lock()` and `etcd.resumeLock()`; subscribes to nothing until `signal` is read. */
  constructor(state: LockState<S>) {
    this.name = state.name;
    this.key = state.key;
    this.session = state.session;
    this.leaseId = state.session.leaseId;
    this.revision = state.revision;
    this.header = state.header;
    this.#releaseLocal = state.releaseLocal ?? (() => {});
    this.#releaseSends = new ReleaseSends(() => state.session.beforeDeadline());
  }

  /** Aborts when the lock is lost (its session's lease ended) or released. */
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

  /** The compare "this lock's key still has this create revision", for fenced transactions. */
  ifHeld(): Compare {
    return cmp.createRevision(this.key, "==", this.revision);
  }

  /** Renews the session's lease (one request). SESSION_EXPIRED if it is gone. */
  renew(options?: CallOptions): Promise<number> {
    return this.session.renew(options);
  }

  /**
   * Releases the lock with one request (resent after a lost answer). LOCK_RELEASED if it was released
   * already; LOCK_LOST if the key had gone before the release (the lease expired under the work, which was
   * then not protected to its end). If the call fails (TIMEOUT, UNAVAILABLE), the lock may still be held:
   * call `unlock()` again; it removes the key.
   */
  unlock(options: CallOptions = {}): Promise<void> {
    if (this.#released) return Promise.reject(lockReleased(this.name, "it was already released"));
    if (this.session.closed) {
      this.#released = true;
      this.#end(() => lockReleased(this.name, "its session was closed"));
      return Promise.reject(lockReleased(this.name, "its session was closed"));
    }
    this.#releasing ??= this.#release(options).finally(() => (this.#releasing = undefined));
    return this.#releasing;
  }

  /** For `await using`: releases the lock unless that already happened. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#released) await this.unlock();
  }

  /** The ticket `etcd.resumeLock()` takes to continue this lock elsewhere. */
  toJSON(): LockTicket {
    return { name: this.name, key: this.key, leaseId: this.leaseId, revision: this.revision };
  }

  /** Ends the lock when its session is lost; removed on release, so a long-lived session collects no listeners. */
  #watchSession(): void {
    const session = this.session.signal;
    const onLost = () =>
      this.#end(() => (this.session.closed ? lockReleased(this.name, "its session was closed") : lockLost(this.name, undefined, session.reason)));
    if (session.aborted) return onLost();
    session.addEventListener("abort", onLost, { once: true });
    this.#stopWatchingSession = () => session.removeEventListener("abort", onLost);
  }

  /**
   * One guarded delete, resent until answered. "Already gone" after an earlier send is success; see
   * ReleaseSends for why. On a failure nothing changes, so the caller may try again.
   */
  async #release(options: CallOptions): Promise<void> {
    const deleted = await deleteOwnKey(this.session.client, this.key, this.revision, { ...options, onSent: this.#releaseSends.sent });
    this.#released = true;
    this.#end(() => lockReleased(this.name, "it was released"));
    if (!deleted && !this.#releaseSends.goneMeansDone) throw lockLost(this.name);
  }

  #end(reason: () => EtcdError): void {
    if (this.#ended) return;
    this.#ended = reason;
    this.#stopWatchingSession?.();
    this.#controller?.abort(reason());
    this.#releaseLocal();
  }
}
