export { Etcd } from "./client.js";
export type { EtcdOptions, ResolvedConfig } from "./config.js";
export type { Bytes } from "./bytes.js";
export type { KeyValue, LeaseId, ResponseHeader } from "./codec.js";
export type { KeyRange } from "./keyspace.js";
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
} from "./kv.js";
export { cmp, Compare, op, Op } from "./txn.js";
export type { AnyOp, CompareOperator, OpResults, TxnResult } from "./txn.js";
export { TxnBuilder } from "./txn-builder.js";
export { LeaseClient } from "./lease.js";
export type { LeaseGrantResult, LeaseKeepAliveResult, LeaseListResult, LeaseTimeToLiveResult } from "./lease.js";
export type { WatchBatch, WatchEvent, WatchOptions, WatchQuery } from "./watch.js";
export type { CallOptions, RetryPolicy } from "./gateway/transport.js";
export type { Fetch, FetchInit, FetchResponse } from "./gateway/fetch.js";
export { Session } from "./lock/session.js";
export type { KeepAliveMode, SessionOptions } from "./lock/session.js";
export { Mutex } from "./lock/mutex.js";
export type { LockOptions } from "./lock/mutex.js";
export { Lock } from "./lock/lock.js";
export type { LockTicket } from "./lock/lock.js";
export { Election } from "./lock/election.js";
export type { Leader } from "./lock/election.js";
export type { LockInfo } from "./lock/inspect.js";
export type { WithLockOptions } from "./lock/with-lock.js";
export type { WaitMode, WaitOptions } from "./lock/queue.js";
export {
  EtcdBadResponseError,
  EtcdCompactedError,
  EtcdError,
  EtcdServerError,
  EtcdTimeoutError,
  isEtcdError,
} from "./errors.js";
export type { EtcdErrorCode } from "./errors.js";
export { VERSION } from "./version.js";
