import type { EtcdClient } from "../api/client.js";
import type { KeyValue, ResponseHeader } from "../api/codec.js";
import { cmp, op } from "../api/txn.js";
import { describe, internal, invalidArgument } from "../errors/catalogue.js";
import { type EtcdError, isEtcdError } from "../errors/etcd-error.js";
import { resolveTimeout } from "../gateway/config.js";
import { type CallSignal, delay } from "../gateway/signals.js";
import type { LeaseSession } from "./lease-session.js";

/**
 * The waiting line behind etcd's Go `concurrency` package: every contender puts a key under `prefix`, and
 * the key with the lowest create revision is first. A waiter watches only its immediate predecessor (the
 * newest key created before its own) and re-reads the line when that key is deleted.
 */

export type WaitMode = "watch" | "poll";

export interface WaitOptions {
  /** Follow the predecessor with a watch stream (default), or poll for runtimes that cannot hold one open. */
  wait?: WaitMode | undefined;
  /**
   * Poll interval in milliseconds with `wait: "poll"`: from {@link MIN_POLL_INTERVAL} (50) to
   * {@link MAX_POLL_INTERVAL} (60 000). Default 500. Each poll is one read per waiter.
   */
  pollInterval?: number | undefined;
}

/** Below this a waiter's polls become a request flood (20 reads/s per waiter at most). */
export const MIN_POLL_INTERVAL = 50;
/** Above this a released lock could stay unnoticed for longer than any reasonable lease. */
export const MAX_POLL_INTERVAL = 60_000;

/** The wait mode, poll interval and time budget of a lock or campaign, checked before anything is sent. */
export function waitSettings(options: WaitOptions & { timeout?: number | undefined }): { mode: WaitMode; pollInterval: number } {
  const pollInterval = options.pollInterval === undefined ? 500 : options.pollInterval;
  if (typeof pollInterval !== "number" || !(pollInterval >= MIN_POLL_INTERVAL && pollInterval <= MAX_POLL_INTERVAL)) {
    throw invalidArgument(`pollInterval must be a number of milliseconds from ${MIN_POLL_INTERVAL} to ${MAX_POLL_INTERVAL}, got ${describe(pollInterval)}`);
  }
  // As the transport's: positive, or Infinity for no limit; 0 alone means "try once" for a lock.
  if (options.timeout !== 0) resolveTimeout(options.timeout, "timeout");
  const mode = options.wait === undefined ? "watch" : options.wait;
  if (mode !== "watch" && mode !== "poll") throw invalidArgument(`wait must be "watch" or "poll", got ${describe(mode)}`);
  return { mode, pollInterval };
}

export interface QueueState {
  header: ResponseHeader;
  /** The newest key created before ours, if any: the one to wait for. */
  predecessor: KeyValue | undefined;
}

const NEWEST_FIRST = { target: "createRevision", order: "descend" } as const;
const OLDEST_FIRST = { target: "createRevision", order: "ascend" } as const;

/** Range options that select the line's first key: the holder. */
export const OLDEST = { sort: OLDEST_FIRST, limit: 1 } as const;

function ownerOp(prefix: string) {
  return op.get({ prefix, ...OLDEST });
}

/**
 * Joins the line in one transaction: put our key if it does not exist yet (else read it back), and read
 * the holder and, right after our put, the two newest keys: ours and our predecessor.
 */
export type Enqueued = Awaited<ReturnType<typeof enqueue>>;

export async function enqueue(client: EtcdClient, prefix: string, key: string, value: string, leaseId: string, signal: AbortSignal) {
  const result = await client
    .txn()
    .if(cmp.createRevision(key, "==", 0))
    .then(op.put(key, value, { lease: leaseId }), ownerOp(prefix), op.get({ prefix, sort: NEWEST_FIRST, limit: 2 }))
    .else(op.get(key), ownerOp(prefix))
    .commit({ signal });
  if (result.succeeded) {
    const [, owner, newest] = result.responses;
    const revision = result.header.revision;
    return {
      header: result.header,
      revision,
      own: newest.kvs[0],
      owner: owner.kvs[0],
      predecessor: newest.kvs.find((kv) => kv.createRevision < revision),
      created: true,
    };
  }
  const [own, owner] = result.responses;
  const mine = own.kvs[0];
  if (mine === undefined) throw internal(`key ${key} vanished inside one transaction`);
  return { header: result.header, revision: mine.createRevision, own: mine, owner: owner.kvs[0], predecessor: undefined, created: false };
}

