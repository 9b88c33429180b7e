// Loopback servers that misbehave on purpose, for the client's timeouts and failover: one that accepts and
// never answers (a hung member), an address where nothing listens (a stopped member), and an HTTP server
// whose every answer a test writes itself (a hostile gateway or proxy).
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer, type Server as NetServer, type Socket } from "node:net";
import { freePort } from "./ports.js";

/** A TCP server that accepts connections, reads them, and never answers. */
export async function silentServer(): Promise<{ url: string; connections(): number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.once("close", () => sockets.delete(socket));
    socket.resume();
  });
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => sockets.size,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Starts `server` on a free port of 127.0.0.1; resolves with the port. */
export async function listenOnLoopback(server: NetServer): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return address.port;
}

/** A loopback URL whose port had no listener a moment ago: connections are refused. */
export async function closedPortUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}

/** How the loopback answers a request: the request, its response to write, and its body as text. */
export type Handler = (request: IncomingMessage, response: ServerResponse, body: string) => void;

export interface HttpLoopback {
  url: string;
  /** Requests received since the last `handle`: path, body and headers. */
  seen: Array<{ path: string; body: string; headers: IncomingMessage["headers"] }>;
  /** Answers the next requests with `handler`, and forgets those seen. */
  handle(handler: Handler): void;
  close(): Promise<void>;
}

/** An HTTP server on loopback whose answers the test writes (by default an empty 200). */
export async function httpLoopback(): Promise<HttpLoopback> {
  let handler: Handler = (_request, response) => response.end();
  const seen: HttpLoopback["seen"] = [];
  const sockets = new Set<Socket>();
  const server: Server = createHttpServer((request, response) => {
    const parts: Buffer[] = [];
    request.on("data", (part: Buffer) => parts.push(part));
    request.on("end", () => {
      const body = Buffer.concat(parts).toString("utf8");
      seen.push({ path: request.url ?? "", body, headers: request.headers });
      response.on("error", () => {});
      handler(request, response, body);
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    seen,
    handle: (next) => {
      handler = next;
      seen.length = 0;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Writes `chunk` until `total` bytes are sent or the client goes away, respecting backpressure. */
/**
 * Writes `chunk` up to `total` bytes (no end by default) while the client takes them, respecting backpressure,
 * and stops when it goes away. `sent()` is how far it got: writes stall while the client reads nothing.
 */
export function pour(
  response: ServerResponse,
  chunk: Uint8Array,
  total = Number.POSITIVE_INFINITY,
): { sent: () => number } {
  let sent = 0;
  const write = (): void => {
    while (sent < total && !response.destroyed) {
      sent += chunk.byteLength;
      if (!response.write(chunk)) return void response.once("drain", write);
    }
    if (!response.destroyed) response.end();
  };
  write();
  return { sent: () => sent };
}
