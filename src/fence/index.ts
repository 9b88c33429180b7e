/**
 * `etcd-edge/fence`: the store that takes a write checks the lock's fencing token (`lock.revision`), so a holder
 * whose lease ended while it worked (a frozen Lambda, a GC pause, a slow network) cannot write after the next
 * holder: the store refuses it, and the helper throws LOCK_LOST. One helper per kind of store, each with no
 * dependency (you pass your own client, or run the statements it builds): SQL (Postgres, SQLite, Cloudflare D1),
 * S3-compatible object stores (conditional writes), Cloudflare R2 (a Worker's binding), DynamoDB (a condition
 * expression). Writes to etcd itself are fenced with `lock.ifHeld()`. README, "Fencing your store".
 *
 * @module etcd-edge/fence
 */
export { type DynamoFenceOptions, type DynamoWrite, dynamoFenced, dynamoRefusal, type Fenced } from "./dynamodb.js";
export { FENCE_METADATA, fencedObjectWrite, type ObjectFenceOptions, type SignedFetch } from "./object.js";
export { fencedR2Write, type R2BucketLike, type R2FenceOptions, type R2ObjectLike } from "./r2.js";
export {
  fenceTable,
  type SqlDialect,
  type SqlFence,
  type SqlFenceOptions,
  type SqlStatement,
  sqlFence,
} from "./sql.js";
