import { binToBytes, type BinKey } from "../wire/bytes.js";
import type { Out } from "../wire/encode.js";
import { GrpcCode, GrpcStatusError } from "../wire/errors.js";
import { kvsOf, topOf, revisionOf, type InProcessClient, type Kv } from "./client.js";

/**
 * etcd's Go `concurrency` package as its v3lock and v3election servers run it, over the in-process client:
 * the same requests, in the same order, so keys, revisions and headers come out as etcd's.
 */

/** concurrency.NewSession's default TTL, for a lock or campaign that names no lease. */
export const DEFAULT_SESSION_TTL = 60;

/** `%x` of a lease ID, as the key suffix. */
export function leaseHex(id: bigint): string {
  return id < 0n ? `-${(-id).toString(16)}` : id.toString(16);
}

/** NewSession(WithLease(id)) then Orphan(): a new lease when none is given, else the given one, unchecked. */
export function sessionLease(client: InProcessClient, lease: bigint): bigint {
  return lease === 0n ? client.grant(DEFAULT_SESSION_TTL) : lease;
}

const unknown = (message: string) => new GrpcStatusError(GrpcCode.Unknown, message);

/** waitDelete: until `key` is deleted at or after revision `rev`. */
function waitDelete(client: InProcessClient, key: BinKey, rev: number): Promise<void> {
  return client.watch(key, "", rev, (ev) => ev.type === "DELETE");
}

/**
 * waitDeletes: until every key under `prefix` created at or before `maxCreateRevision` is gone;
 * the last read's header.
 */
async function waitDeletes(client: InProcessClient, prefix: BinKey, maxCreateRevision: number): Promise<Out> {
  for (;;) {
    const { header, kvs } = client.get(topOf(prefix, "last", BigInt(maxCreateRevision)));
    const last = kvs[0];
    if (!last) return header;
    await waitDelete(client, last.key, revisionOf(header));
  }
}

/** Mutex.Lock: join the line with one txn, then wait for every earlier key to go. */
export async function lockMutex(
  client: InProcessClient,
  rechecksOwnKey: boolean,
  name: BinKey,
  lease: bigint,
): Promise<{ header: Out; key: BinKey }> {
  const prefix = `${name}/`;
  const key = `${prefix}${leaseHex(lease)}`;
  const keyBytes = binToBytes(key);
  const owner = { request_range: topOf(prefix, "first") };
  const resp = client.txn({
    compare: [{ target: 1, result: 0, key: keyBytes, create_revision: 0n }],
    success: [{ request_put: { key: keyBytes, value: new Uint8Array(), lease } }, owner],
    failure: [{ request_range: { key: keyBytes } }, owner],
  });
  const myRev = resp.succeeded ? revisionOf(resp.header) : (kvsOf(rangeOf(resp.responses[0]))[0]?.createRevision ?? 0);
  const holder = kvsOf(rangeOf(resp.responses[1]))[0];
  if (!holder || holder.createRevision === myRev) return { header: resp.header, key };
  let header: Out;
  try {
    header = await waitDeletes(client, prefix, myRev - 1);
    if (!rechecksOwnKey) return { header, key };
    // 3.5 reads its own key again: gone means the session's lease ended while waiting.
    const own = client.get({ key: keyBytes });
    if (own.kvs.length === 0) throw unknown("mutex: session is expired");
    return { header: own.header, key };
  } catch (err) {
    if (err instanceof GrpcStatusError && err.message === "mutex: session is expired") throw err;
    // Unlock: the waiter's key goes, whatever ended the wait.
    client.delete(key);
    throw err;
  }
}

function rangeOf(response: Out | undefined): Out | undefined {
  return response?.response_range as Out | undefined;
}

export interface LeaderKey {
  name: BinKey;
  key: BinKey;
  rev: number;
  lease: bigint;
}

/** Election.Campaign: put the candidate's key (or re-proclaim an existing one), then wait for every earlier key. */
export async function campaign(
  client: InProcessClient,
  name: BinKey,
  lease: bigint,
  value: Uint8Array,
): Promise<{ header: Out; leader: LeaderKey }> {
  const prefix = `${name}/`;
  const key = `${prefix}${leaseHex(lease)}`;
  const keyBytes = binToBytes(key);
  const resp = client.txn({
    compare: [{ target: 1, result: 0, key: keyBytes, create_revision: 0n }],
    success: [{ request_put: { key: keyBytes, value, lease } }],
    failure: [{ request_range: { key: keyBytes } }],
  });
  const leader: LeaderKey = { name, key, rev: revisionOf(resp.header), lease };
  if (!resp.succeeded) {
    const existing = kvsOf(rangeOf(resp.responses[0]))[0] as Kv;
    leader.rev = existing.createRevision;
    if (!sameBytes(existing.value, value)) {
      try {
        proclaim(client, leader, value);
      } catch (err) {
        resign(client, leader);
        throw err;
      }
    }
  }
  try {
    await waitDeletes(client, prefix, leader.rev - 1);
  } catch (err) {
    // Canceled by the client: the candidacy is withdrawn (Resign with the client's own context).
    if (client.signal.aborted) resign(client, leader);
    throw err;
  }
  return { header: resp.header, leader };
}

/** Election.Proclaim: a new value, only while the key still has the leader's create revision. */
export function proclaim(client: InProcessClient, leader: LeaderKey, value: Uint8Array): Out {
  const keyBytes = binToBytes(leader.key);
  const resp = client.txn({
    compare: [{ target: 1, result: 0, key: keyBytes, create_revision: BigInt(leader.rev) }],
    success: [{ request_put: { key: keyBytes, value, lease: leader.lease } }],
  });
  if (!resp.succeeded) throw unknown("election: not leader");
  return resp.header;
}

/** Election.Resign: deletes the key if it is still the leader's; no error either way. */
export function resign(client: InProcessClient, leader: LeaderKey): Out {
  const keyBytes = binToBytes(leader.key);
  return client.txn({
    compare: [{ target: 1, result: 0, key: keyBytes, create_revision: BigInt(leader.rev) }],
    success: [{ request_delete_range: { key: keyBytes } }],
  }).header;
}

/** Election.Leader: the oldest key under the name. */
export function leaderOf(client: InProcessClient, name: BinKey): { header: Out; kv: Kv } {
  const { header, kvs } = client.get(topOf(`${name}/`, "first"));
  const kv = kvs[0];
  if (!kv) throw unknown("election: no leader");
  return { header, kv };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
