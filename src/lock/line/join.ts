import type { EtcdClient } from "../../api/client.js";
import type { ResponseHeader } from "../../api/codec.js";
import type { PutResult, RangeResult } from "../../api/kv.js";
import { type Compare, cmp, type Op, op } from "../../api/txn.js";
import { internal } from "../../errors/catalogue.js";
import { contenders, type KeyKind, KeyTaken } from "./keys.js";
import { NEWEST_FIRST, OLDEST } from "./read.js";
import type { JoinCall, Joined } from "./standing.js";

/**
 * Joining a line: putting our key under `<name>/` so that its create revision is our place. The full join is one
 * transaction: into an empty line (the uncontended case) it is the put alone, answered by its revision (Go's
 * Mutex reads the holder back, and again for its predecessor). Otherwise it puts our key if absent (else reads
 * it back: a resent join) and reads the holder and the two newest keys, whole: their leases say whether they are
 * contenders (keys-only answers of etcd 3.7 leave leases out). The busy branch costs etcd even untaken (decoded,
 * carried in the raft entry), so a join that expects an empty line sends the put alone first
 * (EMPTY_RUN_TO_GUESS). `npm run bench` (sections 1 and 2) measures the lock cycle either way.
 */

/**
 * Whether to send the empty-line put alone before the full join. A wrong guess costs a round trip, a right one
 * saves the busy branch, so it pays only when the line is nearly always empty: a mutex guesses so at first
 * (most locks are uncontended), stops at the first join that finds someone in the line, and guesses again once
 * two joins in a row found it empty. Other recipes join lines that have no history: they send the full join.
 */
const EMPTY_RUN_TO_GUESS = 2;

/** What a join sends besides its put, the same for every join of one key: made once per key (see LineOps). */
interface LineOps {
  key: string;
  empty: Compare;
  absent: Compare;
  holder: Op<RangeResult>;
  newest: Op<RangeResult>;
  own: Op<RangeResult>;
}

function lineOps(prefix: string, key: string): LineOps {
  return {
    key,
    empty: cmp.version({ prefix }, "==", 0),
    absent: cmp.createRevision(key, "==", 0),
    holder: op.get({ prefix, ...OLDEST }),
    newest: op.get({ prefix, sort: NEWEST_FIRST, limit: 2 }),
    own: op.get(key),
  };
}

/**
 * What one mutex remembers of its line: what its last joins found (whether its next join guesses an empty line)
 * and the parts of its join that do not change from one acquisition to the next, for the key it reuses (keys.ts):
 * a compare or an operation encodes once, so a join builds only its put.
 */
export class JoinHistory {
  #emptyRun = EMPTY_RUN_TO_GUESS;
  #ops: LineOps | undefined;

  get guessEmpty(): boolean {
    return this.#emptyRun >= EMPTY_RUN_TO_GUESS;
  }

  found(empty: boolean): void {
    this.#emptyRun = empty ? this.#emptyRun + 1 : 0;
  }

  /** The join's constant parts for `key`, kept from the last join of the same key. */
  ops(prefix: string, key: string): LineOps {
    if (this.#ops?.key !== key) this.#ops = lineOps(prefix, key);
    return this.#ops;
  }
}

/**
 * The join of one key, with one value, into a line of `kind`'s contenders, sent as often as needed. Both
 * transactions touch only keys under `prefix`, so joins of other lines started in the same turn go with them
 * in one request (TxnBatcher).
 */
export class Join {
  readonly #client: EtcdClient;
  readonly #prefix: string;
  readonly #kind: KeyKind;
  /** The value our key is put with: a mutex's secret, a candidate's proclamation. */
  readonly value: string;
  readonly #put: Op<PutResult>;
  readonly #ops: LineOps;
  readonly #history: JoinHistory | undefined;
  /** Sends handed to fetch that no answer showed unapplied: a key found there by the only one is someone else's. */
  #unsettled = 0;

