import { internal, locked, withoutSecrets } from "../../errors/catalogue.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { traceLock } from "../../events/channels.js";
import { resolveTimeout } from "../../gateway/config.js";
import { CallSignal } from "../../gateway/signals.js";
import type { CallOptions } from "../../gateway/transport.js";
import { Acquisition, type LockOptions } from "../acquire/acquisition.js";
import type { Subject } from "../hold/subject.js";
import type { LeaseSession } from "../lease/lease-session.js";
import { randomHex } from "../../api/random.js";
import { Join, JoinHistory } from "../line/join.js";
import { KeyTaken, nameArg, newKey } from "../line/keys.js";
import { lineReader } from "../line/read.js";
import { waitInLine } from "../line/wait.js";
import { Lock } from "./lock.js";

/** Keys a mutex keeps for reuse: as many as its session's callers of the name usually hold at once. */
const FREE_KEYS = 4;
/** New keys drawn for one acquisition after its key was another's: a fresh draw repeats only if the CSPRNG does. */
const MAX_TAKEN = 3;

/**
 * etcd's Go `concurrency.Mutex`: each acquisition puts a key of its own under `<name>/`, bound to the session's
 * lease and ordered by create revision; the oldest key holds the lock. Interoperates with Go clients, `etcdctl
 * lock` and the server's v3lock on the same name (keys.ts). `new Mutex(session, name)` sends nothing.
 */
export class Mutex<S extends LeaseSession = LeaseSession> {
  /** The lock's name. */
  readonly name: string;
  /** The session whose lease this mutex's keys are bound to. */
  readonly session: S;
  /** All contenders' keys live under this prefix (`<name>/`). */
  readonly prefix: string;
  /** What its joins found of its line, and its join's requests (see `JoinHistory`). */
  readonly #history = new JoinHistory();
  readonly #subject: Subject;
  /** Keys its releases deleted, confirmed, with nothing of them in flight: for its next acquisitions (keys.ts). */
  readonly #free: string[] = [];
  readonly #reuse = (keys: readonly string[]): void => {
    if (this.#free.length < FREE_KEYS) this.#free.push(keys[0]!);
  };

  constructor(session: S, name: string) {
    nameArg(name, "a lock");
    this.session = session;
    this.name = name;
    this.prefix = `${name}/`;
    this.#subject = { kind: "lock", name };
  }

  /**
   * Waits for the lock in revision order, with a key of its own. The uncontended case is one request; a
   * contended waiter wakes on its predecessor's delete event. On abort, timeout or session loss the waiter's
   * key is deleted so it blocks nobody (once its join has settled: a join still on the wire could land behind
   * the cleanup). Two calls, of one session or not, are two contenders.
   */
  lock(options: LockOptions = {}): Promise<Lock<S>> {
    return traceLock("lock", this.name, options, () => this.#lock(options));
  }

  async #lock(options: LockOptions, taken = 0): Promise<Lock<S>> {
    const { session, name, prefix } = this;
    // Our key's value: a secret only the holder reads back, a ticket's proof (Go ignores it). Drawn fresh for each
    // acquisition, with the key's random part when the key is new: never before a snapshot (see `randomBytes`).
    const reused = taken === 0 ? this.#free.pop() : undefined;
    const drawn = randomHex(reused === undefined ? 24 : 16);
    const key = reused ?? newKey(prefix, session.leaseId, "mutex", "", drawn.slice(32));
    const secret = drawn.slice(0, 32);
    const acquisition = new Acquisition(session, options, this.#subject, [{ key, value: secret }]);
    const join = new Join(session.client, { prefix, key, kind: "mutex" }, secret, session.leaseId, this.#history);
    try {
      const joined = await acquisition.join(join);
      const read = lineReader(session.client, prefix, joined.revision, "mutex");
      const own = { key, createRevision: joined.revision };
      const header = await waitInLine(session.client, acquisition, joined, read, (on) => locked(name, on), own);
      // Written once, by its join: its version is its creation.
      const { revision } = joined;
      const lock = new Lock({ name, key, session, revision, header, modRevision: revision, secret });
      return acquisition.hold(lock, this.#reuse);
    } catch (error) {
      const failure = await acquisition.fail(error);
      // Another acquisition's key (see keys.ts): a new one. Taken again and again, the CSPRNG repeats itself.
      if (failure instanceof KeyTaken) {
        if (taken === MAX_TAKEN)
          throw internal(`key ${key} was another acquisition's, as were ${taken} drawn before it`);
        return this.#lock(options, taken + 1);
      }
      // A proxy that echoes the join in its error answer must not hand the secret to whoever logs the error.
      throw withoutSecrets(failure, [secret]);
    } finally {
      acquisition.dispose();
    }
  }

  /** The lock if it is free now, else undefined; leaves no key behind when it fails. */
  async tryLock(options: CallOptions = {}): Promise<Lock<S> | undefined> {
    // `timeout: 0` means "do not wait" to lock(); the caller's timeout bounds the one request instead.
    const timeout = resolveTimeout(options.timeout, "timeout");
    const limit = new CallSignal(options.signal, timeout, `tryLock of lock ${this.name}`);
    try {
      return await this.lock({ signal: limit.signal, timeout: 0 });
    } catch (error) {
      if (isEtcdError(error, "LOCKED")) return undefined;
      throw limit.timedOut ? limit.error() : error;
    } finally {
      limit.dispose();
    }
  }
}
