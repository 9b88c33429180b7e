import type { BinKey } from "./wire/bytes.js";
import { Errors } from "./wire/errors.js";

export interface KeyValue {
  readonly key: BinKey;
  readonly createRevision: number;
  readonly modRevision: number;
  readonly version: number;
  readonly value: Uint8Array;
  readonly lease: bigint;
}

export interface StoreEvent {
  readonly type: "PUT" | "DELETE";
  /** For a DELETE only key and modRevision are meaningful, as in etcd's tombstone events. */
  readonly kv: KeyValue;
  readonly prevKv: KeyValue | undefined;
}

/** One revision of one key; `kv` undefined is a tombstone. */
interface Entry {
  readonly revision: number;
  readonly kv: KeyValue | undefined;
}

/** `end` "" means a single key; "\0" means every key >= `key` (etcd's mkGteRange). */
export function inRange(k: BinKey, key: BinKey, end: BinKey): boolean {
  if (end === "") return k === key;
  if (end === "\0") return k >= key;
  return k >= key && k < end;
}

/**
 * etcd's MVCC store: one global revision, a history per key, compaction. Writes happen inside `write`, which
 * gives every change the same new revision and commits it (bumping the revision once) only if something changed.
 */
export class MvccStore {
  revision = 1;
  /** -1 until the first compaction, as etcd's compactMainRev: compacting at 0 is allowed once on a fresh store. */
  compactRevision = -1;
  private readonly history = new Map<BinKey, Entry[]>();
  /** Every key with any retained history, sorted bytewise. */
  private readonly sortedKeys: BinKey[] = [];
  /** Events by revision, for watchers replaying from a past revision. */
  readonly log: { revision: number; events: readonly StoreEvent[] }[] = [];

  constructor(
    private readonly onCommit: (revision: number, events: readonly StoreEvent[]) => void,
    /**
     * etcd 3.5 keeps a tombstone at exactly the compact revision (so a watch from there
     * sees the delete); 3.4 drops it.
     */
    private readonly keepsTombstoneAtCompactRevision = false,
  ) {}

  /** Keys in [key, end) as of `rev` (0 = current), in key order. Throws etcd's compacted/future errors. */
  range(key: BinKey, end: BinKey, rev = 0, current = this.revision): KeyValue[] {
    if (rev > current) throw Errors.futureRev();
    if (rev > 0 && rev < this.compactRevision) throw Errors.compacted();
    const at = rev <= 0 ? current : rev;
    const out: KeyValue[] = [];
    if (end === "") {
      const kv = this.at(key, at);
      if (kv) out.push(kv);
      return out;
    }
    for (let i = lowerBound(this.sortedKeys, key); i < this.sortedKeys.length; i++) {
      const k = this.sortedKeys[i] as BinKey;
      if (!inRange(k, key, end)) break;
      const kv = this.at(k, at);
      if (kv) out.push(kv);
    }
    return out;
  }

  get(key: BinKey): KeyValue | undefined {
    return this.at(key, this.revision);
  }

  /** The key as of `rev`, or undefined when that revision is compacted (how etcd's watch looks up prev_kv). */
  getAt(key: BinKey, rev: number): KeyValue | undefined {
    if (rev < this.compactRevision || rev > this.revision) return undefined;
    return this.at(key, rev);
  }

  private at(key: BinKey, rev: number): KeyValue | undefined {
    const entries = this.history.get(key);
    if (!entries) return undefined;
    for (let i = entries.length - 1; i >= 0; i--) {
      const e = entries[i] as Entry;
      if (e.revision <= rev) return e.kv;
    }
    return undefined;
  }

  write<T>(fn: (w: WriteBatch) => T): T {
    const batch = new WriteBatch(this, this.revision + 1);
    const result = fn(batch);
    if (batch.events.length > 0) {
      this.revision = batch.revision;
      this.log.push({ revision: batch.revision, events: batch.events });
      this.onCommit(batch.revision, batch.events);
    }
    return result;
  }

  /** @internal used by WriteBatch */
  append(key: BinKey, entry: Entry): void {
    let entries = this.history.get(key);
    if (!entries) {
      entries = [];
      this.history.set(key, entries);
      this.sortedKeys.splice(lowerBound(this.sortedKeys, key), 0, key);
    }
    entries.push(entry);
  }

  /** Keeps, per key, the newest version at or below `rev` unless it is a tombstone; drops older history. */
  compact(rev: number): void {
    if (rev <= this.compactRevision) throw Errors.compacted();
    if (rev > this.revision) throw Errors.futureRev();
    this.compactRevision = rev;
    for (const [key, entries] of this.history) {
      let keep = -1;
      while (keep + 1 < entries.length && (entries[keep + 1] as Entry).revision <= rev) keep++;
      const tombstone = keep >= 0 && (entries[keep] as Entry).kv === undefined;
      if (tombstone && !(this.keepsTombstoneAtCompactRevision && (entries[keep] as Entry).revision === rev)) keep += 1;
      if (keep > 0) entries.splice(0, keep);
      if (entries.length === 0) {
        this.history.delete(key);
        this.sortedKeys.splice(lowerBound(this.sortedKeys, key), 1);
      }
    }
    const firstKept = this.log.findIndex((l) => l.revision >= rev);
    this.log.splice(0, firstKept < 0 ? this.log.length : firstKept);
    // etcd 3.4 keeps each key's newest version at the compact revision but drops tombstones: a watch from exactly
    // that revision sees its puts, not its deletes.
    const atRev = this.log[0];
    if (atRev?.revision === rev && !this.keepsTombstoneAtCompactRevision) {
      atRev.events = atRev.events.filter((ev) => ev.type === "PUT");
      if (atRev.events.length === 0) this.log.shift();
    }
  }
}

export class WriteBatch {
  readonly events: StoreEvent[] = [];

  constructor(
    private readonly store: MvccStore,
    readonly revision: number,
  ) {}

  /** The revision a read inside this batch observes: the new one once something changed, as etcd's txn write. */
  get readRevision(): number {
    return this.events.length > 0 ? this.revision : this.revision - 1;
  }

  range(key: BinKey, end: BinKey, rev = 0): KeyValue[] {
    return this.store.range(key, end, rev, this.readRevision);
  }

  put(key: BinKey, value: Uint8Array, lease: bigint): { kv: KeyValue; prev: KeyValue | undefined } {
    const prev = this.store.range(key, "", 0, this.readRevision)[0];
    const kv: KeyValue = {
      key,
      createRevision: prev ? prev.createRevision : this.revision,
      modRevision: this.revision,
      version: prev ? prev.version + 1 : 1,
      value,
      lease,
    };
    this.store.append(key, { revision: this.revision, kv });
    this.events.push({ type: "PUT", kv, prevKv: prev });
    return { kv, prev };
  }

  deleteRange(key: BinKey, end: BinKey): KeyValue[] {
    const victims = this.range(key, end);
    for (const prev of victims) {
      this.store.append(prev.key, { revision: this.revision, kv: undefined });
      const tombstone: KeyValue = {
        key: prev.key,
        createRevision: 0,
        modRevision: this.revision,
        version: 0,
        value: new Uint8Array(),
        lease: 0n,
      };
      this.events.push({ type: "DELETE", kv: tombstone, prevKv: prev });
    }
    return victims;
  }
}

function lowerBound(sorted: readonly BinKey[], key: BinKey): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as BinKey) < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
