import type { EtcdClient } from "../api/client.js";
import type { ResponseHeader } from "../api/codec.js";
import type { RangeResult } from "../api/kv.js";
import { cmp, op } from "../api/txn.js";
import { internal, lockedBySameLease } from "../errors/catalogue.js";
import type { CallOptions } from "../gateway/transport.js";
import { type LineState, NEWEST_FIRST } from "./queue.js";
import type { JoinCall } from "./queue.js";

/**
 * The requests of a multi-lock: join every line in one transaction, leave them all in one. Its keys are the
 * mutex's (`<name>/<leaseHex>`), so it shares each line with plain mutex users.
 */

/** One line of a multi-lock. */
export interface Line {
  name: string;
  /** `<name>/`. */
  prefix: string;
  /** Our key in it: `<name>/<leaseHex>`. */
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
 * key older than ours. A resend after a lost answer finds all our keys with one create revision and goes on
 * from there (each line then read afresh); keys found under this lease with mixed revisions belong to
 * another contender of the same lease, and the join fails with LOCKED rather than order us by two revisions.
 */
export async function joinAll(
  client: EtcdClient,
  lines: readonly Line[],
  leaseId: string,
  call: JoinCall,
): Promise<JoinedAll> {
  const result = await client
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
  const stranger = found.find((f) => f.kv?.createRevision !== revision);
  if (stranger !== undefined) throw lockedBySameLease(stranger.line.name, stranger.line.key);
  return { header, revision, states: lines.map(() => ({ header, ownExists: true, created: false })) };
}

/**
 * Deletes our keys in one transaction: all of them if each still has `revision` (or unguarded when the
 * revision is unknown: the join was cut off and may have landed), else each one that still has it. Safe to
 * resend. Returns whether all of them were there.
 */
export async function deleteOwnKeys(
  client: EtcdClient,
  keys: readonly string[],
  revision: number | undefined,
  options: CallOptions = {},
): Promise<boolean> {
  if (revision === undefined) {
    await client
      .txn()
      .then(...keys.map((key) => op.delete(key)))
      .commit({ ...options, idempotent: true });
    return true;
  }
  const guards = keys.map((key) => cmp.createRevision(key, "==", revision));
  const result = await client
    .txn()
    .if(...guards)
    .then(...keys.map((key) => op.delete(key)))
    .else(...keys.map((key, i) => op.txn([guards[i]!], [op.delete(key)])))
    .commit({ ...options, idempotent: true });
  return result.succeeded;
}