  /** `history`: the mutex's, to guess an empty line and reuse its key's parts; without it, always the full join. */
  constructor(
    client: EtcdClient,
    line: { prefix: string; key: string; kind: KeyKind },
    value: string,
    leaseId: string,
    history?: JoinHistory,
  ) {
    this.#client = client;
    this.#prefix = line.prefix;
    this.#kind = line.kind;
    this.value = value;
    this.#put = op.put(line.key, value, { lease: leaseId });
    this.#ops = history?.ops(line.prefix, line.key) ?? lineOps(line.prefix, line.key);
    this.#history = history;
  }

  async send(call: JoinCall): Promise<Joined> {
    const { empty, absent, holder, newest, own, key } = this.#ops;
    const prefix = this.#prefix;
    const history = this.#history;
    const sending: JoinCall = {
      ...call,
      onSent: () => {
        this.#unsettled++;
        call.onSent();
      },
      onRefused: () => {
        this.#unsettled--;
        call.onRefused();
      },
    };
    if (call.tryOnly) {
      // A try holds at once or not at all: the put into an empty line, else the holder and the two newest keys,
      // read whole, as a join reads them (a stranger among them is refused, not called busy). One request, and no
      // key of ours left to delete.
      const tried = await this.#client
        .txn()
        .if(empty)
        .then(this.#put)
        .else(holder, newest)
        .prepare()
        .commitWithOthers(prefix, sending);
      if (tried.succeeded) return intoEmptyLine(tried.header);
      sending.onRefused();
      const [first, latest] = tried.responses;
      contenders(this.#kind, prefix, first.kvs, latest.kvs);
      const { header } = tried;
      return { header, revision: 0, present: false, created: false, holder: first.kvs[0], busy: true };
    }
    if (history?.guessEmpty) {
      const alone = await this.#client.txn().if(empty).then(this.#put).prepare().commitWithOthers(prefix, sending);
      if (alone.succeeded) return intoEmptyLine(alone.header);
      // Answered "the line is not empty": unlike a send whose answer was lost, it will never land later.
      sending.onRefused();
      history.found(false);
    }
    const busy = op.txn([absent], [this.#put, holder, newest], [own, holder]);
    const full = this.#client.txn().if(empty).then(this.#put).else(busy).prepare();
    const result = await full.commitWithOthers(prefix, sending);
    const { header } = result;
    history?.found(result.succeeded);
    if (result.succeeded) return intoEmptyLine(header);
    const [line] = result.responses;
    if (line.succeeded) {
      const [, first, latest] = line.responses;
      contenders(this.#kind, prefix, first.kvs, latest.kvs);
      const revision = header.revision;
      return {
        header,
        revision,
        present: true,
        created: true,
        predecessor: latest.kvs.find((kv) => kv.createRevision < revision),
        predecessorIsFirst: latest.count === 2,
        // Ours is the newest key under the prefix, so every other one is ahead of it.
        ahead: latest.count - 1,
      };
    }
    // Our key was there: an earlier send of this join landed (its answer was lost), with our value; or it is not
    // ours (another value, or there before we sent anything: a sandbox restored from our snapshot made it).
    const [mine, first] = line.responses;
    const kv = mine.kvs[0];
    if (kv === undefined) throw internal(`key ${key} vanished inside one transaction`);
    // Not ours: an answer (never resent); the mutex draws a new key.
    if (kv.value !== this.value || this.#unsettled < 2) throw new KeyTaken(key);
    // The holder, which the reads of a waiter behind a longer line never reach (read.ts): a stranger there is
    // refused now, as a first join refuses it.
    contenders(this.#kind, prefix, first.kvs);
    // This answer shows the holder, not the key just ahead of ours: one read finds that (wait.ts).
    return { header, revision: kv.createRevision, present: true, created: false };
  }
}

/** Our key went into an empty line: it is the only one there, the holder. */
function intoEmptyLine(header: ResponseHeader): Joined {
  return { header, revision: header.revision, present: true, created: true, ahead: 0 };
}
