import type { EtcdClient } from "../../api/client.js";
import type { ResponseHeader } from "../../api/codec.js";
import { cmp, op } from "../../api/txn.js";
import { internal } from "../../errors/catalogue.js";
import { contenders, type KeyKind, KeyTaken } from "./keys.js";
import { NEWEST_FIRST, OLDEST } from "./read.js";
import type { JoinCall, Joined } from "./standing.js";

/**
 * Joining a line: putting our key under `<name>/` so that its create revision is our place. The full join is one
 * transaction: into an empty line (the uncontended case) it is the put alone, answered by its revision (Go's
 * Mutex reads the holder back, and again for its predecessor). Otherwise it puts our key if absent (else reads
 * it back: a resent join) and reads the holder and the two newest keys, without values. The busy branch costs
 * etcd even untaken (decoded, carried in the raft entry), so a join that expects an empty line sends the put
 * alone first (EMPTY_RUN_TO_GUESS). `npm run bench` (sections 1 and 2) measures the lock cycle either way.
 */

/**
 * Whether to send the empty-line put alone before the full join. A wrong guess costs a round trip, a right one
 * saves the busy branch, so it pays only when the line is nearly always empty: a mutex guesses so at first
 * (most locks are uncontended), stops at the first join that finds someone in the line, and guesses again once
 * two joins in a row found it empty. Other recipes join lines that have no history: they send the full join.
 */
const EMPTY_RUN_TO_GUESS = 2;

/** The value a mutex's join requests are built with once per key, swapped for each acquisition's own secret. */
const STAND_IN = btoa("0".repeat(32));

type Requests = ReturnType<typeof requests>;

/** Both requests of a join: the put alone into an empty line, and the full join (see the module's comment). */
function requests(client: EtcdClient, line: { prefix: string; key: string }, value: string, leaseId: string) {
  const { prefix, key } = line;
  const put = op.put(key, value, { lease: leaseId });
  const empty = cmp.version({ prefix }, "==", 0);
  const holder = op.get({ prefix, ...OLDEST, keysOnly: true });
  const busy = [put, holder, op.get({ prefix, sort: NEWEST_FIRST, limit: 2, keysOnly: true })] as const;
  const full = client
    .txn()
    .if(empty)
    .then(put)
    .else(op.txn([cmp.createRevision(key, "==", 0)], busy, [op.get(key), holder]));
  return { key, alone: client.txn().if(empty).then(put).prepare(), full: full.prepare() };
}

/**
 * What one mutex remembers of its line: what its last joins found (whether its next join guesses an empty line)
 * and its join's requests for its key, built once (a mutex reuses its keys: see keys.ts).
 */
export class JoinHistory {
  #emptyRun = EMPTY_RUN_TO_GUESS;
  #requests: Requests | undefined;

  get guessEmpty(): boolean {
    return this.#emptyRun >= EMPTY_RUN_TO_GUESS;
  }

  found(empty: boolean): void {
    this.#emptyRun = empty ? this.#emptyRun + 1 : 0;
  }

  /** The join's requests for `line.key` with `value` (hex text), from those built for the key last time. */
  requests(client: EtcdClient, line: { prefix: string; key: string }, value: string, leaseId: string): Requests {
    if (this.#requests?.key !== line.key) this.#requests = requests(client, line, atob(STAND_IN), leaseId);
    const made = this.#requests;
    const own = btoa(value);
    return {
      key: made.key,
      get alone() {
        return made.alone.with(STAND_IN, own);
      },
      get full() {
        return made.full.with(STAND_IN, own);
      },
    };
  }
}

/**
 * The join of one key, with one value, into a line of `kind`'s contenders, sent as often as needed. Both
 * transactions touch only keys under `prefix`, so joins of other lines started in the same turn go with them
 * in one request (TxnBatcher).
 */
export class Join {
  readonly #prefix: string;
  readonly #key: string;
  readonly #kind: KeyKind;
  /** The value our key is put with: a mutex's secret, a candidate's proclamation. */
  readonly value: string;
  readonly #requests: Requests;
  readonly #history: JoinHistory | undefined;

  /** `history`: the mutex's, to guess an empty line and reuse its requests; without it, always the full join. */
  constructor(
    client: EtcdClient,
    line: { prefix: string; key: string; kind: KeyKind },
    value: string,
    leaseId: string,
    history?: JoinHistory,
  ) {
    this.#prefix = line.prefix;
    this.#key = line.key;
    this.#kind = line.kind;
    this.value = value;
    this.#requests = history?.requests(client, line, value, leaseId) ?? requests(client, line, value, leaseId);
    this.#history = history;
  }

  async send(call: JoinCall): Promise<Joined> {
    const prefix = this.#prefix;
    const key = this.#key;
    const history = this.#history;
    if (history?.guessEmpty) {
      const alone = await this.#requests.alone.commitWithOthers(prefix, call);
      if (alone.succeeded) return intoEmptyLine(alone.header);
      // Answered "the line is not empty": unlike a send whose answer was lost, it will never land later.
      call.onRefused();
      history.found(false);
    }
    const result = await this.#requests.full.commitWithOthers(prefix, call);
    const { header } = result;
    history?.found(result.succeeded);
    if (result.succeeded) return intoEmptyLine(header);
    const [line] = result.responses;
    if (line.succeeded) {
      const [, first, newest] = line.responses;
      contenders(this.#kind, prefix, true, first.kvs, newest.kvs);
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
    contenders(this.#kind, prefix, true, first.kvs);
    const revision = mine.createRevision;
    const owner = first.kvs[0]?.createRevision === revision ? undefined : first.kvs[0];
    return { header, revision, present: true, created: false, holder: owner };
  }
}

/** Our key went into an empty line: it is the only one there, the holder. */
function intoEmptyLine(header: ResponseHeader): Joined {
  return { header, revision: header.revision, present: true, created: true, ahead: 0 };
}
