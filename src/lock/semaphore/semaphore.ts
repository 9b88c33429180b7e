import { noPermit } from "../../errors/catalogue.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { traceLock } from "../../events/channels.js";
import { wholeArg } from "../../gateway/config.js";
import type { CallOptions } from "../../gateway/transport.js";
import { Acquisition, type LockOptions } from "../acquire/acquisition.js";
import { nameArg, newKey } from "../line/keys.js";
import type { LeaseSession } from "../lease/lease-session.js";
import { PermitJoin, type PermitLine, waitForPermit } from "./admission.js";
import { Permit } from "./permit.js";

/** Options of `session.semaphore(name, options)`. */
export interface SemaphoreOptions {
  /** How many holders at most. Every contender on the name must use the same number. */
  permits: number;
}

/**
 * A counting semaphore: at most `permits` holders at once, served in the order they asked.
 *
 * The line is the mutex's: each acquisition puts a key of its own under `<name>/` bound to the session's lease
 * (`<name>/<leaseHex>-<16 hex>`, so one session may hold several permits), ordered by create revision. A
 * contender holds a permit when fewer than `permits` keys are older than its own. Once
 * admitted it stays admitted (keys only leave ahead of it and join behind it), so "my key still exists" is
 * the fencing compare (`ifHeld()`), and the key's create revision is a token distinct for every permit and
 * increasing in the order permits are granted (a younger key never has fewer keys ahead than an older one).
 *
 * Agreement on `permits`: each key's value is its contender's `permits`. The join reads the line whole and
 * leaves with LOCK_NAME_CONFLICT when a key in it is no permit bound to a lease (a mutex's key, data, a key a put
 * cut loose: it would take a permit for good), else with PERMITS_MISMATCH when one disagrees. The line is its
 * holders and waiters: a read of it grows with them, where a count alone could not tell a stranger.
 *
 * Requests per acquisition: at most 2, whatever the length of the line. Counted as the HTTP requests one
 * `acquire()` sends, on a connection that does not fail: the join (one transaction that also reads the keys
 * ahead), and, only if it must wait, one watch. The watch follows every delete under the prefix
 * with the deleted key's create revision (prevKv), so the waiter keeps the count of keys ahead of it by
 * itself and reads nothing more. Not counted: resends after a lost answer, a watch reopened after a broken
 * stream or renewed at the end of each stream's life (waitIdleTimeout), and a read when etcd could not give a
 * delete's prevKv (its history compacted).
 *
 * What that costs in events: a waiter receives every delete under the prefix while it waits (a release
 * wakes every waiter with one small event; none of them sends anything unless admitted). Watching only a
 * predecessor, as the mutex does, does not work here: a waiter must move up when ANY key ahead goes, and
 * following keys one by one costs a read and a watch per departure, growing with the line.
 *
 * The watch starts at the join's revision + 1, so no delete can fall between the join and the watch. etcd
 * serves such a watch at once when the store has not moved since the join, and otherwise after its next
 * sync pass (up to 100 ms): a waiter admitted in its first 100 ms of waiting may learn of it that much
 * later. The mutex avoids this tail with a watch without start revision and one more read when the store
 * moved; here that read would be a third request, which the bound above rules out.
 */
export class Semaphore<S extends LeaseSession = LeaseSession> {
  /** The semaphore's name. */
  readonly name: string;
  /** The session whose lease every permit of this object is bound to. */
  readonly session: S;
  /** All contenders' keys live under this prefix (`<name>/`). */
  readonly prefix: string;
  /** How many holders at most, as every contender on the name must agree. */
  readonly permits: number;

  /** `session.semaphore(name, { permits })` is the same. Sends nothing. */
  constructor(session: S, name: string, options: SemaphoreOptions) {
    nameArg(name, "a semaphore");
    this.session = session;
    this.name = name;
    this.prefix = `${name}/`;
    this.permits = permitsArg((options as Partial<SemaphoreOptions> | undefined)?.permits);
  }

  /**
   * Waits for a permit in the order contenders asked. Uncontended it is one request; a waiter sends one
   * more (a watch) and nothing else. On abort, timeout or session loss its key is deleted so it blocks
   * nobody. `timeout: 0` tries once and throws LOCKED when every permit is taken; PERMITS_MISMATCH when
   * the line uses another number of permits. With `lockDelay`, a permit freed by a holder that left uncleanly
   * (its lease ended, or it was revoked) is taken that much later, as a lock is.
   */
  acquire(options: LockOptions = {}): Promise<Permit<S>> {
    return traceLock("permit", this.name, options, () => this.#acquire(options));
  }

  async #acquire(options: LockOptions): Promise<Permit<S>> {
    const { session, name, prefix, permits } = this;
    const client = session.client;
    const line: PermitLine = { name, prefix, key: newKey(prefix, session.leaseId, "permit"), permits };
    const join = new PermitJoin(client, line, session.leaseId);
    const acquisition = new Acquisition(session, options, { kind: "permit", name }, [
      { key: line.key, value: join.value },
    ]);
    try {
      const joined = await acquisition.join(join);
      if (joined.ahead >= permits) {
        if (acquisition.tryOnly) throw noPermit(name, permits);
        acquisition.waiting(joined.ahead);
      }
      const header = await waitForPermit(client, line, joined.revision, joined, acquisition);
      return acquisition.hold(new Permit({ session, name, key: line.key, revision: joined.revision, header }));
    } catch (error) {
      throw await acquisition.fail(error);
    } finally {
      acquisition.dispose();
    }
  }

  /** A permit if one is free now, else undefined; leaves no key behind when it fails. */
  async tryAcquire(options: CallOptions = {}): Promise<Permit<S> | undefined> {
    try {
      return await this.acquire({ ...options, timeout: 0 });
    } catch (error) {
      if (isEtcdError(error, "LOCKED")) return undefined;
      throw error;
    }
  }
}

/** A semaphore's `permits`, checked before anything is sent. */
export function permitsArg(permits: unknown): number {
  return wholeArg(permits, "permits", 1);
}
