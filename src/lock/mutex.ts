import { locked } from "../errors/catalogue.js";
import { isEtcdError } from "../errors/etcd-error.js";
import { resolveTimeout } from "../gateway/config.js";
import { CallSignal } from "../gateway/signals.js";
import type { CallOptions } from "../gateway/transport.js";
import { type Attempt, attempt } from "./attempt.js";
import type { LeaseSession } from "./lease-session.js";
import { Lock } from "./lock.js";
import { Join } from "./join.js";
import { deleteOwnKey, type GuardedDelete, guardedDelete, type LockOptions, onlyContenders } from "./queue.js";
import { randomHex } from "./unique-key.js";
import { waitInLine } from "./wait.js";
import { nameArg } from "./names.js";
import type { Subject } from "./subject.js";

/**
 * etcd's Go `concurrency.Mutex`: a key `<name>/<leaseIdHex>` bound to the session's lease, ordered by
 * create revision; the oldest key holds the lock. Interoperates with Go clients, `etcdctl lock` and the
 * server's v3lock on the same name. `new Mutex(session, name)` sends nothing.
 */
export class Mutex<S extends LeaseSession = LeaseSession> {
  /** The lock's name. */
  readonly name: string;
  /** The session whose lease this mutex's key is bound to. */
  readonly session: S;
  /** All contenders' keys live under this prefix (`<name>/`). */
  readonly prefix: string;
  /** This session's key. */
  readonly key: string;
  /**
   * The key's value: a secret only this mutex's holders read back, the proof a ticket (`lock.toJSON()`)
   * carries. Go's Mutex and etcdctl ignore the value. One per mutex: a ticket also names the key's create
   * revision, which every acquisition renews, so an old ticket stays stale.
   */
  readonly #secret = randomHex(16);
  /**
   * The join, the same for every acquisition: built once. It keeps what the last joins found, to guess
   * whether the line is empty (see `Join`).
   */
  #join: Join | undefined;
  /** The release, the same for every acquisition but for its guard's revision: built once. */
  #release: GuardedDelete | undefined;
  /** What errors and events call this lock. */
  readonly #subject: Subject;
  /** The one key an acquisition joins with. */
  readonly #keys: readonly string[];

  constructor(session: S, name: string) {
    nameArg(name, "a lock");
    this.session = session;
    this.name = name;
    this.prefix = `${name}/`;
    this.key = `${this.prefix}${session.leaseHex}`;
    this.#subject = { kind: "lock", name };
    this.#keys = [this.key];
  }

  /**
   * Waits for the lock in revision order. The uncontended case is one request; a contended waiter wakes on
   * its predecessor's delete event and needs one more read. On abort, timeout or session loss the waiter's
   * key is deleted so it blocks nobody (after its join has settled: see `attempt`).
   */
  lock(options: LockOptions = {}): Promise<Lock<S>> {
    return attempt(this.session, options, this.#subject, this.#keys, this.#leave, this.#steps);
  }

  /**
   * Deletes our key after a failed acquisition. With the revision unknown (the join's answer was lost) the
   * key is deleted unguarded: this caller still holds the session's local turn for it, so no other contender
   * of this session can be using it.
   */
  readonly #leave = (revision: number | undefined) => deleteOwnKey(this.session.client, this.key, revision);

  /** An acquisition's steps, the same for every call: built once. */
  readonly #steps = async (frame: Attempt): Promise<Lock<S>> => {
    const { session, name, key, prefix } = this;
    // etcd sees one key per session and name, so this session's own contenders queue here first.
    const turn =
      session.turns.tryTake(key) ?? (frame.tryOnly ? undefined : await session.turns.take(key, frame.signal));
    if (turn === undefined) throw locked(name, "another caller of this session");
    frame.local = turn;
    const secret = this.#secret;
    const join = (this.#join ??= new Join(session.client, prefix, key, secret, session.leaseId, true));
    const line = await frame.join((call) => join.send(call), secret);
    onlyContenders(prefix, line.seen);
    let header = line.header;
    if (line.owner !== undefined && line.owner.createRevision !== line.revision) {
      if (frame.tryOnly) throw locked(name, line.owner.key);
      frame.waiting(line.ahead);
      header = await waitInLine(session.client, prefix, line, frame.context);
    }
    // A key this session already had (a resent join) keeps its value and version.
    const own = {
      modRevision: line.own?.modRevision ?? line.revision,
      secret: line.created ? secret : (line.own?.value ?? ""),
    };
    const release = (this.#release ??= guardedDelete(session.client, key));
    return new Lock({ name, key, session, revision: line.revision, header, releaseLocal: turn, release, ...own });
  };

  /** The lock if it is free now, else undefined; leaves no key behind when it fails. */
  async tryLock(options: CallOptions = {}): Promise<Lock<S> | undefined> {
    // `timeout: 0` means "do not wait" to lock(); the caller's timeout bounds the one request instead.
    const timeout = resolveTimeout(options.timeout, "timeout");
    const limit = timeout === undefined ? undefined : new CallSignal(options.signal, timeout);
    try {
      return await this.lock({ signal: limit?.signal ?? options.signal, timeout: 0 });
    } catch (error) {
      if (isEtcdError(error, "LOCKED")) return undefined;
      throw limit?.timedOut ? limit.error() : error;
    } finally {
      limit?.dispose();
    }
  }
}
