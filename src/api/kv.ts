import { countArg, int64Field, leaseIdArg, optionalCount } from "./args.js";
import { type Bytes, encodeBytes, toBytes } from "./bytes.js";
import {
  decodeHeader,
  decodeKeyValue,
  decodeKeyValues,
  int,
  type KeyValue,
  type LeaseId,
  type ResponseHeader,
} from "./codec.js";
import { describe, invalidArgument } from "../errors/catalogue.js";
import { resolveFlag } from "../gateway/config.js";
import type { KeyRange, Keyspace } from "./keyspace.js";
import type { WireDeleteRange, WirePut, WireRange } from "../gateway/wire.js";

/** What a range is sorted by. */
export type SortTarget = "key" | "version" | "createRevision" | "modRevision" | "value";
/** Which way; `"none"` keeps etcd's order (ascending key). */
export type SortOrder = "none" | "ascend" | "descend";

/** How a range read is done: limit, revision, sort, filters. */
export interface RangeOptions {
  /** At most this many keys (0: no limit). `more` says whether there were others. */
  limit?: number | undefined;
  /** Read the store as it was at this revision (0: latest). */
  revision?: number | undefined;
  /** Sort order. Default: by key, ascending. */
  sort?:
    | {
        /** What to sort by. Default `"key"`. */
        target?: SortTarget | undefined;
        /** Which way. Default `"ascend"` (for `"key"`, etcd's own order). */
        order?: SortOrder | undefined;
      }
    | undefined;
  /** Leave values out (keys and revisions only). */
  keysOnly?: boolean | undefined;
  /** Only the count: `kvs` comes back empty. */
  countOnly?: boolean | undefined;
  /** Only keys created at or after this revision. */
  minCreateRevision?: number | undefined;
  /** Only keys created at or before this revision. */
  maxCreateRevision?: number | undefined;
  /** Only keys last modified at or after this revision. */
  minModRevision?: number | undefined;
  /** Only keys last modified at or before this revision. */
  maxModRevision?: number | undefined;
  /** Serve from the member's local state without a quorum read: faster, possibly stale. */
  serializable?: boolean | undefined;
}

/** What `range()` takes: which keys, and how to read them. */
export type RangeQuery = KeyRange & RangeOptions;

/** What a range read found. */
export interface RangeResult {
  /** The store's revision when the read was served. */
  header: ResponseHeader;
  /** The keys found, in the order asked for. */
  kvs: KeyValue[];
  /** How many keys matched in all, before `limit`. */
  count: number;
  /** Whether `limit` left keys out. */
  more: boolean;
}

/** How a put is done. */
export interface PutOptions {
  /**
   * Attach the key to this lease: it is deleted when the lease ends. `"0"` is etcd's "no lease", as leaving
   * the option out: the key is written without one (and a key that had a lease no longer has it).
   */
  lease?: LeaseId | undefined;
  /** Return the key-value as it was before this put. */
  prevKv?: boolean | undefined;
  /** Keep the current value (the key must exist); only the lease changes. */
  ignoreValue?: boolean | undefined;
  /** Keep the current lease (the key must exist); only the value changes. */
  ignoreLease?: boolean | undefined;
}

/** What a put did. */
export interface PutResult {
  /** The revision the put was written at. */
  header: ResponseHeader;
  /** The key before the put, with `prevKv: true` (undefined if it did not exist). */
  prevKv: KeyValue | undefined;
}

/** How a delete is done. */
export interface DeleteOptions {
  /** Return the deleted key-values. */
  prevKv?: boolean | undefined;
}

/** What `delete()` takes: which keys, and how. */
export type DeleteQuery = KeyRange & DeleteOptions;

/** What a delete did. */
export interface DeleteResult {
  /** The revision the delete was written at. */
  header: ResponseHeader;
  /** How many keys were deleted. */
  deleted: number;
  /** The deleted keys, with `prevKv: true`. */
  prevKvs: KeyValue[];
}

const SORT_TARGET: Record<SortTarget, string> = {
  key: "KEY",
  version: "VERSION",
  createRevision: "CREATE",
  modRevision: "MOD",
  value: "VALUE",
};
const SORT_ORDER: Record<SortOrder, string> = { none: "NONE", ascend: "ASCEND", descend: "DESCEND" };

