import type { EtcdClient } from "../../api/client.js";
import type { KeyValue, ResponseHeader } from "../../api/codec.js";
import { lockNameConflict } from "../../errors/catalogue.js";

/**
 * Reading the line: the keys under `<name>/`, ordered by create revision. The key with the lowest create
 * revision is first (the holder); each waiter waits for the newest key created before its own.
 */

/** Where a contender stands in the line, as one read (or the join) showed it. */
export interface Position {
  header: ResponseHeader;
  /** The newest key created before ours, if any: the one to wait for. */
  predecessor?: KeyValue | undefined;
  /**
   * The predecessor is the only key older than ours (the holder, with us next): no key can join ahead of us
   * later, so its delete alone makes us first, and the handoff needs no read.
   */
  predecessorIsFirst?: boolean | undefined;
  /** How many keys were ahead of ours, when the read could tell (the join can). */
  ahead?: number | undefined;
}

/** A read of the line that also tells whether our own key is still in it. */
export interface LineState extends Position {
  ownExists: boolean;
}

export const NEWEST_FIRST = { target: "createRevision", order: "descend" } as const;
const OLDEST_FIRST = { target: "createRevision", order: "ascend" } as const;

/** Range options that select the line's first key: the holder. */
export const OLDEST = { sort: OLDEST_FIRST, limit: 1 } as const;

/** What a line's keys must be; a mutex's line holds only contenders' keys (see `onlyContenders`). */
export type LineCheck = (prefix: string, ...lists: KeyValue[][]) => void;

const anyKeys: LineCheck = () => {};

/**
 * One read of the line up to our own key: ours (to check it still exists) and our predecessor. Our key
 * missing means our lease ended while we waited.
 */
export async function readLine(
  client: EtcdClient,
  prefix: string,
  revision: number,
  { signal, avoid }: ReadAt,
  check: LineCheck = anyKeys,
): Promise<LineState> {
  // Three newest up to ours: ours, our predecessor, and whether anyone is ahead of it (etcd's `count` ignores
  // the create-revision filter, so it cannot tell).
  const { header, kvs } = await client.range({
    prefix,
    maxCreateRevision: revision,
    sort: NEWEST_FIRST,
    limit: 3,
    signal,
    avoid,
  });
  check(prefix, kvs);
  const ownExists = kvs[0]?.createRevision === revision;
  return {
    header,
    ownExists,
    predecessor: ownExists ? kvs[1] : undefined,
    predecessorIsFirst: ownExists && kvs.length === 2,
  };
}

/** How a read of the line is sent: its signal, and an endpoint not to try first (one that may have stalled). */
export interface ReadAt {
  signal: AbortSignal;
  avoid?: string | undefined;
}

/**
 * One read of where a waiter stands: its own key still there, and the key it must wait for (see
 * `waitAfterJoin`).
 */
export type LineReader = (at: ReadAt) => Promise<LineState>;

/** The reads of a line in which each key waits for the next older one (a mutex's, a writer's, lockAll's). */
export function lineReader(client: EtcdClient, prefix: string, revision: number, check?: LineCheck): LineReader {
  return (at) => readLine(client, prefix, revision, at, check);
}

/** A lease ID in lowercase hex, as Go writes it: no leading zero. */
const HEX = /^[1-9a-f][0-9a-f]*$/;

/**
 * LOCK_NAME_CONFLICT unless every key seen in the line is a contender's: `<name>/<lease ID in hex>`, bound to
 * a lease, as this SDK, Go's `concurrency`, etcdctl and the server's v3lock write it. Any other key there (data
 * stored under the lock's name, a lock named `<name>/x`, a recipe's key, a contender's key that a plain put
 * cut loose from its lease) sorts into the line like a contender and, with no lease or one that lives on,
 * would hold the lock for good. Every key that can reach the head of the line passes here first (as owner,
 * predecessor or one of the newest), so it is caught before anyone waits behind it. The lease need not be the
 * one the key names: a lock resumed from its ticket keeps its key and moves it to the new holder's lease.
 */
export const onlyContenders: LineCheck = (prefix, ...lists) => {
  for (const kvs of lists) {
    for (const kv of kvs) {
      if (kv.lease === "0" || !HEX.test(kv.key.slice(prefix.length))) {
        throw lockNameConflict(prefix.slice(0, -1), kv.key, kv.lease === "0");
      }
    }
  }
};
