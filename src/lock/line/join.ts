import type { EtcdClient } from "../../api/client.js";
import type { ResponseHeader } from "../../api/codec.js";
import { cmp, op } from "../../api/txn.js";
import { internal } from "../../errors/catalogue.js";
import { contenders, type KeyKind, KeyTaken } from "./keys.js";
import { NEWEST_FIRST, OLDEST } from "./read.js";
import type { JoinCall, Joined } from "./standing.js";

/**
 * Joining a line: putting our key under `<name>/` so that its create revision is our place.
 *
 * The full join is one transaction. When the line is empty (no key under `prefix`: the common, uncontended
 * case), our key is put and holds, and the answer is the put's revision alone. Go's Mutex always puts its key
 * and reads the holder back (and, behind another holder, reads again for its predecessor); an empty line needs
 * no read, which spares etcd two sorted ranges and us a larger answer. Otherwise: put our key if it does not
 * exist yet (else read it back), and read the holder and the two newest keys (ours and our predecessor),
 * without values. A resent join finds our key there, so it takes the second branch and reads it back.
 *
 * The busy branch costs etcd even when it is not taken (the gateway decodes it, the raft entry carries it), so
 * a join that expects an empty line (see EMPTY_RUN_TO_GUESS) sends the put alone first, and the full join only
 * when that finds someone there. `npm run bench` (sections 1 and 2) measures the lock cycle either way.
 */

/**
 * Whether to send the empty-line put alone before the full join. A wrong guess costs a round trip, a right one
 * saves the busy branch, so it pays only when the line is nearly always empty: a mutex guesses so at first
 * (most locks are uncontended), stops at the first join that finds someone in the line, and guesses again once
 * two joins in a row found it empty. Other recipes join lines that have no history: they send the full join.
 */
const EMPTY_RUN_TO_GUESS = 2;

/** What the last joins of one mutex found of its line: whether its next join guesses an empty line. */
export class JoinHistory {
  #emptyRun = EMPTY_RUN_TO_GUESS;

  get guessEmpty(): boolean {
    return this.#emptyRun >= EMPTY_RUN_TO_GUESS;
  }

  found(empty: boolean): void {
    this.#emptyRun = empty ? this.#emptyRun + 1 : 0;
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
  readonly #key: string;
  readonly #kind: KeyKind;
  /** The value our key is put with: a mutex's secret, a candidate's proclamation. */
  readonly value: string;
  readonly #put: ReturnType<typeof op.put>;
  readonly #history: JoinHistory | undefined;

  /** `history`: the line's, to guess an empty line; without it, always the full join. */
  constructor(
    client: EtcdClient,
    line: { prefix: string; key: string; kind: KeyKind },
    value: string,
    leaseId: string,
    history?: JoinHistory,
  ) {
    this.#client = client;
    this.#prefix = line.prefix;
    this.#key = line.key;
    this.#kind = line.kind;
    this.value = value;
    this.#put = op.put(line.key, value, { lease: leaseId });
    this.#history = history;
  }

  async send(call: JoinCall): Promise<Joined> {
    const client = this.#client;
    const prefix = this.#prefix;
    const key = this.#key;
    const history = this.#history;
    const empty = cmp.version({ prefix }, "==", 0);
    if (history?.guessEmpty) {
      const alone = await client.txn().if(empty).then(this.#put).prepare().commitWithOthers(prefix, call);
      if (alone.succeeded) return intoEmptyLine(alone.header);
      // Answered "the line is not empty": unlike a send whose answer was lost, it will never land later.
      call.onRefused();
      history.found(false);
    }
    const holder = op.get({ prefix, ...OLDEST, keysOnly: true });
    const result = await client
      .txn()
      .if(empty)
      .then(this.#put)
      .else(
        op.txn(
          [cmp.createRevision(key, "==", 0)],
          [this.#put, holder, op.get({ prefix, sort: NEWEST_FIRST, limit: 2, keysOnly: true })],
          [op.get(key), holder],
        ),
      )
      .prepare()
      .commitWithOthers(prefix, call);
    const { header } = result;
    history?.found(result.succeeded);
    if (result.succeeded) return intoEmptyLine(header);
    const [line] = result.responses;
    if (line.succeeded) {
      const [, first, newest] = line.responses;
      contenders(this.#kind, prefix, first.kvs, newest.kvs);
      const revision = header.revision;
      return {
        header,
        revision,
        present: true,
        created: true,
        holder: first.kvs[0],
        predecessor: newest.kvs.find((kv) => kv.createRevision < revision),
        predecessorIsFirst: newest.count === 2,
        // Ours is the newest key under the prefix, so every other one is ahead of it.
        ahead: newest.count - 1,
      };
    }
    // An earlier send of this join landed (its answer was lost): our key, read back, with our value.
    const [own, first] = line.responses;
    const mine = own.kvs[0];
    if (mine === undefined) throw internal(`key ${key} vanished inside one transaction`);
    if (mine.value !== this.value) throw new KeyTaken();
    contenders(this.#kind, prefix, first.kvs);
    const revision = mine.createRevision;
    const owner = first.kvs[0]?.createRevision === revision ? undefined : first.kvs[0];
    return { header, revision, present: true, created: false, holder: owner };
  }
}

/** Our key went into an empty line: it is the only one there, the holder. */
function intoEmptyLine(header: ResponseHeader): Joined {
  return { header, revision: header.revision, present: true, created: true, ahead: 0 };
}
