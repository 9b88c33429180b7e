import type { Bytes } from "./bytes.js";
import { type EtcdOptions, type ResolvedConfig, resolveConfig } from "./config.js";
import { decodeHeader, type KeyValue, type ResponseHeader } from "./codec.js";
import type { CallOptions } from "./gateway/transport.js";
import { Transport } from "./gateway/transport.js";
import * as wire from "./gateway/wire.js";
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
import { LeaseClient } from "./lease.js";
import { TxnBuilder } from "./txn-builder.js";
import { watch, type WatchBatch, type WatchQuery } from "./watch.js";
import { inspectLock, type LockInfo } from "./lock/inspect.js";
import type { Lock, LockTicket } from "./lock/lock.js";
import { resumeLock } from "./lock/resume.js";
import { Session, type KeepAliveMode, type SessionOptions } from "./lock/session.js";
import { withLock, type WithLockOptions } from "./lock/with-lock.js";

/**
 * A client for etcd's gRPC-gateway JSON API over `fetch`. Creating one sends nothing; every method is
 * one call that honours `signal` and `timeout`.
 */
export class Etcd {
  readonly lease: LeaseClient;
  /** @internal */
  readonly transport: Transport;
  /** @internal */
  readonly keyspace: Keyspace;

  constructor(options: EtcdOptions) {
    const config = resolveConfig(options);
    this.transport = new Transport(config);
    this.keyspace = new Keyspace(config.namespace);
    this.lease = new LeaseClient(this.transport, this.keyspace);
  }

  /** The validated configuration, defaults filled in. */
  get config(): ResolvedConfig {
    return this.transport.config;
  }

  /** One key, or undefined when it does not exist. */
  async get(key: Bytes, options: RangeOptions & CallOptions = {}): Promise<KeyValue | undefined> {
    const { kvs } = await this.range({ ...options, key });
    return kvs[0];
  }

  /** Keys of a range or prefix, with limit, revision, sort and filters. */
  async range(query: RangeQuery & CallOptions): Promise<RangeResult> {
    const result = await this.transport.unary(
      { path: "/v3/kv/range", body: rangeRequest(this.keyspace, query), schema: wire.rangeResponse, retry: "idempotent" },
      query,
    );
    return decodeRange(this.keyspace, result);
  }

  async put(key: Bytes, value: Bytes | undefined, options: PutOptions & CallOptions = {}): Promise<PutResult> {
    const result = await this.transport.unary(
      { path: "/v3/kv/put", body: putRequest(this.keyspace, key, value, options), schema: wire.putResponse, retry: "write" },
      options,
    );
    return decodePut(this.keyspace, result);
  }

  /** Deletes one key, or a range or prefix: `delete("k")`, `delete({ prefix: "jobs/" })`. */
  async delete(query: Bytes | DeleteQuery, options: DeleteOptions & CallOptions = {}): Promise<DeleteResult> {
    const target = typeof query === "string" || query instanceof Uint8Array ? { key: query, ...options } : { ...options, ...query };
    const result = await this.transport.unary(
      { path: "/v3/kv/deleterange", body: deleteRequest(this.keyspace, target), schema: wire.deleteRangeResponse, retry: "write" },
      target,
    );
    return decodeDelete(this.keyspace, result);
  }

  /** Discards history before `revision`. `physical` waits until the space is reclaimed. */
  async compact(revision: number, options: CallOptions & { physical?: boolean | undefined } = {}): Promise<{ header: ResponseHeader }> {
    const result = await this.transport.unary(
      { path: "/v3/kv/compaction", body: compactRequest(revision, options.physical), schema: wire.headerOnly, retry: "idempotent" },
      options,
    );
    return { header: decodeHeader(result.header) };
  }

  /** Starts a transaction: `txn().if(...).then(...).else(...).commit()`. */
  txn(): TxnBuilder {
    return new TxnBuilder(this.transport, this.keyspace);
  }

  /** Changes to a key, range or prefix, as batches per revision. See {@link WatchQuery}. */
  watch(query: WatchQuery): AsyncIterable<WatchBatch> {
    // Validate now so bad input fails at the call, not at the first iteration.
    this.keyspace.range(query);
    return { [Symbol.asyncIterator]: () => watch(this.transport, this.keyspace, query) };
  }

  /** A lease-backed session for locks and elections (one request). See {@link SessionOptions}. */
  session(options: SessionOptions = {}): Promise<Session> {
    return Session.create(this, options);
  }

  /** Runs `fn` holding lock `name`: session, lock, `fn`, release and revoke, all in `finally`. */
  withLock<T>(name: string, fn: (lock: Lock) => T | Promise<T>, options: WithLockOptions = {}): Promise<T> {
    return withLock(this, name, fn, options);
  }

  /** Who holds lock `name` (key, fencing token, lease TTL left) and how many wait, without joining the line. */
  inspectLock(name: string, options: CallOptions = {}): Promise<LockInfo> {
    return inspectLock(this, name, options);
  }

  /** Takes over a lock from its `lock.toJSON()` ticket, after checking it is still held. */
  resumeLock(ticket: LockTicket, options: CallOptions & { keepAlive?: KeepAliveMode | undefined } = {}): Promise<Lock> {
    return resumeLock(this, ticket, options);
  }
}
