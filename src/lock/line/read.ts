import type { EtcdClient } from "../../api/client.js";
import type { KeyValue } from "../../api/codec.js";
import { untilAnswered } from "../resend/until-answered.js";
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
 * ignores the create-revision filter, so it cannot tell), each checked as `kind`'s contender. Resent while
 * unanswered, for as long as the waiter waits.
 */
export function lineReader(client: EtcdClient, prefix: string, revision: number, kind: KeyKind): LineReader {
  return async ({ signal, avoid }) => {
    const query = { prefix, maxCreateRevision: revision, sort: NEWEST_FIRST, limit: 3, signal, avoid } as const;
    const { header, kvs } = await untilAnswered(client.range.bind(client, query), { signal });
    contenders(kind, prefix, kvs);
    const present = kvs[0]?.createRevision === revision;
    const predecessorIsFirst = present && kvs.length === 2;
    return { header, revision, present, predecessor: present ? kvs[1] : undefined, predecessorIsFirst };
  };
}
