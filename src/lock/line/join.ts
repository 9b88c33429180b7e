import type { EtcdClient } from "../../api/client.js";
import type { KeyValue, ResponseHeader } from "../../api/codec.js";
import { cmp, op } from "../../api/txn.js";
import { internal } from "../../errors/catalogue.js";
import { NEWEST_FIRST, OLDEST, type Position } from "./read.js";

/**
 * Joining a line: putting our key under `<name>/` so that its create revision is our position.
 *
 * The full join is one transaction. When the line is empty (no key under `prefix`: the common, uncontended
 * case), our key is put and is the holder, and the answer is the put's revision alone. Go's Mutex always puts
 * its key and reads the holder back (and, behind another holder, reads again for its predecessor); an empty
 * line needs no read at all, which spares etcd two sorted ranges and its gateway and us a larger answer.
 * Otherwise: put our key if it does not exist yet (else read it back, value and all), and read the holder
 * and, right after our put, the two newest keys: ours and our predecessor, without values (nobody reads a
 * contender's value from them). A resent join finds its own key there, so it takes the second branch and
 * reads it back.
 *
 * The branch for a busy line costs etcd even when it is not taken: the gateway decodes it, the raft entry
 * carries it, and the member checks its operations. So a join that expects an empty line (see
 * EMPTY_RUN_TO_GUESS) sends the put alone first (`if the line is empty, put`), and the full join only when
 * that finds someone there. `npm run bench` (sections 1 and 2) measures the lock cycle either way.
 */

/**
 * What a join's request is sent with: the session's signal (a join is cut off only when the session ends), the
 * count of its sends handed to fetch, the report of a send answered without effect, and `idempotent`: a join is
 * a create-if-absent, so a repeat finds the key and changes nothing.
 */
export interface JoinCall {
  signal: AbortSignal;
  /** One send was handed to fetch: until answered, it may land. */
  onSent: () => void;
  /** One send was answered without effect (a put into an empty line that found it busy): it never lands. */
  refused: () => void;
  idempotent: true;
}

/** What a join showed of the line. */
export interface Joined extends Position {
  /** Every key the join saw in the line, for the caller's LineCheck. */
  seen: KeyValue[];
  key: string;
  /** Our key's create revision: our position in the line, and the fencing token once we hold it. */
  revision: number;
  /** Our key as read back, when the join read it. */
  own?: KeyValue | undefined;
  /** The line's first key (the holder), when the join read it; undefined with our key alone in the line. */
  owner?: KeyValue | undefined;
  /** Whether this join created our key (else an earlier send of it had). */
  created: boolean;
}

/** Whether the join left us first in the line: nobody to wait for. */
export function isFirst(joined: Joined): boolean {
  return joined.owner === undefined || joined.owner.createRevision === joined.revision;
}

/** The holder, without its value: the join needs only its key and revisions. */
function ownerOp(prefix: string) {
  return op.get({ prefix, ...OLDEST, keysOnly: true });
}

type Put = ReturnType<typeof op.put>;

/** If the line is empty, put our key; else read it and the line (see the module's comment). */
function fullJoin(client: EtcdClient, prefix: string, key: string, put: Put) {
  return client
    .txn()
    .if(cmp.version({ prefix }, "==", 0))
    .then(put)
    .else(
      op.txn(
        [cmp.createRevision(key, "==", 0)],
        [put, ownerOp(prefix), op.get({ prefix, sort: NEWEST_FIRST, limit: 2, keysOnly: true })],
        [op.get(key), ownerOp(prefix)],
      ),
    )
    .prepare();
}

/** If the line is empty, put our key; else nothing. */
function putIfEmpty(client: EtcdClient, prefix: string, put: Put) {
  return client
    .txn()
    .if(cmp.version({ prefix }, "==", 0))
    .then(put)
    .prepare();
}

/**
 * Whether to send the empty-line put alone before the full join. A wrong guess costs a round trip, a right
 * one saves the busy branch, so it pays only when the line is nearly always empty: a mutex guesses so at first
 * (most locks are uncontended), stops at the first join that finds someone in the line, and guesses again once
 * two joins in a row found it empty. Other recipes join lines that have no history: they always send the full
 * join.
 */
const EMPTY_RUN_TO_GUESS = 2;

/** What the last joins of one mutex found of its line: whether its next join guesses an empty line. */
export class JoinHistory {
  /** Joins in a row that found the line empty. */
  #emptyRun = EMPTY_RUN_TO_GUESS;

  get guessEmpty(): boolean {
    return this.#emptyRun >= EMPTY_RUN_TO_GUESS;
  }

  found(empty: boolean): void {
    this.#emptyRun = empty ? this.#emptyRun + 1 : 0;
  }
}

/**
 * The join of one key, with one value, into one line, sent as often as needed. Both transactions touch only
 * keys under `prefix`, so joins of other lines started in the same turn go with them in one request
 * (TxnBatcher).
 */
export class Join {
  readonly prefix: string;
  readonly key: string;
  /** The value our key is put with: a mutex's secret, a candidate's proclamation. */
  readonly value: string;
  readonly #client: EtcdClient;
  readonly #put: Put;
  readonly #history: JoinHistory | undefined;

  /** `history`: the line's, to guess an empty line (see EMPTY_RUN_TO_GUESS); without it, always the full join. */
  constructor(client: EtcdClient, prefix: string, key: string, value: string, leaseId: string, history?: JoinHistory) {
    this.#client = client;
    this.prefix = prefix;
    this.key = key;
    this.value = value;
    this.#put = op.put(key, value, { lease: leaseId });
    this.#history = history;
  }

  /** Joins the line: see the module's comment. */
  async send(call: JoinCall): Promise<Joined> {
    const { key, prefix } = this;
    const history = this.#history;
    if (history?.guessEmpty) {
      const alone = await putIfEmpty(this.#client, prefix, this.#put).commitWithOthers(prefix, call);
      if (alone.succeeded) return intoEmptyLine(key, alone.header);
      // Answered "the line is not empty": unlike a send whose answer was lost, it will never land later.
      call.refused();
      // Someone is in the line (perhaps our own key, from a send whose answer was lost): the full join.
      history.found(false);
    }
    const result = await fullJoin(this.#client, prefix, key, this.#put).commitWithOthers(prefix, call);
    const { header } = result;
    history?.found(result.succeeded);
    if (result.succeeded) return intoEmptyLine(key, header);
    const [line] = result.responses;
    if (line.succeeded) {
      const [, owner, newest] = line.responses;
      const revision = header.revision;
      return {
        // After the join: our key is there.
        seen: [...owner.kvs, ...newest.kvs],
        key,
        header,
        revision,
        own: newest.kvs[0],
        owner: owner.kvs[0],
        predecessor: newest.kvs.find((kv) => kv.createRevision < revision),
        predecessorIsFirst: newest.count === 2,
        // Ours is the newest key under the prefix, so every other one is ahead of it.
        ahead: newest.count - 1,
        created: true,
      };
    }
    const [own, owner] = line.responses;
    const mine = own.kvs[0];
    if (mine === undefined) throw internal(`key ${key} vanished inside one transaction`);
    return {
      seen: owner.kvs,
      key,
      header,
      revision: mine.createRevision,
      own: mine,
      owner: owner.kvs[0],
      created: false,
    };
  }
}

/** Our key went into an empty line: it is the only one there, the holder. */
function intoEmptyLine(key: string, header: ResponseHeader): Joined {
  return { seen: [], key, header, revision: header.revision, ahead: 0, created: true };
}
