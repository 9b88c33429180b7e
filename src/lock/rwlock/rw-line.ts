import type { EtcdClient } from "../../api/client.js";
import { cmp, op } from "../../api/txn.js";
import { internal } from "../../errors/catalogue.js";
import type { JoinCall, Joined, LineReader } from "../line/standing.js";
import { contenders } from "../line/keys.js";
import { NEWEST_FIRST } from "../line/read.js";

/**
 * A read-write lock's line and its requests. Writers' keys live under `<name>/write/`, readers' under
 * `<name>/read/`, all ordered by create revision. A writer waits for the newest key older than its own,
 * whatever its kind (the mutex's line, read over `<name>/`); a reader waits only for the newest OLDER
 * WRITER. rwlock.ts says why.
 */

export interface RWLine {
  /** `<name>/`: every contender. */
  prefix: string;
  /** `<name>/write/`: the writers. */
  writers: string;
  key: string;
}

/**
 * A reader joins in one transaction: put its key if it does not exist yet, and read the newest writer (all
 * writers are older than a key put in the same transaction), whole: its lease says whether it is a contender. A
 * resend after a lost answer finds the key.
 */
export class ReaderJoin {
  readonly #client: EtcdClient;
  readonly #line: RWLine;
  readonly #leaseId: string;

  constructor(client: EtcdClient, line: RWLine, leaseId: string) {
    this.#client = client;
    this.#line = line;
    this.#leaseId = leaseId;
  }

  async send(call: JoinCall): Promise<Joined> {
    const line = this.#line;
    const result = await this.#client
      .txn()
      .if(cmp.createRevision(line.key, "==", 0))
      .then(
        op.put(line.key, "", { lease: this.#leaseId }),
        op.get({ prefix: line.writers, sort: NEWEST_FIRST, limit: 1 }),
      )
      .else(op.get(line.key))
      .commit(call);
    const { header } = result;
    if (result.succeeded) {
      const [, writer] = result.responses;
      contenders("rw", line.prefix, writer.kvs);
      const predecessor = writer.kvs[0];
      return { header, revision: header.revision, present: true, created: true, predecessor, holder: predecessor };
    }
    const mine = result.responses[0].kvs[0];
    if (mine === undefined) throw internal(`key ${line.key} vanished inside one transaction`);
    return { header, revision: mine.createRevision, present: true, created: false };
  }
}

/** One read for a reader: its own key still there, and the newest writer older than it. */
export function readerLine(client: EtcdClient, line: RWLine, revision: number): LineReader {
  return async ({ signal, avoid }) => {
    const result = await client
      .txn()
      .then(
        op.get(line.key),
        op.get({ prefix: line.writers, maxCreateRevision: revision - 1, sort: NEWEST_FIRST, limit: 1 }),
      )
      .commit({ signal, avoid });
    // No compares: the `then` branch always runs.
    if (!result.succeeded) throw internal("a transaction without compares took its else branch");
    const [own, writer] = result.responses;
    contenders("rw", line.prefix, own.kvs, writer.kvs);
    const present = own.kvs[0]?.createRevision === revision;
    return { header: result.header, revision, present, predecessor: present ? writer.kvs[0] : undefined };
  };
}
