import { locked } from "../../errors/catalogue.js";
import { traceLock } from "../../events/channels.js";
import { Acquisition, type LockOptions } from "../acquire/acquisition.js";
import type { Held, HeldKeyInit } from "../hold/held.js";
import type { LeaseSession } from "../lease/lease-session.js";
import { Join } from "../line/join.js";
import { nameArg, newKey } from "../line/keys.js";
import { lineReader } from "../line/read.js";
import type { JoinCall, Joined, LineReader } from "../line/standing.js";
import { waitInLine } from "../line/wait.js";
import { ReadLock } from "./read-lock.js";
import { ReaderJoin, readerLine, type RWLine } from "./rw-line.js";
import { WriteLock } from "./write-lock.js";

/**
 * A read-write lock: readers share it, a writer excludes everyone. One line, in create-revision order, for
 * both: a reader waits only for the newest writer older than itself (once that one is gone, so are all
 * writers before it, which it waited for in turn), a writer waits for the newest key of either kind older
 * than itself. So it is FIFO: a reader that comes after a waiting writer waits for it, and a stream of
 * readers never starves a writer. Waits are herd-free: a release wakes only the readers queued right behind
 * a writer, or the one waiter right behind a key. Keys are `<name>/read/<leaseHex>-<16 hex>` and
 * `<name>/write/<leaseHex>-<16 hex>`, one per acquisition, so readers of one session share too. Any other key
 * under `<name>/` met in the line is LOCK_NAME_CONFLICT.
 *
 * Where this differs from etcd's Go recipe (client/v3/experimental/recipes/rwmutex.go), and why:
 * - A waiter whose lease ended gets SESSION_EXPIRED: every read checks that its own key still exists. The Go
 *   recipe only looks for keys ahead of it, so a waiter whose key expired finds none and takes the lock
 *   beside the real holder (etcd-io/etcd#16221).
 * - Order is by create revision, as in the mutex. The Go recipe orders by mod revision (`WithLastRev`,
 *   `WithMaxModRev`), so a key written again after it joined leaves the set of keys ahead of later ones.
 * - Joining is create-if-absent on a key of our own, resent after a lost answer. The Go recipe's key is
 *   `<prefix>/<unix nanoseconds>`: a lost answer leaves a key nobody will delete but the lease.
 * - Abort, timeout and session loss delete the waiter's key; Go's `RLock`/`Lock` take no context and leave
 *   their key in line on an error, blocking everyone behind it until the lease ends.
 * - Release is a delete guarded by the key's create revision and can be retried; Go deletes by name.
 * - A waiter watches with no start revision (wait.ts): Go's watch from its own revision waits for etcd's
 *   100 ms sync pass at each handoff. Go's first version re-read at a stale revision and spun forever
 *   (etcd-io/etcd#6408, fixed); here each read is of the latest revision.
 * - Readers and writers fence: `ifHeld()` on either.
 * Like Go's (and any read-write lock), there is no upgrade: a write lock asked for while the same caller
 * holds a read lock waits for itself until its timeout.
 */
export class RWLock<S extends LeaseSession = LeaseSession> {
  /** The lock's name. */
  readonly name: string;
  /** The session whose lease every lock taken by this object is bound to. */
  readonly session: S;
  /** All contenders' keys live under this prefix (`<name>/`). */
  readonly prefix: string;

  /** `session.rwlock(name)` is the same. Sends nothing. */
  constructor(session: S, name: string) {
    nameArg(name, "a read-write lock");
    this.session = session;
    this.name = name;
    this.prefix = `${name}/`;
  }

  /**
   * Waits until no writer that asked before holds or waits, then shares the lock with the other readers. One
   * request when no writer is ahead; else a watch on the newest writer ahead and one read when it goes.
   * On abort, timeout or session loss the key is deleted. `timeout: 0` throws LOCKED instead of waiting.
   */
  readLock(options: LockOptions = {}): Promise<ReadLock<S>> {
    return traceLock("read", this.name, options, () =>
      this.#take(
        "read",
        options,
        (line) => new ReaderJoin(this.session.client, line, this.session.leaseId),
        (line, revision) => readerLine(this.session.client, line, revision),
        (held) => new ReadLock(held),
      ),
    );
  }

  /**
   * Waits until every reader and writer that asked before has gone, then holds the lock alone. One request
   * uncontended; else a watch on the key just ahead and one read when it goes (again for each key ahead
   * that is still there then). On abort, timeout or session loss the key is deleted. `timeout: 0` throws
   * LOCKED instead of waiting.
   */
  writeLock(options: LockOptions = {}): Promise<WriteLock<S>> {
    return traceLock("write", this.name, options, () =>
      this.#take(
        "write",
        options,
        (line) => new Join(this.session.client, { ...line, kind: "rw" }, "", this.session.leaseId),
        (line, revision) => lineReader(this.session.client, line.prefix, revision, "rw"),
        (held) => new WriteLock(held),
      ),
    );
  }

  /** One acquisition of either kind: its join, the read of whom it waits for, and its holding differ. */
  async #take<H extends Held>(
    kind: "read" | "write",
    options: LockOptions,
    join: (line: RWLine) => { send(call: JoinCall): Promise<Joined> },
    read: (line: RWLine, revision: number) => LineReader,
    hold: (held: HeldKeyInit<S>) => H,
  ): Promise<H> {
    const { session, name } = this;
    const line = this.#line(kind);
    const acquisition = new Acquisition(session, options, { kind, name }, [{ key: line.key, value: "" }]);
    try {
      const joined = await acquisition.join(join(line));
      const waited = read(line, joined.revision);
      const header = await waitInLine(session.client, acquisition, joined, waited, (on) => locked(name, on));
      return acquisition.hold(hold({ session, name, key: line.key, revision: joined.revision, header }));
    } catch (error) {
      throw await acquisition.fail(error);
    } finally {
      acquisition.dispose();
    }
  }

  #line(kind: "read" | "write"): RWLine {
    const prefix = this.prefix;
    return { prefix, writers: `${prefix}write/`, key: newKey(prefix, this.session.leaseId, "rw", `${kind}/`) };
  }
}
