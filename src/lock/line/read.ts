import type { EtcdClient } from "../../api/client.js";
import type { KeyValue } from "../../api/codec.js";
import { unanswered } from "../../errors/etcd-error.js";
import { backoff } from "../../gateway/retry-policy.js";
import { delay } from "../../gateway/signals.js";
import { contenders, type KeyKind } from "./keys.js";
import type { LineReader, Standing } from "./standing.js";

/** Reading the line: the keys under `<name>/` by create revision; each waiter waits for the newest before its own. */
export const NEWEST_FIRST = { target: "createRevision", order: "descend" } as const;
/** Range options that select the line's first key: the holder. */
export const OLDEST = { sort: { target: "createRevision", order: "ascend" }, limit: 1 } as const;

/** Whether a read shows the line changed for a waiter: its key gone, or another key to wait for. */
export function moved(now: Standing, predecessor: KeyValue): boolean {
  return !now.present || now.predecessor?.createRevision !== predecessor.createRevision;
}

/**
 * The reads of a line in which each key waits for the next older one (a mutex's, a writer's, lockAll's): the
 * three newest keys up to ours (ours, our predecessor, and whether anyone is ahead of it: etcd's `count`
 * ignores the create-revision filter, so it cannot tell), each checked as `kind`'s contender.
 */
export function lineReader(client: EtcdClient, prefix: string, revision: number, kind: KeyKind): LineReader {
  return async ({ signal, avoid }) => {
    const query = { prefix, maxCreateRevision: revision, sort: NEWEST_FIRST, limit: 3, signal, avoid } as const;
    const { header, kvs } = await untilAnswered(client.range.bind(client), query, { signal });
    contenders(kind, prefix, false, kvs);
    const present = kvs[0]?.createRevision === revision;
    const predecessorIsFirst = present && kvs.length === 2;
    return { header, revision, present, predecessor: present ? kvs[1] : undefined, predecessorIsFirst };
  };
}

/**
 * Sends a request of an acquisition again while it goes unanswered and the waiter's signal has not aborted: a
 * join (a create-if-absent) or a read of the line, both safe to repeat. The transport gives up on one call
 * within the client's `timeout`; an acquisition's budget is often longer, and failing then would turn a few
 * dead pooled connections into a failed lock whose caller asked to wait longer. An answer that refused it is
 * final. The signal is looked at only after a failure (an uncontended acquisition never makes one).
 */
export async function untilAnswered<A, T>(
  send: (request: A) => Promise<T>,
  request: A,
  waiter: { readonly signal: AbortSignal },
): Promise<T> {
  for (let failures = 0; ; failures++) {
    try {
      return await send(request);
    } catch (error) {
      const signal = waiter.signal;
      if (signal.aborted || !unanswered(error)) throw error;
      await delay(backoff(failures), signal).catch(() => {
        throw error;
      });
    }
  }
}
