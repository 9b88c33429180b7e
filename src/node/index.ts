import type { Readable } from "node:stream";
import type { ConnectionOptions } from "node:tls";
import { Agent, request } from "undici";
import { invalidArgument } from "../errors/catalogue.js";
import { ByteBuffer } from "../gateway/byte-buffer.js";
import { type Fetch, type FetchInit, type FetchResponse, READ_BOUNDED, type ReadBounded } from "../gateway/fetch.js";

/** Options of {@link createNodeFetch}: pool sizes and TLS. Unset TLS options keep Node's defaults. */
export interface NodeFetchOptions {
  /** Keep-alive connections per endpoint for requests (watch streams never use them). Default 16. */
  connections?: number | undefined;
  /** How long an idle connection stays open, in milliseconds. Default 30 000. */
  keepAliveTimeout?: number | undefined;
  /**
   * CA certificates (PEM) that `https:` endpoints may chain to, instead of Node's bundled roots: the CA of a
   * private etcd PKI (etcd's `--trusted-ca-file` side of the server, as `etcdctl --cacert`).
   */
  ca?: ConnectionOptions["ca"] | undefined;
  /** Client certificate chain (PEM) for mutual TLS, for members started with `--client-cert-auth` (as `etcdctl --cert`). */
  cert?: ConnectionOptions["cert"] | undefined;
  /** Private key (PEM) of `cert` (as `etcdctl --key`). */
  key?: ConnectionOptions["key"] | undefined;
  /** Passphrase of an encrypted `key`. */
  passphrase?: string | undefined;
  /** The name to verify the server certificate against, when it differs from the endpoint's host. */
  servername?: string | undefined;
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
 *
 * TLS: `ca` for a private CA, `cert` and `key` for mutual TLS; both dispatchers use them. Certificates are
 * always verified. Redirects are never followed (undici's `request` does not, and the SDK refuses a 3xx).
 */
export function createNodeFetch(options: NodeFetchOptions = {}): NodeFetch {
  const keepAliveTimeout = options.keepAliveTimeout ?? 30_000;
  if ((options.cert === undefined) !== (options.key === undefined)) {
    // Either alone fails every https: connection later, each failure looking like a network outage.
    throw invalidArgument("createNodeFetch: cert and key are given together (the client certificate and its private key)");
  }
  const connect = tlsOptions(options);
  const requests = new Agent({ connections: options.connections ?? 16, keepAliveTimeout, connect });
  const streams = new Agent({ keepAliveTimeout, connect });
  const fetch = async (url: string, init: FetchInit): Promise<FetchResponse> => {
    const response = await request(url, {
      method: init.method,
      headers: init.headers,
      body: init.body,
      signal: init.signal,
      dispatcher: isStream(url) ? streams : requests,
    });
    let stream: ReadableStream<Uint8Array> | undefined;
    const answer: FetchResponse & { [READ_BOUNDED]: ReadBounded } = {
      status: response.statusCode,
      get body() {
        stream ??= webStream(response.body);
        return stream;
      },
      text: () => response.body.text(),
      [READ_BOUNDED]: (maxBytes, firstLine) => readBounded(response.body, maxBytes, firstLine),
    };
    return answer;
  };
  return Object.assign(fetch, { close: async () => void (await Promise.all([requests.close(), streams.close()])) });
}

/** Only the options given, so that undici's defaults (Node's CA bundle) stay in force for the others. */
function tlsOptions(options: NodeFetchOptions): ConnectionOptions {
  const tls: ConnectionOptions = {};
  if (options.ca !== undefined) tls.ca = options.ca;
  if (options.cert !== undefined) tls.cert = options.cert;
  if (options.key !== undefined) tls.key = options.key;
  if (options.passphrase !== undefined) tls.passphrase = options.passphrase;
  if (options.servername !== undefined) tls.servername = options.servername;
  return tls;
}

/**
 * The SDK's bounded read (see READ_BOUNDED) straight from the Node body: the same limits as its reading of
 * a web stream, without building one per answer (which cost about a tenth more client CPU per call).
 */
function readBounded(body: Readable, maxBytes: number, firstLine: boolean): Promise<Uint8Array | undefined> {
  return new Promise((resolve, reject) => {
    const received = new ByteBuffer(maxBytes);
    const finish = (result: Uint8Array | undefined, drop: boolean) => {
      body.off("data", onData).off("end", onEnd).off("error", reject);
      if (drop) {
        // Destroying an unfinished body emits undici's AbortError: expected here, and nobody else listens.
        body.on("error", () => {});
        body.destroy();
      }
      resolve(result);
    };
    const onData = (chunk: Uint8Array) => {
      const newline = firstLine ? chunk.indexOf(NEWLINE) : -1;
      const used = newline >= 0 ? chunk.subarray(0, newline) : chunk;
      if (received.length + used.byteLength > maxBytes) return finish(undefined, true);
      received.append(used);
      if (newline >= 0) finish(received.take(), true);
    };
    const onEnd = () => finish(received.take(), false);
    body.on("data", onData).once("end", onEnd).once("error", reject);
  });
}

const NEWLINE = 0x0a;

/**
 * A web stream over a Node body, with backpressure (the body pauses while a chunk waits to be read) and
 * cancellation (which destroys the body and so its connection): for watch streams, and for anyone reading
 * `body`. `Readable.toWeb` does the same at about a third more client CPU.
 */
function webStream(body: Readable): ReadableStream<Uint8Array> {
  let settled = false;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      body.on("data", (chunk: Uint8Array) => {
        if (settled) return;
        controller.enqueue(chunk);
        if ((controller.desiredSize ?? 0) <= 0) body.pause();
      });
      body.once("end", () => {
        if (!settled) controller.close();
        settled = true;
      });
      body.once("error", (error) => {
        if (!settled) controller.error(error);
        settled = true;
      });
    },
    pull() {
      body.resume();
    },
    cancel(reason) {
      settled = true;
      body.destroy(reason instanceof Error ? reason : undefined);
    },
  });
}

/** The gateway's long-lived streams: a watch answers for as long as it is open. */
function isStream(url: string): boolean {
  return url.endsWith("/v3/watch");
}
