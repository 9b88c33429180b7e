import type { KeyValue } from "../api/codec.js";
import type { Etcd } from "../etcd.js";
import { isEtcdError } from "../errors/etcd-error.js";
import { type LineKind, lineView } from "../lock/operate/inspect.js";

/** One key of a line as an operator reads it. */
export interface EntryView {
  key: string;
  /** Its create revision: its place in line, and its fencing token once it holds. */
  token: number;
  /** Its lease in hex, as etcdctl prints it and as keys name it. */
  lease: string;
  /** Seconds its lease has left (undefined: not asked); 0 if it just ended. */
  ttl?: number | undefined;
}

/** A name's line: who holds, who waits, read at `revision`. */
export interface LockView {
  name: string;
  kind: LineKind;
  permits?: number | undefined;
  holders: EntryView[];
  waiters: EntryView[];
  /** The revision the line was read at: a holder's token below it tells how long ago, in revisions, it joined. */
  revision: number;
}

/** A name's line in a listing: kind and counts, or why it is no lock's. */
export interface LockSummary {
  name: string;
  kind: LineKind | "conflict";
  holders: number;
  waiters: number;
  /** The oldest holder's token. */
  token: number | undefined;
  /** Why the keys under the name are no recipe's line (LOCK_NAME_CONFLICT's message). */
  problem?: string | undefined;
}

const LINE_ORDER = { sort: { target: "createRevision", order: "ascend" } } as const;
const LEASE_HEX = "[1-9a-f][0-9a-f]*";
const RANDOM = "[0-9a-f]{16}";
/** A contender's key, whatever the recipe: its name is what comes before its last part. */
const CONTENDER = [
  new RegExp(`^(.+)/(?:read|write)/${LEASE_HEX}-${RANDOM}$`),
  new RegExp(`^(.+)/${LEASE_HEX}-${RANDOM}$`),
  new RegExp(`^(.+)/${LEASE_HEX}(?:_${RANDOM})?$`),
];

/** The line of `name` (undefined: nobody holds or waits), with each holder's lease TTL. */
export async function readLock(etcd: Etcd, name: string, timeout: number): Promise<LockView | undefined> {
  const { kvs, header } = await etcd.range({ prefix: `${name}/`, ...LINE_ORDER, timeout });
  const view = lineView(name, kvs);
  if (view === undefined) return undefined;
  const ttls = new Map<string, Promise<number>>();
  const ttlOf = (lease: string) => {
    let ttl = ttls.get(lease);
    if (ttl === undefined) {
      ttl = etcd.lease.timeToLive(lease, { timeout }).then(
        (answer) => answer.ttl,
        (error: unknown) => (isEtcdError(error, "LEASE_NOT_FOUND") ? 0 : Promise.reject(error)),
      );
      ttls.set(lease, ttl);
    }
    return ttl;
  };
  const holders = await Promise.all(view.holders.map(async (kv) => ({ ...entry(kv), ttl: await ttlOf(kv.lease) })));
  return {
    name,
    kind: view.kind,
    permits: view.permits,
    holders,
    waiters: view.waiters.map(entry),
    revision: header.revision,
  };
}

/** Every line under `prefix` (one read of the keys there), by name. */
export async function listLocks(etcd: Etcd, prefix: string, timeout: number): Promise<LockSummary[]> {
  const { kvs } = await etcd.range({ prefix, ...LINE_ORDER, timeout });
  const byName = new Map<string, KeyValue[]>();
  for (const kv of kvs) {
    // A contender's key always has a lease: data that only looks like one is no lock's.
    if (kv.lease === "0") continue;
    const name = CONTENDER.map((form) => form.exec(kv.key)?.[1]).find((found) => found !== undefined);
    if (name === undefined) continue;
    const line = byName.get(name);
    if (line === undefined) byName.set(name, [kv]);
    else line.push(kv);
  }
  return [...byName.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, line]) => {
      try {
        const view = lineView(name, line)!;
        const token = view.holders[0]?.createRevision;
        return { name, kind: view.kind, holders: view.holders.length, waiters: view.waiters.length, token };
      } catch (error) {
        const problem = (error as Error).message;
        return { name, kind: "conflict", holders: 0, waiters: line.length, token: undefined, problem };
      }
    });
}

function entry(kv: KeyValue): EntryView {
  return { key: kv.key, token: kv.createRevision, lease: BigInt(kv.lease).toString(16) };
}
