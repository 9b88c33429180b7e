import { locked, lockTakenOver, withoutSecrets } from "../../errors/catalogue.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { traceLock } from "../../events/channels.js";
import { resolveTimeout } from "../../gateway/config.js";
import { CallSignal } from "../../gateway/signals.js";
import type { CallOptions } from "../../gateway/transport.js";
import { Acquisition } from "../acquire/acquisition.js";
import type { Subject } from "../hold/subject.js";
import { isFirst, Join, JoinHistory } from "../line/join.js";
import { nameArg, randomHex } from "../line/keys.js";
import { onlyContenders } from "../line/read.js";
import { waitInLine } from "../line/wait.js";
import type { LockOptions } from "../line/wait-options.js";
import type { LeaseSession } from "../session/lease-session.js";
import { Lock } from "./lock.js";

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
  /** What the last joins found, to guess whether the line is empty (see `JoinHistory`). */
  readonly #history = new JoinHistory();
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
   * its predecessor's delete event. On abort, timeout or session loss the waiter's key is deleted so it blocks
   * nobody (once its join has settled, so that a join still on the wire cannot land behind the cleanup).
   */
  lock(options: LockOptions = {}): Promise<Lock<S>> {
    return traceLock("lock", this.name, () => this.#lock(options));
  }

  async #lock(options: LockOptions): Promise<Lock<S>> {
    const { session, name, prefix } = this;
    const acquisition = new Acquisition(session, options, this.#subject, this.#keys);
    // Our key's value: a secret only the holder reads back, the proof a ticket (`lock.ticket()`) carries (Go's
    // Mutex and etcdctl ignore it). Fresh for each acquisition, never drawn ahead: a value drawn before a
    // snapshot (Lambda SnapStart) would be shared by every sandbox restored from it.
    const join = new Join(session.client, prefix, this.key, randomHex(16), session.leaseId, this.#history);
    try {
      await acquisition.claim(true);
      const line = await acquisition.join(join);
      onlyContenders(prefix, line.seen);
      // Our key, moved to another lease: a ticket of ours was resumed, and its holder has the lock now.
      if (line.own !== undefined && line.own.lease !== session.leaseId) {
        throw lockTakenOver(name, this.key, line.own.lease);
      }
      let header = line.header;
      if (!isFirst(line)) {
        if (acquisition.tryOnly) throw locked(name, line.owner!.key);
        acquisition.waiting(line.ahead);
        header = await waitInLine(session.client, prefix, line, acquisition);
      }
      // A key this session already had (a resent join, an earlier acquisition's) keeps its value and version.
      const modRevision = line.own?.modRevision ?? line.revision;
      const secret = line.created ? join.value : (line.own?.value ?? "");
      const lock = new Lock({ name, key: this.key, session, revision: line.revision, header, modRevision, secret });
      return acquisition.hold(lock);
    } catch (error) {
      // A proxy that echoes the join in its error answer must not hand the secret to whoever logs the error.
      throw withoutSecrets(await acquisition.fail(error), [join.value]);
    } finally {
      acquisition.dispose();
    }
  }

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
