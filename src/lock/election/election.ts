import { type Bytes, toBytes, toText, wellFormedText } from "../../api/bytes.js";
import type { Compare } from "../../api/txn.js";
import { campaignWithdrawn, invalidArgument, notLeader } from "../../errors/catalogue.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import { traceLock } from "../../events/channels.js";
import { anySignal } from "../../gateway/signals.js";
import type { CallOptions } from "../../gateway/transport.js";
import { Acquisition, type LockOptions } from "../acquire/acquisition.js";
import type { LeaseSession } from "../lease/lease-session.js";
import { Join } from "../line/join.js";
import { nameArg, newKey } from "../line/keys.js";
import { lineReader, OLDEST } from "../line/read.js";
import { waitInLine } from "../line/wait.js";
import { Leadership } from "./leadership.js";
import { type Leader, observe, toLeader } from "./observe.js";

export type { Leader } from "./observe.js";

/**
 * Leader election as in etcd's Go `concurrency.Election`: candidates line up like mutex waiters under
 * `<name>/`; the oldest key leads, and its value is the leader's proclamation.
 */
export class Election<S extends LeaseSession = LeaseSession> {
  /** The name candidates campaign on; Go's `concurrency.Election` on the same name takes part too. */
  readonly name: string;
  /** All candidates' keys live under this prefix (`<name>/`). */
  readonly prefix: string;
  /** The session whose lease this candidate campaigns with: leadership ends with it. */
  readonly session: S;
  /** Our leadership once won, until resigned or found lost by `proclaim()`. */
  #leadership: Leadership<S> | undefined;
  /** The campaign under way: `resign()` withdraws it. */
  #campaign: { withdraw: AbortController; over: Promise<unknown> } | undefined;

  /** `session.election(name)` is the same. Sends nothing. */
  constructor(session: S, name: string) {
    nameArg(name, "an election");
    this.session = session;
    this.name = name;
    this.prefix = `${name}/`;
  }

  /** Whether this candidate won and still leads: not resigned, and its session's lease trusted. */
  get isLeader(): boolean {
    return this.#leadership?.held ?? false;
  }

  /**
   * While elected: aborts when this leadership ends (resigned, lost, revoked by an operator), the reason saying
   * which, as a lock's `signal`. Undefined before the first win; each win has its own.
   */
  get signal(): AbortSignal | undefined {
    return this.#leadership?.signal;
  }

  /**
   * While elected: aborts with RELEASE_REQUESTED when an operator asks the leader to step down
   * (`operator.requestRelease(name)`), as a lock's `releaseRequested`. Nothing else changes: resign when you can.
   */
  get releaseRequested(): AbortSignal | undefined {
    return this.#leadership?.releaseRequested;
  }

  /** The create revision of our leader key once elected: a fencing token like a lock's. */
  get revision(): number | undefined {
    return this.#leadership?.revision;
  }

  /**
   * Our key (`<name>/<leaseIdHex>_<16 hex>`) once elected; undefined before, and after `resign()` or a failed
   * `proclaim()`.
   */
  get key(): string | undefined {
    return this.#leadership?.key;
  }

