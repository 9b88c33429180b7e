import { fenceContended, fenceRefused } from "../errors/catalogue.js";
import { resourceArg, tokenArg } from "./args.js";
import { FENCE_METADATA, RACE_ATTEMPTS } from "./object.js";

/** What of a Worker's R2 object a fenced write reads: its ETag and custom metadata (R2's `R2Object`). */
export interface R2ObjectLike {
  /** The version a conditional put names (`onlyIf: { etagMatches }`). */
  etag: string;
  /** Where the fence is kept (`etcd-edge-fence`), beside your own metadata. */
  customMetadata?: Record<string, string> | undefined;
}

/**
 * The part of a Worker's R2 binding a fenced write uses (R2's `R2Bucket`): `get`, and `put` with `onlyIf`, which
 * answers null when its condition fails.
 */
export interface R2BucketLike<O extends R2ObjectLike = R2ObjectLike> {
  /** The object, or null when there is none. */
  get(key: string): Promise<O | null>;
  /** Writes it if `onlyIf` holds; null if it did not. */
  put(
    key: string,
    value: never,
    options: { onlyIf: { etagMatches: string } | Headers; customMetadata: Record<string, string> },
  ): Promise<R2ObjectLike | null>;
}

/** A fenced R2 write: the holder's token and the new value. */
export interface R2FenceOptions<O extends R2ObjectLike> {
  /** The holder's fencing token: `lock.revision`. */
  token: number;
  /** The object's new value, from its current one (null when there is none yet). */
  update: (current: O | null) => unknown;
}

/**
 * Writes `key` in an R2 bucket (a Worker's binding) fenced with `token`, as `fencedObjectWrite` does on S3: reads it,
 * refuses (LOCK_LOST) if its `etcd-edge-fence` metadata holds a newer token, and puts the new value only if the
 * object is still the version read (`onlyIf` its ETag; `If-None-Match: *` when there was none). Resolves with
 * the put's object. A write that keeps losing its race gives up as on S3: UNAVAILABLE.
 */
export async function fencedR2Write<O extends R2ObjectLike>(
  bucket: R2BucketLike<O>,
  key: string,
  options: R2FenceOptions<O>,
): Promise<R2ObjectLike> {
  const token = tokenArg(options.token);
  resourceArg(key);
  for (let attempt = 1; ; attempt++) {
    const current = await bucket.get(key);
    const newest = Number(current?.customMetadata?.[FENCE_METADATA] ?? 0);
    if (newest > token) throw fenceRefused(key, token, newest);
    const value = (await options.update(current)) as never;
    const onlyIf = current === null ? new Headers({ "if-none-match": "*" }) : { etagMatches: current.etag };
    const customMetadata = { ...current?.customMetadata, [FENCE_METADATA]: String(token) };
    const put = await bucket.put(key, value, { onlyIf, customMetadata });
    if (put !== null) return put;
    // Another write came between (the put answered null): read again, as on S3.
    if (attempt === RACE_ATTEMPTS) throw fenceContended(key, token, attempt);
  }
}
