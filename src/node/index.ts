import { Readable } from "node:stream";
import { Agent, request } from "undici";
import type { Fetch, FetchInit, FetchResponse } from "../gateway/fetch.js";

export interface NodeFetchOptions {
  /** Keep-alive connections per endpoint for requests (watch streams never use them). Default 16. */
  connections?: number | undefined;
  /** How long an idle connection stays open, in milliseconds. Default 30 000. */
  keepAliveTimeout?: number | undefined;
}

/** A {@link Fetch} with a `close()` for its connection pools. */
export interface NodeFetch extends Fetch {
  /** Closes the pools' connections (open watches end). */
  close(): Promise<void>;
}

/**
 * A `fetch` for Node built on undici's `request` over keep-alive pools: the same wire behaviour as the
 * global fetch with a fraction of its per-request overhead. Pass it as `new Etcd({ fetch })`. Edge
 * bundles never see this module: it lives behind `etcd-edge/node`.
 *
 * Watch streams hold their connection for as long as they live, so they get a dispatcher of their own with
 * no connection cap: any number of waiting lock watches never takes a connection that a request (a
 * release, a renewal) needs. Requests share a bounded keep-alive pool that is reused across handoffs.
 */
export function createNodeFetch(options: NodeFetchOptions = {}): NodeFetch {
  const keepAliveTimeout = options.keepAliveTimeout ?? 30_000;
  const requests = new Agent({ connections: options.connections ?? 16, keepAliveTimeout });
  const streams = new Agent({ keepAliveTimeout });
  const fetch = async (url: string, init: FetchInit): Promise<FetchResponse> => {
    const response = await request(url, {
      method: init.method,
      headers: init.headers,
      body: init.body,
      signal: init.signal,
      dispatcher: isStream(url) ? streams : requests,
    });
    let stream: ReadableStream<Uint8Array> | undefined;
    return {
      status: response.statusCode,
      get body() {
        stream ??= Readable.toWeb(response.body) as ReadableStream<Uint8Array>;
        return stream;
      },
      text: () => response.body.text(),
    };
  };
  return Object.assign(fetch, { close: async () => void (await Promise.all([requests.close(), streams.close()])) });
}

/** The gateway's long-lived streams: a watch answers for as long as it is open. */
function isStream(url: string): boolean {
  return url.endsWith("/v3/watch");
}
