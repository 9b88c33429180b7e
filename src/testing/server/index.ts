/**
 * `etcd-edge/testing/server` (Node only): the in-memory etcd served over real HTTP on a loopback port, for clients
 * that are not in the test's process or not in JavaScript: etcdctl-free curl scripts, Go or Python gateway
 * clients, a second Node process. Streaming watch and keepalive work as on etcd's gateway.
 *
 * @module etcd-edge/testing/server
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createMockEtcd, type MockEtcd, type MockEtcdOptions } from "../mock.js";
import { bridge } from "./bridge.js";

/** Where `serveMockEtcd()` listens and which mock it serves; the mock's own options are accepted too. */
export interface MockEtcdServerOptions extends MockEtcdOptions {
  /** TCP port; 0 (the default) picks a free one. */
  port?: number | undefined;
  /** Interface to listen on; default 127.0.0.1 (loopback only). */
  host?: string | undefined;
  /**
   * The mock to serve; by default a new one with these options and a "wall" clock, since clients of a server
   * usually cannot call advance().
   */
  mock?: MockEtcd | undefined;
}

/** A mock etcd served over real HTTP, for clients outside the test process (curl, another language). */
export interface MockEtcdServer {
  /** The client URL, e.g. "http://127.0.0.1:40123". */
  readonly url: string;
  /** The port it listens on (the one picked when asked for 0). */
  readonly port: number;
  /** The in-memory member behind it: inspect it, advance its clock, inject faults. */
  readonly mock: MockEtcd;
  /** Stops listening, cuts open streams and connections; closes the mock too when the server created it. */
  close(): Promise<void>;
}

/** Serves a mock etcd on a loopback port with real HTTP/1.1 (as the gateway: no HTTP/2). */
export async function serveMockEtcd(options: MockEtcdServerOptions = {}): Promise<MockEtcdServer> {
  const { port = 0, host = "127.0.0.1", mock: given, ...mockOptions } = options;
  const mock = given ?? createMockEtcd({ clock: "wall", ...mockOptions });
  const server: Server = createServer((req, res) => bridge(mock, req, res));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}`;
  mock.advertise([url]);
  return {
    url,
    port: address.port,
    mock,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      if (!given) mock.close();
      await closed;
    },
  };
}
