import { refused } from "../errors/catalogue.js";
import { isEtcdError } from "../errors/etcd-error.js";
import { Transport, type CallOptions } from "../gateway/transport.js";
import * as wire from "../gateway/wire.js";
import type { Bytes } from "./bytes.js";
import { decodeHeader, type KeyValue, type ResponseHeader } from "./codec.js";
import { type EtcdOptions, redacted, type ResolvedConfig, resolveConfig } from "./config.js";
import { Keyspace } from "./keyspace.js";
import {
  compactRequest,
  decodeDelete,
  decodePut,
  decodeRange,
  type DeleteOptions,
  type DeleteQuery,
  type DeleteResult,
  deleteRequest,
  type PutOptions,
  type PutResult,
  putRequest,
  type RangeOptions,
  type RangeQuery,
  type RangeResult,
  rangeRequest,
} from "./kv.js";
import type { Clock } from "./clock.js";
import { LeaseClient } from "./lease.js";
import { TxnBatcher } from "./txn-batch.js";
import { TxnBuilder } from "./txn-builder.js";
import { watch, type WatchBatch, type WatchQuery } from "./watch.js";
import { checkWatchQuery } from "./watch-query.js";

/**
 * The core client for etcd's gRPC-gateway JSON API over `fetch`: KV, transactions, leases, watch and
 * compaction. It knows nothing of locks; `Etcd` adds them on top. Creating one sends nothing; every method
 * is one call that honours `signal` and `timeout`.
 */
export class EtcdClient {
  /** Lease calls: grant, keepalive, time to live, revoke, list. Leases are cluster-wide: see {@link LeaseClient}. */
  readonly lease: LeaseClient;
  /** @internal */
  readonly transport: Transport;
  /** @internal */
  readonly keyspace: Keyspace;
  /** @internal The clock sessions measure lease deadlines on (see EtcdOptions.clock). */
  readonly clock: Clock;
  /** @internal The default lockDelay of the client's locks (see EtcdOptions.lockDelay). */
  readonly lockDelay: number;
  readonly #config: ResolvedConfig;
  readonly #batcher: TxnBatcher;

  constructor(options: EtcdOptions) {
    this.#config = resolveConfig(options);
    this.transport = new Transport(this.#config);
    this.keyspace = new Keyspace(this.#config.namespace);
    this.clock = this.#config.clock;
    this.lockDelay = this.#config.lockDelay;
    this.lease = new LeaseClient(this.transport, this.keyspace);
    this.#batcher = new TxnBatcher(this.transport);
  }

  /**
   * The validated configuration, defaults filled in: a copy, with the password redacted, so that logging it
   * (or the client) never shows the secret and changing it changes nothing.
   */
  get config(): ResolvedConfig {
    return redacted(this.#config);
  }

  /** One key, or undefined when it does not exist. */
  async get(key: Bytes, options: RangeOptions & CallOptions = {}): Promise<KeyValue | undefined> {
    const { kvs } = await this.range({ ...options, key });
    return kvs[0];
  }

  /** Keys of a range or prefix, with limit, revision, sort and filters. */
  async range(query: RangeQuery & CallOptions): Promise<RangeResult> {
    const result = await this.transport
      .unary(
        {
          path: "/v3/kv/range",
          body: rangeRequest(this.keyspace, query),
          schema: wire.rangeResponse,
          retry: "idempotent",
        },
        query,
      )
      .catch(denied(`reading ${keysOf(query)}`, `read on ${keysOf(query)}`));
    return decodeRange(this.keyspace, result);
  }

  /** Writes `value` at `key`; with `lease`, the key is deleted when the lease ends. */
  async put(key: Bytes, value: Bytes | undefined, options: PutOptions & CallOptions = {}): Promise<PutResult> {
    const result = await this.transport
      .unary(
        {
          path: "/v3/kv/put",
          body: putRequest(this.keyspace, key, value, options),
          schema: wire.putResponse,
          retry: "write",
        },
        options,
      )
      .catch(denied(`writing ${keysOf({ key })}`, `write (or readwrite) on ${keysOf({ key })}`));
    return decodePut(this.keyspace, result);
  }

  /** Deletes one key, or a range or prefix: `delete("k")`, `delete({ prefix: "jobs/" })`. */
  async delete(query: Bytes | DeleteQuery, options: DeleteOptions & CallOptions = {}): Promise<DeleteResult> {
    const target =
      typeof query === "string" || query instanceof Uint8Array ? { key: query, ...options } : { ...options, ...query };
    const result = await this.transport
      .unary(
        {
          path: "/v3/kv/deleterange",
          body: deleteRequest(this.keyspace, target),
          schema: wire.deleteRangeResponse,
          retry: "write",
        },
        target,
      )
      .catch(denied(`deleting ${keysOf(target)}`, `write (or readwrite) on ${keysOf(target)}`));
    return decodeDelete(this.keyspace, result);
  }

  /**
   * Discards history before `revision`, of every key of the cluster (a namespace does not limit it).
   * `physical` waits until the space is reclaimed.
   */
  async compact(
    revision: number,
    options: CallOptions & { physical?: boolean | undefined } = {},
  ): Promise<{
    /** Which member answered, at which store revision. */
    header: ResponseHeader;
  }> {
    const result = await this.transport.unary(
      {
        path: "/v3/kv/compaction",
        body: compactRequest(revision, options.physical),
        schema: wire.headerOnly,
        retry: "idempotent",
      },
      options,
    );
    return { header: decodeHeader(result.header) };
  }

  /** Starts a transaction: `txn().if(...).then(...).else(...).commit()`. */
  txn(): TxnBuilder {
    return new TxnBuilder(this.transport, this.keyspace, this.#batcher);
  }

  /**
   * Changes to a key, range or prefix, as batches per revision. See {@link WatchQuery}. The loop ends only by
   * error or by leaving it: aborting `signal` throws an `ABORTED` EtcdError (its `cause` is the signal's
   * reason) out of the loop, so catch it where stopping is expected; `break` or `return` closes the stream
   * quietly. COMPACTED ends it when the history it needs was compacted away.
   */
  watch(query: WatchQuery): AsyncIterable<WatchBatch> {
    // Validate now so bad input fails at the call, not at the first iteration.
    checkWatchQuery(this.keyspace, query);
    return { [Symbol.asyncIterator]: () => watch(this.transport, this.keyspace, query) };
  }
}

/** Rethrows PERMISSION_DENIED naming what was refused and the grant it needs; anything else as it is. */
function denied(what: string, grant: string): (error: unknown) => never {
  return (error) => {
    throw isEtcdError(error, "PERMISSION_DENIED") ? refused(what, grant, error) : error;
  };
}

/** How an error names the keys of a call: `key "k"`, `prefix "jobs/"`, `keys from "a"`. */
function keysOf(range: { key?: Bytes | undefined; prefix?: Bytes | undefined; end?: Bytes | undefined }): string {
  const text = (bytes: Bytes) => JSON.stringify(typeof bytes === "string" ? bytes : new TextDecoder().decode(bytes));
  if (range.prefix !== undefined) return `prefix ${text(range.prefix)}`;
  if (range.end !== undefined) return `keys from ${text(range.key ?? "")}`;
  return `key ${text(range.key ?? "")}`;
}