  /** The compare "we are still the leader", for fenced transactions. NOT_LEADER if we never won. */
  ifLeader(): Compare {
    if (this.#leadership === undefined) throw notLeader(this.name);
    return this.#leadership.ifHeld();
  }

  /**
   * Waits until elected, with `value` as the proclamation. Until it resolves this candidate is not the leader
   * (`isLeader` false, `ifLeader()` throws). On abort, timeout, session loss or `resign()` the candidacy is
   * withdrawn (its key deleted). `timeout: 0` tries once: NOT_LEADER (and no candidacy left) if another
   * candidate leads. Campaigning while leading proclaims `value`; while a campaign is under way, INVALID_ARGUMENT.
   */
  campaign(value: Bytes, options: LockOptions = {}): Promise<void> {
    return traceLock(
      "leadership",
      this.name,
      options,
      () => this.#run(value, options),
      () => ({ revision: this.revision, leaseId: this.session.leaseId }),
    );
  }

  async #run(value: Bytes, options: LockOptions): Promise<void> {
    const { session, name, prefix } = this;
    const client = session.client;
    // Checked like any value sent (bytes or well-formed text) before the candidacy is sent.
    const text = typeof value === "string" ? wellFormedText(value) : toText(toBytes(value));
    if (this.#leadership?.held) return this.proclaim(text, options);
    if (this.#campaign !== undefined) {
      throw invalidArgument(`a campaign for ${name} is under way: await it, or resign() to withdraw it`);
    }
    const key = newKey(prefix, session.leaseId, "mutex");
    const withdraw = new AbortController();
    const signal = anySignal(options.signal, withdraw.signal);
    const subject = { kind: "leadership", name } as const;
    const acquisition = new Acquisition(session, { ...options, signal }, subject, [{ key, value: text }]);
    let over!: () => void;
    this.#campaign = { withdraw, over: new Promise<void>((resolve) => (over = resolve)) };
    try {
      const joined = await acquisition.join(new Join(client, { prefix, key, kind: "mutex" }, text, session.leaseId));
      const read = lineReader(client, prefix, joined.revision, "mutex");
      const own = { key, createRevision: joined.revision };
      const header = await waitInLine(client, acquisition, joined, read, () => notLeader(name), own);
      const leadership = new Leadership({ session, name, key, revision: joined.revision, header });
      this.#leadership = acquisition.hold(leadership);
    } catch (error) {
      const failure = await acquisition.fail(error);
      throw withdraw.signal.aborted && isEtcdError(failure, "ABORTED") ? campaignWithdrawn(name) : failure;
    } finally {
      acquisition.dispose();
      this.#campaign = undefined;
      over();
    }
  }

  /** Publishes a new value as the leader, without losing leadership. NOT_LEADER if we are not it. */
  async proclaim(value: Bytes, options: CallOptions = {}): Promise<void> {
    const leadership = this.#leadership;
    if (leadership === undefined) throw notLeader(this.name);
    if (!(await leadership.proclaim(value, options))) {
      // Our key is gone or not ours: its release finds out why, and leaves no key behind.
      if (this.#leadership === leadership) this.#leadership = undefined;
      leadership.resign().catch(() => {});
      throw notLeader(this.name);
    }
  }

  /**
   * Gives up leadership, or withdraws the campaign under way (which then rejects with ABORTED, its key
   * deleted), letting the next candidate lead. A no-op if not campaigning.
   */
  async resign(options: CallOptions = {}): Promise<void> {
    const campaign = this.#campaign;
    if (campaign !== undefined) {
      campaign.withdraw.abort();
      await campaign.over;
    }
    const leadership = this.#leadership;
    this.#leadership = undefined;
    try {
      await leadership?.resign(options);
    } catch (error) {
      // Gone already (its lease ended, or it was released): nothing is left to give up.
      if (!isEtcdError(error, "LOCK_LOST") && !isEtcdError(error, "LOCK_RELEASED")) throw error;
    }
  }

  /** The current leader, or undefined when nobody leads. */
  async leader(options: CallOptions = {}): Promise<Leader | undefined> {
    const { kvs, header } = await this.session.client.range({ ...OLDEST, prefix: this.prefix, ...options });
    return kvs[0] === undefined ? undefined : toLeader(kvs[0], header);
  }

  /**
   * Every leader and proclamation in order, as Go's `Observe`: the current leader first, then each new value
   * it proclaims, then the next leader after it goes. As `etcd.watch()`: aborting `signal` throws an `ABORTED`
   * EtcdError (its `cause` is the signal's reason) out of the loop; `break` ends it quietly.
   */
  observe(options: { signal?: AbortSignal | undefined } = {}): AsyncIterable<Leader> {
    return { [Symbol.asyncIterator]: () => observe(this.session.client, this.prefix, options.signal) };
  }
}
