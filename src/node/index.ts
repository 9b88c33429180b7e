/**
 * `etcd-edge/node` (Node only): a faster `fetch` for the client, over undici's keep-alive pools, with TLS options.
 *
 * @module etcd-edge/node
 */
import type { ConnectionOptions } from "node:tls";
import { Agent } from "undici";
import { invalidArgument } from "../errors/catalogue.js";
import type { Fetch, FetchInit, FetchResponse } from "../gateway/fetch.js";
import { connector, send, Targets } from "./dispatch.js";

/** Options of {@link createNodeFetch}: pool sizes and TLS. Unset TLS options keep Node's defaults. */
export interface NodeFetchOptions {
  /**
   * Keep-alive connections per endpoint for requests (watch streams never use them). Default 64: a client
   * has at most `maxConcurrentRequests` (64) requests on the wire, so none of them waits in this pool's
   * queue, where its attempt's time would run.
   */
  connections?: number | undefined;
  /**
   * How long an idle connection stays open, in milliseconds. Default 4 000, as Node's global fetch: a
   * connection idle longer may have been forgotten by a NAT or a load balancer, or have died while a Lambda
   * sandbox was frozen, and a dead one costs a request an attempt's deadline, while a new one costs a round
   * trip. (Timers overdue after a thaw run first, so a thawed sandbox starts with no stale connection.)
   */
  keepAliveTimeout?: number | undefined;
  /**
   * CA certificates (PEM) that `https:` endpoints may chain to, instead of Node's bundled roots: the CA of a
   * private etcd PKI (etcd's `--trusted-ca-file` side of the server, as `etcdctl --cacert`).
   */
  ca?: ConnectionOptions["ca"] | undefined;
  /**
   * Client certificate chain (PEM) for mutual TLS, for members started with `--client-cert-auth`
   * (as `etcdctl --cert`).
   */
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
 * A `fetch` for Node built on undici's `dispatch` over keep-alive pools: the same wire behaviour as the
 * global fetch with a fraction of its per-request overhead. Pass it as `new Etcd({ fetch })`. Edge
 * bundles never see this module: it lives behind `etcd-edge/node`.
 *
 * Watch streams hold their connection for as long as they live, so they get a dispatcher of their own with
 * no connection cap: any number of waiting lock watches never takes a connection that a request (a
 * release, a renewal) needs. Requests share a bounded keep-alive pool that is reused across handoffs.
 *
 * TLS: `ca` for a private CA, `cert` and `key` for mutual TLS; both dispatchers use them. Certificates are
 * always verified. Redirects are never followed (undici's `dispatch` does not, and the SDK refuses a 3xx).
 */
export function createNodeFetch(options: NodeFetchOptions = {}): NodeFetch {
  const keepAliveTimeout = options.keepAliveTimeout ?? 4_000;
  if ((options.cert === undefined) !== (options.key === undefined)) {
    // Either alone fails every https: connection later, each failure looking like a network outage.
    throw invalidArgument(
      "createNodeFetch: cert and key are given together (the client certificate and its private key)",
    );
  }
  const connect = connector(tlsOptions(options));
  const requests = new Agent({ connections: options.connections ?? 64, keepAliveTimeout, connect });
  const streams = new Agent({ keepAliveTimeout, connect });
  const targets = new Targets();
  const fetch = (url: string, init: FetchInit): Promise<FetchResponse> =>
    send(isStream(url) ? streams : requests, targets.of(url), init);
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

/** The gateway's long-lived streams: a watch answers for as long as it is open. */
function isStream(url: string): boolean {
  return url.endsWith("/v3/watch");
}