/**
 * One read of the line up to our own key: ours (to check it still exists) and our predecessor. Our key
 * missing means our lease ended while we waited.
 */
export async function readLine(client: EtcdClient, prefix: string, revision: number, signal: AbortSignal): Promise<QueueState & { ownExists: boolean }> {
  const { header, kvs } = await client.range({ prefix, maxCreateRevision: revision, sort: NEWEST_FIRST, limit: 2, signal });
  const ownExists = kvs[0]?.createRevision === revision;
  return { header, ownExists, predecessor: ownExists ? kvs[1] : undefined };
}

/**
 * Waits for our turn after `enqueue`. When our key was already there (this session joined before), one
 * read finds our predecessor first; our key gone by then means our lease ended.
 */
export async function waitInLine(
  client: EtcdClient,
  prefix: string,
  line: Enqueued,
  options: { signal: AbortSignal; mode: WaitMode; pollInterval: number; expired: () => EtcdError },
): Promise<ResponseHeader> {
  let start: QueueState = line;
  if (!line.created) {
    const state = await readLine(client, prefix, line.revision, options.signal);
    if (!state.ownExists) throw options.expired();
    start = state;
  }
  return waitForTurn(client, { prefix, revision: line.revision }, start, options);
}

/** What a failed wait reports: the session's loss first, then the caller's abort or timeout, else the cause. */
export function waitFailure(session: LeaseSession, call: CallSignal, thrown: unknown, expired: (cause: unknown) => EtcdError): unknown {
  return session.signal.aborted ? expired(thrown) : call.aborted ? call.error() : thrown;
}

/**
 * Waits until every key created before `revision` has gone. Returns the header of the read that showed
 * it. Throws SESSION_EXPIRED (via `expired`) when our own key disappears meanwhile.
 */
export async function waitForTurn(
  client: EtcdClient,
  line: { prefix: string; revision: number },
  start: QueueState,
  options: { signal: AbortSignal; mode: WaitMode; pollInterval: number; expired: () => EtcdError },
): Promise<ResponseHeader> {
  let { header, predecessor } = start;
  while (predecessor !== undefined) {
    if (options.mode === "watch") await waitForDelete(client, predecessor.keyBytes, header.revision, options.signal);
    else await delay(options.pollInterval, options.signal);
    const state = await readLine(client, line.prefix, line.revision, options.signal);
    if (!state.ownExists) throw options.expired();
    ({ header, predecessor } = state);
  }
  return header;
}

/** Resolves at the first delete of `key` at or after `fromRevision`. */
export async function waitForDelete(client: EtcdClient, key: Uint8Array, fromRevision: number, signal: AbortSignal): Promise<void> {
  const watching = new AbortController();
  const stop = () => watching.abort(signal.reason);
  signal.addEventListener("abort", stop, { once: true });
  try {
    for await (const batch of client.watch({ key, startRevision: fromRevision, noPut: true, signal: watching.signal })) {
      if (batch.events.some((event) => event.type === "delete")) return;
    }
  } catch (error) {
    // History before the predecessor's read was compacted: re-reading the line tells us where we stand.
    if (isEtcdError(error, "COMPACTED") && !signal.aborted) return;
    throw error;
  } finally {
    signal.removeEventListener("abort", stop);
    watching.abort();
  }
}

/**
 * Deletes our key, only if it is still the incarnation created at `revision` when that is known; safe to
 * resend. Returns whether it was there to delete.
 */
export async function deleteOwnKey(
  client: EtcdClient,
  key: string,
  revision: number | undefined,
  options: { signal?: AbortSignal | undefined; timeout?: number | undefined } = {},
): Promise<boolean> {
  const guard = revision === undefined ? cmp.version(key, ">", 0) : cmp.createRevision(key, "==", revision);
  const result = await client.txn().if(guard).then(op.delete(key)).commit({ ...options, idempotent: true });
  return result.succeeded;
}
