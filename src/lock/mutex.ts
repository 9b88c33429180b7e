import type { ResponseHeader } from "../api/codec.js";
import { invalidArgument, locked, sessionExpired } from "../errors/catalogue.js";
import { type EtcdError, isEtcdError } from "../errors/etcd-error.js";
import { anySignal, CallSignal } from "../gateway/signals.js";
import type { CallOptions } from "../gateway/transport.js";
import type { LeaseSession } from "./lease-session.js";
import { Lock } from "./lock.js";
import { deleteOwnKey, enqueue, type WaitOptions, waitSettings } from "./queue.js";
import { waitFailure, waitInLine } from "./wait.js";

export interface LockOptions extends WaitOptions {
  /** Gives up waiting: the waiter deletes its key and the call throws ABORTED. */
  signal?: AbortSignal | undefined;
  /**
   * Longest wait in milliseconds; TIMEOUT after it (the key is deleted). `0` tries once and throws
   * LOCKED if another session holds the lock. Default: wait as long as the session lives.
   */
  timeout?: number | undefined;
}

/**
 * etcd's Go `concurrency.Mutex`: a key `<name>/<leaseIdHex>` bound to the session's lease, ordered by
 * create revision; the oldest key holds the lock. Interoperates with Go clients, `etcdctl lock` and the
 * server's v3lock on the same name. `new Mutex(session, name)` sends nothing.
 */
export class Mutex<S extends LeaseSession = LeaseSession> {
  readonly name: string;
  readonly session: S;
  /** All contenders' keys live under this prefix (`<name>/`). */
  readonly prefix: string;
  /** This session's key. */
  readonly key: string;

  constructor(session: S, name: string) {
    if (typeof name !== "string" || name.length === 0) throw invalidArgument("a lock name must be a non-empty string");
    this.session = session;
    this.name = name;
    this.prefix = `${name}/`;
    this.key = `${this.prefix}${session.leaseHex}`;
  }

  /**
   * Waits for the lock in revision order. The uncontended case is one request; a contended waiter wakes on
   * its predecessor's delete event and needs one more read. On abort, timeout or session loss the waiter's
   * key is deleted so it blocks nobody.
   */
  async lock(options: LockOptions = {}): Promise<Lock<S>> {
    const settings = waitSettings(options);
    const tryOnly = options.timeout === 0;
    const call = new CallSignal(anySignal(options.signal, this.session.signal), tryOnly ? undefined : options.timeout);
    /** Our key's create revision once known; `null` while the enqueue is in flight (it may have landed). */
    let joined: number | null | undefined;
    let releaseLocal: (() => void) | undefined;
    try {
      // etcd sees one key per session and name, so this session's own contenders queue here first.
      releaseLocal = tryOnly ? this.session.turns.tryTake(this.key) : await this.session.turns.take(this.key, call.signal);
      if (releaseLocal === undefined) throw locked(this.name, "another caller of this session");
      joined = null;
      const line = await enqueue(this.session.client, this.prefix, this.key, "", this.session.leaseId, call.signal).catch((error: unknown) => {
        // Refused outright (an unknown lease, say): no key was written, so there is no line to leave.
        if (isEtcdError(error) && !error.indeterminate) joined = undefined;
        throw error;
      });
      joined = line.revision;
      if (line.owner === undefined || line.owner.createRevision === line.revision) {
        return this.#acquired(line.revision, line.header, releaseLocal);
      }
      if (tryOnly) throw locked(this.name, line.owner.key);
      const header = await waitInLine(this.session.client, this.prefix, line, {
        ...settings,
        signal: call.signal,
        expired: () => this.#expired(),
      });
      return this.#acquired(line.revision, header, releaseLocal);
    } catch (thrown) {
      const error = waitFailure(this.session, call, thrown, (cause) => this.#expired(cause));
      if (joined !== undefined) await this.#leaveLine(joined);
      releaseLocal?.();
      throw error;
    } finally {
      call.dispose();
    }
  }

  /** The lock if it is free now, else undefined; leaves no key behind when it fails. */
  async tryLock(options: CallOptions = {}): Promise<Lock<S> | undefined> {
    try {
      return await this.lock({ ...options, timeout: 0 });
    } catch (error) {
      if (isEtcdError(error, "LOCKED")) return undefined;
      throw error;
    }
  }

  /** Never hands out a lock whose session can no longer be trusted (the deadline may pass mid-call). */
  #acquired(revision: number, header: ResponseHeader, releaseLocal: () => void): Lock<S> {
    if (!this.session.alive) throw this.#expired();
    return new Lock({ name: this.name, key: this.key, session: this.session, revision, header, releaseLocal });
  }

  #expired(cause?: unknown): EtcdError {
    return sessionExpired(this.session.leaseId, cause ?? this.session.signal.reason, `waiting for lock ${this.name}`);
  }

  /**
   * Best effort: a key we could not delete still goes with the lease. With the revision unknown (the
   * enqueue was cut off and may have landed) the key is deleted unguarded: this caller holds the session's
   * local turn for it, so no other contender of this session can be using it.
   */
  async #leaveLine(revision: number | null): Promise<void> {
    if (this.session.closed) return;
    await deleteOwnKey(this.session.client, this.key, revision ?? undefined).catch(() => {});
  }
}
