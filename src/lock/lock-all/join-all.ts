import type { EtcdClient } from "../../api/client.js";
import type { ResponseHeader } from "../../api/codec.js";
import type { RangeResult } from "../../api/kv.js";
import { cmp, op } from "../../api/txn.js";
import type { JoinCall, Standing } from "../line/standing.js";
import { contenders } from "../line/keys.js";
import { NEWEST_FIRST } from "../line/read.js";

/** One of the lines a multi-lock joins, and our key in it (a mutex's key: plain mutex users exclude it). */
export interface MultiLine {
  name: string;
  /** `<name>/`. */
  prefix: string;
  key: string;
}

export interface JoinedAll {
  header: ResponseHeader;
  /** The create revision of every one of our keys: one revision orders us in every line. */
  revision: number;
  /** Whether this send created our keys (else an earlier one had: each line is then read afresh). */
  created: boolean;
  /** Where we stand in each line, in the order of `lines`, when this send created our keys. */
  standings: Standing[];
}

/**
 * Puts our key in every line in one transaction, if none of them exists yet, and reads each line's two newest
 * keys (ours and our predecessor), each checked as a mutex contender: a key there that no contender made is
 * LOCK_NAME_CONFLICT at once, as for a mutex. A resend after a lost answer finds all our keys, made together
 * at one revision.
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
    const result = await this.#client
      .txn()
      .if(...lines.map((line) => cmp.createRevision(line.key, "==", 0)))
      .then(
        ...lines.map((line) => op.put(line.key, "", { lease: this.#leaseId })),
        ...lines.map((line) => op.get({ prefix: line.prefix, sort: NEWEST_FIRST, limit: 2 })),
      )
      .else(...lines.map((line) => op.get(line.key)))
      .commit(call);
    const { header } = result;
    if (result.succeeded) {
      const revision = header.revision;
      const standings = lines.map((line, i) => {
        const newest = result.responses[lines.length + i] as RangeResult;
        contenders("mutex", line.prefix, newest.kvs);
        const predecessor = newest.kvs.find((kv) => kv.createRevision < revision);
        return { header, revision, present: true, predecessor };
      });
      return { header, revision, created: true, standings };
    }
    // An earlier send made our keys, together, at one revision (one of them at least is here: its compare failed).
    // One another client deleted since is missing: the read of its line finds our key gone from it.
    const found = lines.map((_, i) => (result.responses[i] as RangeResult).kvs[0]);
    const revision = found.find((kv) => kv !== undefined)!.createRevision;
    return { header, revision, created: false, standings: [] };
  }
}
