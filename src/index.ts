/**
 * `etcd-edge`: the client (KV, txn, lease, watch), sessions, locks, elections and the recipes. Platform-neutral
 * ESM: no Node built-ins.
 *
 * @module etcd-edge
 */
export { Etcd } from "./etcd.js";
export { EtcdClient } from "./api/client.js";
export type { EtcdOptions, ResolvedConfig } from "./api/config.js";
export type { Clock } from "./api/clock.js";
export type { GatewayConfig, GatewayOptions } from "./gateway/config.js";
export type { Bytes } from "./api/bytes.js";
export type { KeyValue, LeaseId, ResponseHeader } from "./api/codec.js";
export type { KeyRange } from "./api/keyspace.js";
export type {
  DeleteOptions,
  DeleteQuery,
  DeleteResult,
  PutOptions,
  PutResult,
  RangeOptions,
  RangeQuery,
  RangeResult,
  SortOrder,
  SortTarget,
} from "./api/kv.js";
export { cmp, Compare, op, Op } from "./api/txn.js";
export type { AnyOp, CompareOperator, OpResults, TxnResult } from "./api/txn.js";
export { PreparedTxn, TxnBuilder } from "./api/txn-builder.js";
export { LeaseClient } from "./api/lease.js";
export type { LeaseGrantResult, LeaseKeepAliveResult, LeaseListResult, LeaseTimeToLiveResult } from "./api/lease.js";
export type { WatchBatch, WatchEvent, WatchOptions, WatchQuery } from "./api/watch.js";
export type { CallOptions } from "./gateway/transport.js";
export type { RetryPolicy } from "./gateway/retry-policy.js";
export type { Fetch, FetchInit, FetchResponse } from "./gateway/fetch.js";
import type { LeaseSession as Lease } from "./lock/lease/lease-session.js";
import type { Held as Holding, HeldKey as KeyHolding } from "./lock/hold/held.js";
/**
 * A lease owned by this process and what it trusts of it: the base of {@link Session}. A type alias, not a class
 * export: it has no constructor of its own for users (a session is made by `etcd.session()`).
 */
export type LeaseSession = Lease;
export type { SessionOptions } from "./lock/lease/lease-grant.js";
export type { KeepAliveMode } from "./lock/lease/lease-session.js";
export { Session } from "./lock/session.js";
export { Mutex } from "./lock/mutex/mutex.js";
export type { LockOptions, WaitOptions } from "./lock/acquire/acquisition.js";
export type { WaitMode } from "./lock/line/standing.js";
export { Lock } from "./lock/mutex/lock.js";
export type { LockTicket } from "./lock/mutex/lock.js";
export type { ResumeOptions } from "./lock/mutex/resume.js";
export { Election } from "./lock/election/election.js";
export type { Leader } from "./lock/election/election.js";
/** Anything held under a session's lease: a lock, a permit, a read or write lock, several locks, leadership. */
export type Held<S extends Lease = Lease> = Holding<S>;
/** A holding of one key: a lock, a permit, a read or write lock, leadership. */
export type HeldKey<S extends Lease = Lease> = KeyHolding<S>;
export { Semaphore } from "./lock/semaphore/semaphore.js";
export type { SemaphoreOptions } from "./lock/semaphore/semaphore.js";
export { Permit } from "./lock/semaphore/permit.js";
export { RWLock } from "./lock/rwlock/rwlock.js";
export { ReadLock } from "./lock/rwlock/read-lock.js";
export { WriteLock } from "./lock/rwlock/write-lock.js";
export { MultiLock } from "./lock/lock-all/multi-lock.js";
export type { LeaseMode, WithLockOptions } from "./lock/with-lock.js";
export {
  EtcdBadResponseError,
  EtcdCompactedError,
  EtcdError,
  EtcdServerError,
  EtcdTimeoutError,
  isEtcdError,
} from "./errors/etcd-error.js";
export type { EtcdErrorCode, EtcdErrorDetails } from "./errors/etcd-error.js";
export type {
  EtcdEvent,
  EventHandler,
  FailoverEvent,
  HoldingKind,
  LockAcquiredEvent,
  LockDelayedEvent,
  LockLostEvent,
  LockReleasedEvent,
  LockWaitingEvent,
  RequestEvent,
  RetryEvent,
  SessionLostEvent,
  SessionRenewedEvent,
  SessionRenewFailedEvent,
  WatchHeldBackEvent,
  WatchReconnectedEvent,
} from "./events/events.js";
export { VERSION } from "./version.js";
