import { Readable } from "node:stream";
import { Agent, request } from "undici";
import type { Fetch, FetchResponse } from "../gateway/fetch.js";

export interface NodeFetchOptions {
  /** Keep-alive connections per endpoint. Default 16 (each open watch holds one of them). */
  connections?: number | undefined;
  /** How long an idle connection stays open, in milliseconds. Default 30 000. */
  keepAliveTimeout?: number | undefined;
}

export interface NodeFetch extends Fetch {
  /** Closes the pool's connections (open watches end). */
  close(): Promise<void>;
}

/**
 * A `fetch` for Node built on undici's `request` over a keep-alive pool: the same wire behaviour as the
 * global fetch with a fraction of its per-request overhead. Pass it as `new Etcd({ fetch })`. Edge
 * bundles never see this module: it lives behind `etcd-edge/node`.
 */
export function createNodeFetch(options: NodeFetchOptions = {}): NodeFetch {
  const agent = new Agent({
    connections: options.connections ?? 16,
    keepAliveTimeout: options.keepAliveTimeout ?? 30_000,
  });
  const fetch = async (url: string, init: Parameters<Fetch>[1]): Promise<FetchResponse> => {
    const response = await request(url, {
      method: init.method,
      headers: init.headers,
      body: init.body,
      signal: init.signal,
      dispatcher: agent,
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
  return Object.assign(fetch, { close: () => agent.close() });
}
