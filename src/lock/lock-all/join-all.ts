import type { EtcdClient } from "../../api/client.js";
import type { ResponseHeader } from "../../api/codec.js";
import type { RangeResult } from "../../api/kv.js";
import { cmp, op } from "../../api/txn.js";
import { internal, lockedBySameLease } from "../../errors/catalogue.js";
import type { JoinCall } from "../line/join.js";
import { type LineState, NEWEST_FIRST } from "../line/read.js";

/** One of the lines a multi-lock joins. */
export interface MultiLine {
  name: string;
  /** `<name>/`. */
  prefix: string;
  /** Our key in it: `<name>/<leaseHex>`, the mutex's, so it shares each line with plain mutex users. */
  key: string;
}

export interface JoinedAll {
  header: ResponseHeader;
  /** The create revision of every one of our keys: one revision orders us in every line. */
  revision: number;
  /** Where we stand in each line, in the order of `lines`. */
  states: Array<LineState & { created: boolean }>;
}

/**
 * Puts our key in every line in one transaction, if none of them exists yet, and reads each line's newest
 * key older than ours. A resend after a lost answer finds all our keys with one create revision under our
 * lease and goes on from there (each line then read afresh); keys found with mixed revisions, or moved to
 * another lease by a resumed ticket, belong to another contender of this lease, and the join fails with
 * LOCKED rather than order us by two revisions.
 */
export class JoinAll {
  readonly #client: EtcdClient;
  readonly #lines: readonly MultiLine[];
  readonly #leaseId: string;

  constructor(client: EtcdClient, lines: readonly MultiLine[], leaseId: string) {
    this.#client = client;
    this.#lines = lines;
    this.#leaseId = leaseId;
  }

  async send(call: JoinCall): Promise<JoinedAll> {
    const lines = this.#lines;
    const leaseId = this.#leaseId;
    const result = await this.#client
      .txn()
      .if(...lines.map((line) => cmp.createRevision(line.key, "==", 0)))
      .then(
        ...lines.map((line) => op.put(line.key, "", { lease: leaseId })),
        ...lines.map((line) => op.get({ prefix: line.prefix, sort: NEWEST_FIRST, limit: 2 })),
      )
      .else(...lines.map((line) => op.get(line.key)))
      .commit(call);
    const { header } = result;
    if (result.succeeded) {
      const revision = header.revision;
      const states = lines.map((_, i) => {
        const newest = result.responses[lines.length + i] as RangeResult;
        const predecessor = newest.kvs.find((kv) => kv.createRevision < revision);
        return { header, ownExists: true, predecessor, created: true };
      });
      return { header, revision, states };
    }
    const found = lines.map((line, i) => ({ line, kv: (result.responses[i] as RangeResult).kvs[0] }));
    const revision = found.find((f) => f.kv !== undefined)?.kv?.createRevision;
    if (revision === undefined) throw internal("a multi-lock's keys vanished inside one transaction");
    const stranger = found.find((f) => f.kv?.createRevision !== revision || f.kv.lease !== leaseId);
    if (stranger !== undefined) throw lockedBySameLease(stranger.line.name, stranger.line.key);
    return { header, revision, states: lines.map(() => ({ header, ownExists: true, created: false })) };
  }
}
