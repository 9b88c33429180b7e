import { type Bytes, toBytes, toText, wellFormedText } from "../api/bytes.js";
import type { KeyValue, LeaseId, ResponseHeader } from "../api/codec.js";
import { cmp, type Compare, op } from "../api/txn.js";
import { notLeader } from "../errors/catalogue.js";
import type { CallOptions } from "../gateway/transport.js";
import { attempt } from "./attempt.js";
import type { LeaseSession } from "./lease-session.js";
import { Join } from "./join.js";
import { deleteOwnKey, type LockOptions, OLDEST, onlyContenders } from "./queue.js";
import { waitInLine } from "./wait.js";
import { nameArg } from "./names.js";

/** The leader of an election, as `election.leader()` and `election.observe()` see it. */
export interface Leader {
  /** The leader's key, `<name>/<leaseIdHex>`. */
  key: string;
  /** The leader's latest proclamation. */
  value: string;
  /** The proclamation's bytes, for a value that is not text. */
  valueBytes: Uint8Array;
  /** The create revision of the leader's key: strictly increases with each new leader. */
  revision: number;
  /** The leader's session lease: leadership ends with it. */
  leaseId: LeaseId;
  /** The header of the read (or watch message) that showed this leader. */
  header: ResponseHeader;
}

/**
 * Leader election as in etcd's Go `concurrency.Election`: candidates queue like mutex waiters under
 * `<name>/`; the oldest key leads, and its value is the leader's proclamation.
 */
export class Election<S extends LeaseSession = LeaseSession> {
  /** The name candidates campaign on; Go's `concurrency.Election` on the same name takes part too. */
  readonly name: string;
  /** All candidates' keys live under this prefix (`<name>/`). */
  readonly prefix: string;
  /** The session whose lease this candidate campaigns with: leadership ends with it. */
  readonly session: S;
  #key: string | undefined;
  #revision: number | undefined;

  /** `session.election(name)` is the same. Sends nothing. */
  constructor(session: S, name: string) {
    nameArg(name, "an election");
    this.session = session;
    this.name = name;
    this.prefix = `${name}/`;
  }

  /** Whether this candidate won and its session is still trusted. */
  get isLeader(): boolean {
    return this.#key !== undefined && this.session.alive;
  }

  /** The create revision of our leader key once elected: a fencing token like a lock's. */
  get revision(): number | undefined {
    return this.#revision;
  }

  /** Our key (`<name>/<leaseIdHex>`) once elected; undefined before, and after `resign()` or a failed `proclaim()`. */
  get key(): string | undefined {
    return this.#key;
  }

  /** The compare "we are still the leader", for fenced transactions. NOT_LEADER if we never won. */
  ifLeader(): Compare {
    if (this.#key === undefined || this.#revision === undefined) throw notLeader(this.name);
    return cmp.createRevision(this.#key, "==", this.#revision);
  }

  /**
   * Waits until elected, with `value` as the proclamation. Until it resolves this candidate is not the
   * leader (`isLeader` false, `ifLeader()` throws). On abort, timeout or session loss the candidacy is
   * withdrawn. `timeout: 0` tries once: NOT_LEADER (and no candidacy left) if another candidate leads.
   */
  async campaign(value: Bytes, options: LockOptions = {}): Promise<void> {
    const { session, name, prefix } = this;
    const key = `${prefix}${session.leaseHex}`;
    // Checked like any value sent (bytes or well-formed text) before the candidacy is sent.
    const text = typeof value === "string" ? wellFormedText(value) : toText(toBytes(value));
    const leave = (revision: number | undefined) => deleteOwnKey(session.client, key, revision);
    const revision = await attempt(session, options, { kind: "leadership", name }, [key], leave, async (frame) => {
      const join = new Join(session.client, prefix, key, text, session.leaseId);
      const line = await frame.join((call) => join.send(call), text);
      onlyContenders(prefix, line.seen);
      if (!line.created && line.own?.value !== text) {
        // Campaigning again with a new value: update our own key, whatever our place in the line.
        await session.client
          .txn()
          .if(cmp.createRevision(key, "==", line.revision))
          .then(op.put(key, value, { lease: session.leaseId }))
          .commit({ signal: frame.signal });
      }
      if (line.owner !== undefined && line.owner.createRevision !== line.revision) {
        if (frame.tryOnly) throw notLeader(name);
        frame.waiting(line.ahead);
      }
      await waitInLine(session.client, prefix, line, frame.context);
      return line.revision;
    });
    this.#key = key;
    this.#revision = revision;
  }

  /** Publishes a new value as the leader, without losing leadership. NOT_LEADER if we are not it. */
  async proclaim(value: Bytes, options: CallOptions = {}): Promise<void> {
    const condition = this.ifLeader();
    const result = await this.session.client
      .txn()
      .if(condition)
      .then(op.put(this.#key!, value, { lease: this.session.leaseId }))
      .commit(options);
    if (!result.succeeded) {
      this.#key = this.#revision = undefined;
      throw notLeader(this.name);
    }
  }

  /** Gives up leadership (or candidacy), letting the next candidate lead. A no-op if not campaigning. */
  async resign(options: CallOptions = {}): Promise<void> {
    const key = this.#key;
    const revision = this.#revision;
    this.#key = this.#revision = undefined;
    if (key === undefined || revision === undefined) return;
    try {
      await deleteOwnKey(this.session.client, key, revision, options);
    } finally {
      this.session.keys.done([key]);
    }
  }

  /** The current leader, or undefined when nobody leads. */
  async leader(options: CallOptions = {}): Promise<Leader | undefined> {
    const { kvs, header } = await this.session.client.range({ ...OLDEST, prefix: this.prefix, ...options });
    return kvs[0] === undefined ? undefined : toLeader(kvs[0], header);
  }

  /**
   * Every leader and proclamation in order, as Go's `Observe`: the current leader first, then each new value
   * it proclaims, then the next leader after it goes. Ends when `signal` aborts.
   */
  observe(options: { signal?: AbortSignal | undefined } = {}): AsyncIterable<Leader> {
    return { [Symbol.asyncIterator]: () => observe(this, options.signal) };
  }
}

async function* observe(election: Election, signal: AbortSignal | undefined): AsyncGenerator<Leader, void, undefined> {
  const client = election.session.client;
  for (;;) {
    const { kvs, header } = await client.range({ ...OLDEST, prefix: election.prefix, signal });
    let current: Leader | undefined = kvs[0] === undefined ? undefined : toLeader(kvs[0], header);
    if (current === undefined) {
      // Nobody leads: the first put under the prefix is the next leader.
      for await (const batch of client.watch({
        prefix: election.prefix,
        startRevision: header.revision,
        noDelete: true,
        signal,
      })) {
        const put = batch.events[0];
        if (put !== undefined) {
          current = toLeader(put.kv, { ...batch.header, revision: put.kv.modRevision });
          break;
        }
      }
      if (current === undefined) return;
    }
    yield current;
    let deleted = false;
    for await (const batch of client.watch({ key: current.key, startRevision: current.header.revision + 1, signal })) {
      for (const event of batch.events) {
        if (event.type === "delete") {
          deleted = true;
          break;
        }
        yield toLeader(event.kv, batch.header);
      }
      if (deleted) break;
    }
    if (!deleted) return;
  }
}

function toLeader(kv: KeyValue, header: ResponseHeader): Leader {
  return {
    key: kv.key,
    value: kv.value,
    valueBytes: kv.valueBytes,
    revision: kv.createRevision,
    leaseId: kv.lease,
    header,
  };
}
