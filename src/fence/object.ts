import { fenceContended, fenceRefused, storeFailed } from "../errors/catalogue.js";
import { resourceArg, tokenArg } from "./args.js";

/**
 * An object that carries its fence: the token of the holder that wrote it last, in its metadata. A fenced write
 * reads the object, refuses if its token is newer than the holder's, and writes only if the object is still the
 * version it read (`If-Match` its ETag, or `If-None-Match: *` when there was none): the store checks that
 * condition and answers 412 if another write came between. So no write of an older token lands after a newer one,
 * whatever the timing, and the newest token the store has seen is always the object's. S3 (conditional writes,
 * since 2024), R2 and other S3-compatible stores that implement them.
 */

/** The metadata that carries the fence: `x-amz-meta-etcd-edge-fence` on S3, `etcd-edge-fence` on R2. */
export const FENCE_METADATA = "etcd-edge-fence";

/**
 * How many times a fenced write that lost a race (another write came between its read and its conditional write)
 * reads and tries again before it gives up with UNAVAILABLE: on S3 and R2 alike.
 */
export const RACE_ATTEMPTS = 5;

/** A fetch that signs for your store: aws4fetch's `aws.fetch.bind(aws)`, or any `(url, init) => Response`. */
export type SignedFetch = (url: string, init: RequestInit) => Promise<Response>;

/** A fenced object write: the holder's token, the new body, and the PUT's own headers. */
export interface ObjectFenceOptions {
  /** The holder's fencing token: `lock.revision`. */
  token: number;
  /** The object's new body, from its current one (undefined when there is none yet). */
  update: (current: Response | undefined) => BodyInit | Promise<BodyInit>;
  /** Extra headers of the PUT (`content-type`, your own `x-amz-meta-*`). */
  headers?: Record<string, string> | undefined;
}

/**
 * Writes `url` (an S3-compatible object) fenced with `token`: LOCK_LOST if the object was written with a newer
 * token. `send` is your signed fetch. Resolves with the PUT's response. Two requests; a write that raced another
 * reads and tries again (the other's token decides), up to five times: then UNAVAILABLE.
 */
export async function fencedObjectWrite(
  send: SignedFetch,
  url: string,
  options: ObjectFenceOptions,
): Promise<Response> {
  const token = tokenArg(options.token);
  resourceArg(url);
  for (let attempt = 1; ; attempt++) {
    const current = await send(url, { method: "GET" });
    if (current.status !== 200 && current.status !== 404) {
      throw storeFailed(`GET ${url}`, current.status, await current.text());
    }
    const exists = current.status === 200;
    const newest = exists ? Number(current.headers.get(`x-amz-meta-${FENCE_METADATA}`) ?? 0) : 0;
    if (newest > token) {
      await current.body?.cancel();
      throw fenceRefused(url, token, newest);
    }
    const body = await options.update(exists ? current : undefined);
    // Unread, its body would hold the connection.
    if (!current.bodyUsed) await current.body?.cancel();
    const condition: Record<string, string> = exists
      ? { "if-match": current.headers.get("etag") ?? "" }
      : { "if-none-match": "*" };
    const put = await send(url, {
      method: "PUT",
      body,
      headers: { ...options.headers, ...condition, [`x-amz-meta-${FENCE_METADATA}`]: String(token) },
    });
    if (put.ok) return put;
    const text = await put.text();
    // Another write came between: read again (a newer token there refuses this one). 409: S3's conflict between
    // two conditional writes at once.
    if (put.status !== 412 && put.status !== 409) throw storeFailed(`PUT ${url}`, put.status, text);
    if (attempt === RACE_ATTEMPTS) throw fenceContended(url, token, attempt);
  }
}
