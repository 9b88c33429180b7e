import type { EtcdClient } from "../../api/client.js";
import { cmp, op } from "../../api/txn.js";
import { internal } from "../../errors/catalogue.js";
import type { JoinCall } from "../line/join.js";
import { type LineReader, type LineState, lineReader, NEWEST_FIRST } from "../line/read.js";

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

/** Where a reader stands after joining: the newest writer ahead of it, if any. */
export type ReaderJoined = LineState & { revision: number; created: boolean };

/**
 * A reader joins in one transaction: put its key if it does not exist yet, and read the newest writer (all
 * writers are older than a key put in the same transaction). A resend after a lost answer finds the key.
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

  send(call: JoinCall): Promise<ReaderJoined> {
    return joinAsReader(this.#client, this.#line, this.#leaseId, call);
  }
}

async function joinAsReader(client: EtcdClient, line: RWLine, leaseId: string, call: JoinCall): Promise<ReaderJoined> {
  const result = await client
    .txn()
    .if(cmp.createRevision(line.key, "==", 0))
    .then(op.put(line.key, "", { lease: leaseId }), op.get({ prefix: line.writers, sort: NEWEST_FIRST, limit: 1 }))
    .else(op.get(line.key))
    .commit(call);
  if (result.succeeded) {
    const [, writer] = result.responses;
    return {
      header: result.header,
      revision: result.header.revision,
      ownExists: true,
      predecessor: writer.kvs[0],
      created: true,
    };
  }
  const [own] = result.responses;
  const mine = own.kvs[0];
  if (mine === undefined) throw internal(`key ${line.key} vanished inside one transaction`);
  return { header: result.header, revision: mine.createRevision, ownExists: true, created: false };
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
    const ownExists = own.kvs[0]?.createRevision === revision;
    return { header: result.header, ownExists, predecessor: ownExists ? writer.kvs[0] : undefined };
  };
}

/** One read for a writer: the mutex's (its own key, and the newest key of either kind older than it). */
export function writerLine(client: EtcdClient, line: RWLine, revision: number): LineReader {
  return lineReader(client, line.prefix, revision);
}
