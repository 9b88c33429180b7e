// Loopback endpoints that fail in the ways a user meets: a port that resets connections, a plain-HTTP server
// (to be reached with https://), TLS servers with a given certificate, some demanding a client certificate.
// With loopback.ts's closed port, port 1 and an unresolvable host, they cover every cause a network error
// message names. No vitest import: runtimes tests start them for child processes too.
import { createServer as createHttpServer } from "node:http";
import { createServer, type Server, type Socket } from "node:net";
import { createServer as createTlsServer, type TlsOptions } from "node:tls";
import { listenOnLoopback } from "./loopback.js";

/** A port fetch refuses to use (a "bad port" of the Fetch standard): nothing is sent. */
export const BAD_PORT_URL = "http://127.0.0.1:1";
/** `.invalid` never resolves (RFC 6761). */
export const UNKNOWN_HOST_URL = "http://nonexistent.invalid:2379";

export interface Endpoint {
  url: string;
  close(): Promise<void>;
}

async function serve(server: Server, scheme: "http" | "https"): Promise<Endpoint> {
  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.once("close", () => sockets.delete(socket));
  });
  // A TLS server's failed handshakes are the point here.
  server.on("tlsClientError", () => {});
  const port = await listenOnLoopback(server);
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Resets every connection: at once (`"accept"`: the request is never written) or once the request's first
 * bytes came (`"request"`: it may have been applied, as far as the client can tell).
 */
export function resettingServer(when: "accept" | "request"): Promise<Endpoint> {
  return serve(
    createServer((socket) => {
      if (when === "accept") socket.resetAndDestroy();
      else socket.once("data", () => socket.resetAndDestroy());
    }),
    "http",
  );
}

/** A plain-HTTP server, to be reached with https:// (its URL says https). */
export function plainHttpServer(): Promise<Endpoint> {
  return serve(
    createHttpServer((_request, response) => response.end("{}")),
    "https",
  );
}

/** A TLS server with `options` (its certificate, and `requestCert` to demand a client's) that answers `{}`. */
export function tlsServer(options: TlsOptions): Promise<Endpoint> {
  const answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
  return serve(
    createTlsServer(options, (socket) => socket.end(answer)),
    "https",
  );
}
