// A loopback TCP relay in front of an etcd member, so a test can cut live connections (e.g. a watch
// stream) without touching the server.
import { connect, createServer, type Socket } from "node:net";

export interface TcpProxy {
  /** `http://127.0.0.1:<port>`: use it in place of the target. */
  readonly url: string;
  /** Destroys every open client+upstream socket pair now; new connections are still accepted. */
  cutAll(): void;
  /** Open client connections. */
  connections(): number;
  /** Cuts everything and stops listening. */
  close(): Promise<void>;
}

export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const { hostname, port } = new URL(target);
  if (hostname !== "127.0.0.1") throw new Error(`tcp proxy targets 127.0.0.1 only, got ${target}`);
  const pairs = new Set<[Socket, Socket]>();

  const server = createServer((client) => {
    const upstream = connect({ host: hostname, port: Number(port) });
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const teardown = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    // Either side closing or failing ends both: a half-open relay would hide the cut from the client.
    for (const socket of pair) {
      socket.once("close", teardown);
      socket.once("error", teardown);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("tcp proxy has no TCP address");

  const cutAll = () => {
    for (const [client, upstream] of pairs) {
      // resetAndDestroy sends RST, so the client sees a hard failure, like a dropped network.
      client.resetAndDestroy();
      upstream.destroy();
    }
    pairs.clear();
  };

  return {
    url: `http://127.0.0.1:${address.port}`,
    cutAll,
    connections: () => pairs.size,
    close: async () => {
      cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
