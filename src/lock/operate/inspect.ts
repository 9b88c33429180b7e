import type { EtcdClient } from "../../api/client.js";
import type { KeyValue, LeaseId, ResponseHeader } from "../../api/codec.js";
import { permitsMismatch } from "../../errors/catalogue.js";
import { isEtcdError } from "../../errors/etcd-error.js";
import type { CallOptions } from "../../gateway/transport.js";
import { contenders, isKeyOf, nameArg } from "../line/keys.js";

/** One key in a line: a holder or a waiter. */
export interface LineEntry {
  /** The contender's key in the line. */
  key: string;
  /** Its create revision: its place in the line, and its fencing token once it holds. */
  revision: number;
  /** The lease the key is bound to: its session's. */
  leaseId: LeaseId;
}

/** A lock's line as `etcd.inspectLock()` read it: the holder, then the waiters in order. */
export interface LockInfo {
  /** The current holder, or undefined when the lock is free. */
  holder:
    | (LineEntry & {
        /** Seconds the holder's lease has left (0 if it ended just now). */
        ttl: number;
      })
    | undefined;
  /** The sessions waiting behind the holder, first in line first. */
  waiters: LineEntry[];
  /** The header of the read of the line. */
  header: ResponseHeader;
}

/** A semaphore's line as `etcd.inspectSemaphore()` read it: the holders, then the waiters in order. */
export interface SemaphoreInfo {
  /** The permits the line's keys agree on; undefined when nobody holds or waits. */
  permits: number | undefined;
  /** The keys holding a permit, oldest first. */
  holders: LineEntry[];
  /** The keys waiting for one, first in line first. */
  waiters: LineEntry[];
  /** The header of the read of the line. */
  header: ResponseHeader;
}

const LINE_ORDER = { sort: { target: "createRevision", order: "ascend" } } as const;

/**
 * Who holds lock `name` and who waits, in order, without joining the line. Two requests when held (the
 * line, then the holder's lease), one when free. Reads the whole line: one entry per waiter.
 */
export async function inspectLock(client: EtcdClient, name: string, options: CallOptions = {}): Promise<LockInfo> {
  nameArg(name, "a lock");
  const { kvs, header } = await client.range({ prefix: `${name}/`, ...LINE_ORDER, ...options });
  contenders("mutex", `${name}/`, kvs);
  const [first, ...rest] = kvs.map(entry);
  if (first === undefined) return { holder: undefined, waiters: [], header };
  const ttl = await client.lease.timeToLive(first.leaseId, options).then(
    (lease) => lease.ttl,
    (error: unknown) => {
      if (isEtcdError(error, "LEASE_NOT_FOUND")) return 0;
      throw error;
    },
  );
  return { holder: { ...first, ttl }, waiters: rest, header };
}

/**
 * Who holds a permit of semaphore `name` and who waits, in order, without joining the line: one request.
 * LOCK_NAME_CONFLICT if a key in the line is no permit, PERMITS_MISMATCH if the permits disagree on their number.
 */
export async function inspectSemaphore(
  client: EtcdClient,
  name: string,
  options: CallOptions = {},
): Promise<SemaphoreInfo> {
  nameArg(name, "a semaphore");
  const { kvs, header } = await client.range({ prefix: `${name}/`, ...LINE_ORDER, ...options });
  if (kvs.length === 0) return { permits: undefined, holders: [], waiters: [], header };
  const permits = permitsOf(name, kvs);
  const entries = kvs.map(entry);
  return { permits, holders: entries.slice(0, permits), waiters: entries.slice(permits), header };
}

/** What kind of line a name has, told by its keys. */
export type LineKind = "mutex" | "semaphore" | "rwlock";

/** A line as one read of it shows it, whatever recipe made it: who holds, who waits, oldest first. */
export interface LineView {
  /** A mutex's line is also an election's and `lockAll`'s, and Go's, `etcdctl lock`'s and v3lock's. */
  kind: LineKind;
  holders: KeyValue[];
  waiters: KeyValue[];
  /** A semaphore's permits. */
  permits?: number | undefined;
}

/**
 * The line of `name` from a read of its whole line in order (undefined when it has no key): a mutex's, an
 * election's or `lockAll`'s first key holds; a semaphore's first `permits`; a read-write lock's first writer, or
 * the readers before the first writer. LOCK_NAME_CONFLICT for a line that is none of these, PERMITS_MISMATCH for
 * permits that disagree.
 */
export function lineView(name: string, kvs: readonly KeyValue[]): LineView | undefined {
  const prefix = `${name}/`;
  const first = kvs[0];
  if (first === undefined) return undefined;
  const split = (kind: LineKind, held: number, permits?: number): LineView => ({
    kind,
    holders: kvs.slice(0, held),
    waiters: kvs.slice(held),
    permits,
  });
  if (isKeyOf("permit", prefix, first.key)) {
    const permits = permitsOf(name, kvs);
    return split("semaphore", permits, permits);
  }
  if (isKeyOf("rw", prefix, first.key)) {
    contenders("rw", prefix, kvs);
    const writer = kvs.findIndex((kv) => kv.key.startsWith(`${prefix}write/`));
    return split("rwlock", writer === 0 ? 1 : writer === -1 ? kvs.length : writer);
  }
  contenders("mutex", prefix, kvs);
  return split("mutex", 1);
}

/** The permits a semaphore's line agrees on (it has a key). */
function permitsOf(name: string, kvs: readonly KeyValue[]): number {
  contenders("permit", `${name}/`, kvs);
  const oldest = kvs[0]!;
  const count = /^[1-9][0-9]*$/;
  const stranger = kvs.find((kv) => kv.value !== oldest.value || !count.test(kv.value));
  if (stranger !== undefined) {
    const found = count.test(stranger.value) ? stranger.value : "an unreadable number of";
    throw permitsMismatch(name, undefined, stranger.key, found);
  }
  return Number(oldest.value);
}

function entry(kv: KeyValue): LineEntry {
  return { key: kv.key, revision: kv.createRevision, leaseId: kv.lease };
}
