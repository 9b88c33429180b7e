// Loopback servers that misbehave on purpose, for the client's timeouts and failover: one that accepts and
// never answers (a hung member), an address where nothing listens (a stopped member), and an HTTP answer that
// pours bytes for as long as the client takes them.
import type { ServerResponse } from "node:http";
import { createServer, type Socket } from "node:net";
import { freePort } from "./etcd-members.js";

/** A TCP server that accepts connections, reads them, and never answers. */
export async function silentServer(): Promise<{ url: string; connections(): number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.once("close", () => sockets.delete(socket));
    socket.resume();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    connections: () => sockets.size,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A loopback URL whose port had no listener a moment ago: connections are refused. */
export async function closedPortUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}

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