export function rangeRequest(keyspace: Keyspace, query: Bytes | RangeQuery): Record<string, unknown> {
  const options: RangeOptions =
    typeof query === "object" && query !== null && !(query instanceof Uint8Array) ? query : {};
  return {
    ...keyspace.range(query),
    limit: int64Field(optionalCount(options.limit, "limit")),
    revision: int64Field(optionalCount(options.revision, "revision")),
    ...sortFields(options.sort),
    serializable: resolveFlag(options.serializable, "serializable") || undefined,
    keys_only: resolveFlag(options.keysOnly, "keysOnly") || undefined,
    count_only: resolveFlag(options.countOnly, "countOnly") || undefined,
    min_mod_revision: int64Field(optionalCount(options.minModRevision, "minModRevision")),
    max_mod_revision: int64Field(optionalCount(options.maxModRevision, "maxModRevision")),
    min_create_revision: int64Field(optionalCount(options.minCreateRevision, "minCreateRevision")),
    max_create_revision: int64Field(optionalCount(options.maxCreateRevision, "maxCreateRevision")),
  };
}

function sortFields(sort: RangeOptions["sort"]): Record<string, string> {
  if (sort === undefined) return {};
  if (typeof sort !== "object" || sort === null || Array.isArray(sort))
    throw invalidArgument(`sort must be { target?, order? }, got ${describe(sort)}`);
  const target = sort.target ?? "key";
  // Own keys only: "toString" is `in` every object, and would have been sent as no sort at all.
  if (typeof target !== "string" || !Object.hasOwn(SORT_TARGET, target)) {
    throw invalidArgument(`sort.target must be one of ${Object.keys(SORT_TARGET).join(", ")}, got ${describe(target)}`);
  }
  const order = sort.order ?? (target === "key" ? "none" : "ascend");
  if (typeof order !== "string" || !Object.hasOwn(SORT_ORDER, order)) {
    throw invalidArgument(`sort.order must be one of ${Object.keys(SORT_ORDER).join(", ")}, got ${describe(order)}`);
  }
  // As in clientv3: keys already come in ascending key order, and a target with no order would be ignored.
  const effective = target === "key" && order === "ascend" ? "none" : order;
  return { sort_target: SORT_TARGET[target], sort_order: SORT_ORDER[effective] };
}

export function decodeRange(keyspace: Keyspace, wire: WireRange): RangeResult {
  return {
    header: decodeHeader(wire.header),
    kvs: decodeKeyValues(keyspace, wire.kvs),
    count: int(wire.count, "count"),
    more: wire.more ?? false,
  };
}

export function putRequest(
  keyspace: Keyspace,
  key: Bytes,
  value: Bytes | undefined,
  options: PutOptions = {},
): Record<string, unknown> {
  const ignoreValue = resolveFlag(options.ignoreValue, "ignoreValue");
  const ignoreLease = resolveFlag(options.ignoreLease, "ignoreLease");
  if (value === undefined && !ignoreValue) {
    throw invalidArgument("put needs a value (or ignoreValue: true to keep the current one)");
  }
  if (ignoreValue && value !== undefined && toBytes(value).length > 0) {
    throw invalidArgument("put with ignoreValue must not also give a value");
  }
  const lease = options.lease === undefined ? undefined : leaseIdArg(options.lease);
  if (ignoreLease && lease !== undefined && lease !== "0") {
    throw invalidArgument("put with ignoreLease must not also give a lease");
  }
  return {
    key: keyspace.encodeKey(key),
    value: value === undefined ? undefined : emptyToUndefined(encodeBytes(value)),
    lease: lease === "0" ? undefined : lease,
    prev_kv: resolveFlag(options.prevKv, "prevKv") || undefined,
    ignore_value: ignoreValue || undefined,
    ignore_lease: ignoreLease || undefined,
  };
}

export function decodePut(keyspace: Keyspace, wire: WirePut): PutResult {
  return {
    header: decodeHeader(wire.header),
    prevKv: wire.prev_kv === undefined ? undefined : decodeKeyValue(keyspace, wire.prev_kv),
  };
}

export function deleteRequest(keyspace: Keyspace, query: Bytes | DeleteQuery): Record<string, unknown> {
  const prevKv =
    typeof query === "object" && query !== null && !(query instanceof Uint8Array) ? query.prevKv : undefined;
  return { ...keyspace.range(query), prev_kv: resolveFlag(prevKv, "prevKv") || undefined };
}

export function decodeDelete(keyspace: Keyspace, wire: WireDeleteRange): DeleteResult {
  return {
    header: decodeHeader(wire.header),
    deleted: int(wire.deleted, "deleted"),
    prevKvs: decodeKeyValues(keyspace, wire.prev_kvs),
  };
}

export function compactRequest(revision: number, physical: boolean | undefined): Record<string, unknown> {
  return { revision: String(countArg(revision, "revision")), physical: resolveFlag(physical, "physical") || undefined };
}

function emptyToUndefined(text: string): string | undefined {
  return text.length === 0 ? undefined : text;
}
