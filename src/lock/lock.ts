import type { ResponseHeader, LeaseId } from "../codec.js";
import { EtcdError } from "../errors.js";
import type { CallOptions } from "../gateway/transport.js";
import { cmp, type Compare } from "../txn.js";
import type { Mutex } from "./mutex.js";
import { deleteOwnKey } from "./queue.js";
import type { Session } from "./session.js";

/** What another process or invocation needs to take over a held lock: small and JSON-serialisable. */
export interface LockTicket {
  name: string;
  key: string;
  leaseId: LeaseId;
  revision: number;
}

/**
 * A held lock. `revision` (the key's create revision) is the fencing token: it strictly increases across
 * successive holders, so storage guarded by `ifHeld()` refuses a stale holder's write.
 */
export class Lock {
  readonly name: string;
  /** The lock key, `<name>/<leaseIdHex>`. */
  readonly key: string;
  readonly leaseId: LeaseId;
  /** The fencing token: the create revision of the lock key. */
  readonly revision: number;
  /** The header of the response that showed the lock acquired. */
  readonly header: ResponseHeader;
  readonly session: Session;
  readonly #releaseLocal: () => void;
  /** Created on first use of `signal`: most locks are never asked for one, and aborting costs an Error. */
  #controller: AbortController | undefined;
  #ended: (() => EtcdError) | undefined;
  #unlocked = false;

  /** @internal */
  constructor(mutex: Mutex, revision: number, header: ResponseHeader, releaseLocal: () => void = () => {}) {
    this.name = mutex.name;
    this.key = mutex.key;
    this.session = mutex.session;
    this.leaseId = mutex.session.leaseId;
    this.revision = revision;
    this.header = header;
    this.#releaseLocal = releaseLocal;
    const session = this.session.signal;
    const onLost = () =>
      this.#end(() => (this.session.closed ? released(this.name, "its session was closed") : lockLost(this.name, session.reason)));
    if (session.aborted) onLost();
    // Removed on release, so a long-lived session does not collect one listener per lock.
    else session.addEventListener("abort", onLost, { once: true });
    this.#stopWatchingSession = () => session.removeEventListener("abort", onLost);
  }

  readonly #stopWatchingSession: () => void;

  /** Aborts when the lock is lost (its session's lease ended) or released. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#ended) this.#controller.abort(this.#ended());
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
   * Releases the lock with one request. LOCK_RELEASED if it was released already; LOCK_LOST if the key had
   * already gone (the lease expired): the work done under it was not protected.
   */
  async unlock(options: CallOptions = {}): Promise<void> {
    if (this.#unlocked) throw released(this.name, "it was already released");
    this.#unlocked = true;
    if (this.session.closed) throw released(this.name, "its session was closed");
    try {
      const deleted = await deleteOwnKey(this.session.etcd, this.key, this.revision, options);
      if (!deleted) throw lockLost(this.name, undefined);
    } finally {
      this.#end(() => released(this.name, "it was released"));
    }
  }

  /** For `await using`: releases the lock unless that already happened. */
  async [Symbol.asyncDispose](): Promise<void> {
    if (!this.#unlocked) await this.unlock();
  }

  toJSON(): LockTicket {
    return { name: this.name, key: this.key, leaseId: this.leaseId, revision: this.revision };
  }

  #end(reason: () => EtcdError): void {
    if (this.#ended) return;
    this.#ended = reason;
    this.#stopWatchingSession();
    this.#controller?.abort(reason());
    this.#releaseLocal();
  }
}

function released(name: string, why: string): EtcdError {
  return new EtcdError("LOCK_RELEASED", `lock ${name} is not held: ${why}`);
}

function lockLost(name: string, cause: unknown): EtcdError {
  return new EtcdError("LOCK_LOST", `lock ${name} was lost: its session's lease ended`, cause === undefined ? {} : { cause });
}
