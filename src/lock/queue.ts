import type { EtcdClient } from "../api/client.js";
import type { KeyValue, ResponseHeader } from "../api/codec.js";
import { cmp, type Compare, op } from "../api/txn.js";
import { describe, invalidArgument, lockNameConflict } from "../errors/catalogue.js";
import { resolveTimeout } from "../gateway/config.js";
import type { CallOptions } from "../gateway/transport.js";
import { leaseHex } from "./names.js";

/**
 * The waiting line behind etcd's Go `concurrency` package: every contender puts a key under `prefix`, and
 * the key with the lowest create revision is first. This module holds the line's requests: join it, read
 * one's place in it, leave it. How a waiter waits is in wait.ts.
 */

export type WaitMode = "watch" | "poll";

/** How a contender waits for its turn. */
export interface WaitOptions {
  /** Follow the predecessor with a watch stream (default), or poll for runtimes that cannot hold one open. */
  wait?: WaitMode | undefined;
  /**
   * Poll interval in milliseconds with `wait: "poll"`: from 50 to 60 000. Default 500. Each poll is one read
   * per waiter.
   */
  pollInterval?: number | undefined;
}

/** Below this a waiter's polls become a request flood (20 reads/s per waiter at most). */
export const MIN_POLL_INTERVAL = 50;
/** Above this a released lock could stay unnoticed for longer than any reasonable lease. */
export const MAX_POLL_INTERVAL = 60_000;

/** Options of every wait for a lock, permit or leadership. */
export interface LockOptions extends WaitOptions {
  /** Gives up waiting: the waiter deletes its key and the call throws ABORTED. */
  signal?: AbortSignal | undefined;
  /**
   * Longest wait in milliseconds; TIMEOUT after it (the key is deleted). `0` tries once and throws
   * LOCKED if another session holds the lock. Default: wait as long as the session lives.
   */
  timeout?: number | undefined;
}

/** The wait mode, poll interval and time budget of a wait, checked before anything is sent. */
export function waitSettings(options: LockOptions): { mode: WaitMode; pollInterval: number } {
  const pollInterval = options.pollInterval === undefined ? 500 : options.pollInterval;
  if (typeof pollInterval !== "number" || !(pollInterval >= MIN_POLL_INTERVAL && pollInterval <= MAX_POLL_INTERVAL)) {
    throw invalidArgument(
      `pollInterval must be a number of milliseconds from ${MIN_POLL_INTERVAL} to ${MAX_POLL_INTERVAL}, got ${describe(pollInterval)}`,
    );
  }
  // As the transport's: positive, or Infinity for no limit; 0 alone means "try once".
  if (options.timeout !== 0) resolveTimeout(options.timeout, "timeout");
  const mode = options.wait === undefined ? "watch" : options.wait;
  if (mode !== "watch" && mode !== "poll")
    throw invalidArgument(`wait must be "watch" or "poll", got ${describe(mode)}`);
  return { mode, pollInterval };
}

/** Where a contender stands in the line, as one read showed it. */
export interface QueueState {
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
export interface LineState extends QueueState {
  ownExists: boolean;
}

export const NEWEST_FIRST = { target: "createRevision", order: "descend" } as const;
const OLDEST_FIRST = { target: "createRevision", order: "ascend" } as const;

/** Range options that select the line's first key: the holder. */
export const OLDEST = { sort: OLDEST_FIRST, limit: 1 } as const;

/**
 * What a join's request is sent with: the session's signal, a count of its sends (told `-1` for a send
 * answered without effect, which can never land later), and `idempotent`: a join is a create-if-absent, so
 * a repeat finds the key and changes nothing.
 */
export interface JoinCall {
  signal: AbortSignal;
  onSent: (sends?: number) => void;
  idempotent: true;
}

/** What a line's keys must be; a mutex's line holds only `<name>/<leaseHex>` keys (see `onlyContenders`). */
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
  signal: AbortSignal,
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

/**
 * LOCK_NAME_CONFLICT unless every key seen in the line is a contender's: `<name>/<hex of its own lease>`, as
 * this SDK, Go's `concurrency`, etcdctl and the server's v3lock write it. Any other key there (data stored
 * under the lock's name, a lock named `<name>/x`, a recipe's key) sorts into the line like a contender and,
 * with no lease or one that lives on, would hold the lock for good. Every key that can reach the head of
 * the line passes here first (as owner, predecessor or one of the newest), so it is caught before anyone
 * waits behind it.
 */
export const onlyContenders: LineCheck = (prefix, ...lists) => {
  for (const kvs of lists) {
    for (const kv of kvs) {
      if (kv.lease === "0" || kv.key !== prefix + leaseHex(kv.lease))
        throw lockNameConflict(prefix.slice(0, -1), kv.key);
    }
  }
};

/**
 * Deletes our key, only if it is still the incarnation created at `revision` when that is known; safe to
 * resend. Returns whether it was there to delete.
 */
export async function deleteOwnKey(
  client: EtcdClient,
  key: string,
  revision: number | undefined,
  options: CallOptions = {},
): Promise<boolean> {
  const guard = revision === undefined ? cmp.version(key, ">", 0) : cmp.createRevision(key, "==", revision);
  return deleteIf(client, key, guard, options);
}

/** Stands in for the guard's revision in a release built once: no key reaches it. */
const ANY_REVISION = Number.MAX_SAFE_INTEGER;

/** Deletes a key only while its mod revision is the given one; safe to resend; true if it held. */
export type GuardedDelete = (modRevision: number, options?: CallOptions) => Promise<boolean>;

/**
 * The release of a lock's `key` built once (a mutex releases the same key at every acquisition, and only the
 * guard's revision changes): each send copies one string instead of building and serialising a transaction.
 */
export function guardedDelete(client: EtcdClient, key: string): GuardedDelete {
  const template = client
    .txn()
    .if(cmp.modRevision(key, "==", ANY_REVISION))
    .then(op.delete(key))
    .prepare();
  // It touches `key` alone: releases of other keys started in the same turn go with it in one request.
  return async (modRevision, options = {}) =>
    (await template.withRevision(ANY_REVISION, modRevision).commitWithOthers(key, options)).succeeded;
}

/** Deletes `key` only while `guard` holds; safe to resend. Returns whether it held (the key was deleted). */
async function deleteIf(client: EtcdClient, key: string, guard: Compare, options: CallOptions = {}): Promise<boolean> {
  const result = await client
    .txn()
    .if(guard)
    .then(op.delete(key))
    .commit({ ...options, idempotent: true });
  return result.succeeded;
}
