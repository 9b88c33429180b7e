// A loopback TCP relay in front of an etcd member, so a test can cut live connections (e.g. a watch
// stream) without touching the server. It relays bytes, whatever the protocol (HTTP/1.1, gRPC's HTTP/2),
// optionally each direction late by a fixed delay (the bench's round-trip section).
import { connect, createServer, type Socket } from "node:net";
import { DelayPipe } from "./delay-pipe.ts";

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

export interface TcpProxyOptions {
  /**
   * Delays every chunk by this many ms in each direction (a round trip then takes twice as long), in order;
   * each chunk waits for its own due time only. As on such a network, a new connection's handshake costs a
   * round trip: nothing crosses either way before it is over. Default 0: bytes are piped as they come.
   */
  oneWayMs?: number | undefined;
  /** Told, for each delayed chunk, how many ms past its due time it left (how late the relay's timers ran). */
  onLate?: ((ms: number) => void) | undefined;
  /**
   * Cuts each connection (a reset, as `cutAll` does) this many ms after the server's first bytes on it, so a
   * stream is answered and then breaks, every time it is reopened. Default: never. Not with `oneWayMs`.
   */
  cutAfterAnswerMs?: number | undefined;
}

export async function startTcpProxy(target: string, options: TcpProxyOptions = {}): Promise<TcpProxy> {
  const { hostname, port } = new URL(target);
  if (hostname !== "127.0.0.1") throw new Error(`tcp proxy targets 127.0.0.1 only, got ${target}`);
  const oneWayMs = options.oneWayMs ?? 0;
  if (!(oneWayMs >= 0)) throw new Error(`tcp proxy delay must be >= 0 ms, got ${oneWayMs}`);
  const pairs = new Set<[Socket, Socket]>();
  const cutAfter = options.cutAfterAnswerMs;
  if (cutAfter !== undefined && !(cutAfter >= 0 && oneWayMs === 0))
    throw new Error(`tcp proxy cutAfterAnswerMs must be >= 0 ms, without oneWayMs; got ${cutAfter}`);

  const cut = (pair: [Socket, Socket]) => {
    pairs.delete(pair);
    // resetAndDestroy sends RST, so the client sees a hard failure, like a dropped network.
    pair[0].resetAndDestroy();
    pair[1].destroy();
  };

  const server = createServer((client) => {
    const upstream = connect({ host: hostname, port: Number(port) });
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const teardown = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    if (oneWayMs === 0) {
      // Either side closing or failing ends both: a half-open relay would hide the cut from the client.
      for (const socket of pair) {
        socket.once("close", teardown);
        socket.once("error", teardown);
      }
      client.pipe(upstream);
      upstream.pipe(client);
      if (cutAfter !== undefined) {
        upstream.once("data", () => {
          const timer = setTimeout(() => cut(pair), cutAfter);
          client.once("close", () => clearTimeout(timer));
        });
      }
    } else {
      delayed(pair, oneWayMs, teardown, options.onLate);
    }
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("tcp proxy has no TCP address");

  const cutAll = () => {
    for (const pair of pairs) cut(pair);
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

/**
 * Each direction through a DelayPipe. The relay accepts at once, so the client's handshake took no time:
 * what either side sends first waits until a round trip after the accept, then its one-way delay. A side
 * that closes ends the other once what it sent before has gone (the close travels as late as its bytes); a
 * failure ends both at once. Small writes go out at once (no Nagle): a chunk held for its delay must not
 * then wait for the acknowledgement of the one before it.
 */
function delayed(
  pair: [Socket, Socket],
  oneWayMs: number,
  teardown: () => void,
  onLate: ((ms: number) => void) | undefined,
): void {
  const handshakeEnds = performance.now() + 2 * oneWayMs;
  const delay = {
    latency: () => oneWayMs + Math.max(0, handshakeEnds - performance.now()),
    late: (ms: number) => onLate?.(ms),
  };
  let closed = 0;
  for (const [from, to] of [pair, [pair[1], pair[0]]] as const) {
    from.setNoDelay(true);
    const pipe = new DelayPipe(from, to, delay);
    from.on("data", (chunk: Buffer) => pipe.write(chunk));
    from.once("error", teardown);
    from.once("close", () => {
      pipe.end();
      if (++closed === 2) teardown();
    });
  }
}
