// A loopback relay in front of one etcd member that injects network faults on demand: reset every
// connection, go silent (a paused member, or a NAT that dropped the flow), swallow one request, drop the
// answer of one applied request, add latency, refuse connections like a dead member. It frames HTTP/1.1
// (test/support/http-framing.ts) so a fault hits one request on a keep-alive connection, not a random
// byte. Node-only; a superset of test/etcd/tcp-proxy.ts.
import { connect, createServer, type Server, type Socket } from "node:net";
import { DelayPipe } from "./delay-pipe.ts";
import { HttpFramer, type Piece, parseRequestLine } from "./http-framing.ts";
import { sleep, wallNow } from "./time.ts";

export interface SniffedRequest {
  method: string;
  path: string;
  /** `performance.timeOrigin + performance.now()` when the fault hit. */
  at: number;
}

export interface RequestMatch {
  /** Only a request to exactly this path (query ignored), e.g. `/v3/kv/txn`. Default: any request. */
  path?: string | undefined;
  /** The fault disarms itself if no matching request came within this many ms. Default 10 000. */
  within?: number | undefined;
}

export interface SilenceOptions {
  /**
   * false (default): a paused member. Nothing moves either way, bytes wait, and everything flows again on
   * resume(). true: a NAT that dropped the flows. Bytes are discarded and every connection open now (or
   * opened before resume()) stays silent for good, though the client's socket stays open.
   */
  drop?: boolean | undefined;
  /** Resume by itself after this many ms. */
  ms?: number | undefined;
}

export interface FaultProxyStats {
  accepted: number;
  /** Connections reset by reset(). */
  reset: number;
  swallowed: number;
  answersDropped: number;
}

export interface FaultProxy {
  /** `http://127.0.0.1:<port>`: use it in place of the target. */
  readonly url: string;
  readonly target: string;
  /** Open client connections. */
  connections(): number;
  /** Resets (RST) every open connection now; returns how many. New connections are still accepted. */
  reset(): number;
  /** Stops forwarding in both directions while keeping every connection open; see SilenceOptions. */
  silence(options?: SilenceOptions): void;
  /** Ends a silence: held bytes flow again; connections silenced with `drop` stay silent. */
  resume(): void;
  /**
   * The next matching request is read and never forwarded; its connection stays open and silent from then
   * on. Resolves with the request when that happens, or undefined once `within` passes or disarm() runs.
   */
  swallowNext(match?: RequestMatch): Promise<SniffedRequest | undefined>;
  /**
   * The next matching request is forwarded; when its answer starts to arrive (so the server has applied it)
   * the answer is discarded and the client's connection is reset (`then: "close"`, default) or kept open and
   * silent (`then: "silence"`).
   */
  dropNextAnswer(
    match?: RequestMatch & { then?: "close" | "silence" | undefined },
  ): Promise<SniffedRequest | undefined>;
  /** Delays every forwarded chunk by `ms` in each direction (0: none). Order is kept. */
  setLatency(ms: number): void;
  /** Stops listening, so new connections are refused as by a dead member; open ones are left alone. */
  refuse(): Promise<void>;
  /** Listens again on the same port. */
  accept(): Promise<void>;
  /** Cancels armed swallowNext/dropNextAnswer faults (their promises resolve undefined). */
  disarm(): void;
  stats(): FaultProxyStats;
  /** Disarms, resets everything and stops listening. */
  close(): Promise<void>;
}

interface Armed {
  kind: "swallow" | "drop-answer";
  path: string | undefined;
  then: "close" | "silence";
  settle: (hit: SniffedRequest | undefined) => void;
}

type Fate = "forward" | "swallow" | "drop-answer";

const DEFAULT_WITHIN_MS = 10_000;

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const { hostname, port } = new URL(target);
  if (hostname !== "127.0.0.1") throw new Error(`fault proxy targets 127.0.0.1 only, got ${target}`);
  const links = new Set<Link>();
  const armed: Armed[] = [];
  const stats: FaultProxyStats = { accepted: 0, reset: 0, swallowed: 0, answersDropped: 0 };
  let holding = false;
  let dropping = false;
  let resumeTimer: ReturnType<typeof setTimeout> | undefined;
  let latency = 0;

  const proxy: ProxyState = {
    latency: () => latency,
    holding: () => holding,
    /** Takes the first armed fault matching this request, if any. */
    claim(method, path) {
      const i = armed.findIndex((a) => a.path === undefined || a.path === path);
      if (i < 0) return undefined;
      const [fault] = armed.splice(i, 1);
      const hit = { method, path, at: wallNow() };
      return { kind: fault!.kind, then: fault!.then, hit: () => fault!.settle(hit) };
    },
    count(what) {
      stats[what]++;
    },
    forget(link) {
      links.delete(link);
    },
  };

  const onConnection = (client: Socket) => {
    stats.accepted++;
    const link = new Link(client, proxy, dropping ? undefined : { host: hostname, port: Number(port) });
    links.add(link);
  };
  // refuse() closes the listener and accept() opens a new one on the same port: a closed server's callback
  // waits for its connections, which a refusing member leaves open.
  let server = createServer(onConnection);
  const listenPort = await listen(server, 0);
  const stopListening = () => {
    if (server.listening) server.close();
  };

  const arm = (kind: Armed["kind"], match: RequestMatch, then: Armed["then"]) =>
    new Promise<SniffedRequest | undefined>((resolve) => {
      const timer = setTimeout(() => fault.settle(undefined), match.within ?? DEFAULT_WITHIN_MS);
      const fault: Armed = {
        kind,
        path: match.path,
        then,
        settle: (hit) => {
          clearTimeout(timer);
          const i = armed.indexOf(fault);
          if (i >= 0) armed.splice(i, 1);
          resolve(hit);
        },
      };
      armed.push(fault);
    });

  const resume = () => {
    clearTimeout(resumeTimer);
    resumeTimer = undefined;
    holding = false;
    dropping = false;
    for (const link of links) link.unhold();
  };
  const disarm = () => {
    for (const fault of [...armed]) fault.settle(undefined);
  };
  const reset = () => {
    const n = links.size;
    for (const link of [...links]) link.reset();
    stats.reset += n;
    return n;
  };

  return {
    url: `http://127.0.0.1:${listenPort}`,
    target,
    connections: () => links.size,
    reset,
    silence(options = {}) {
      clearTimeout(resumeTimer);
      if (options.drop) {
        dropping = true;
        for (const link of links) link.silence();
      } else {
        holding = true;
        for (const link of links) link.hold();
      }
      if (options.ms !== undefined) resumeTimer = setTimeout(resume, options.ms);
    },
    resume,
    swallowNext: (match = {}) => arm("swallow", match, "silence"),
    dropNextAnswer: (match = {}) => arm("drop-answer", match, match.then ?? "close"),
    setLatency(ms) {
      if (!(ms >= 0)) throw new Error(`latency must be >= 0 ms, got ${ms}`);
      latency = ms;
    },
    refuse: async () => stopListening(),
    accept: async () => {
      if (server.listening) return;
      // The port was free a moment ago; another process may grab it meanwhile, so retry briefly.
      for (let attempt = 0; ; attempt++) {
        server = createServer(onConnection);
        try {
          await listen(server, listenPort);
          return;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE" || attempt >= 50) throw error;
          await sleep(100);
        }
      }
    },
    disarm,
    stats: () => ({ ...stats }),
    close: async () => {
      disarm();
      resume();
      stopListening();
      reset();
    },
  };
}

/** What a link needs from its proxy. */
interface ProxyState {
  latency(): number;
  holding(): boolean;
  claim(method: string, path: string): { kind: Armed["kind"]; then: Armed["then"]; hit: () => void } | undefined;
  count(what: "swallowed" | "answersDropped"): void;
  forget(link: Link): void;
}

/**
 * One client connection and its upstream. "open" forwards; "silent" keeps the client's socket open, reads
 * and discards what it sends, and writes nothing (the upstream is gone).
 */
class Link {
  readonly #client: Socket;
  readonly #upstream: Socket | undefined;
  readonly #proxy: ProxyState;
  #state: "open" | "silent" | "closed" = "open";
  readonly #requests = new HttpFramer("request");
  readonly #answers: HttpFramer;
  /** Per request index: what happens to it, and its method (a HEAD's answer has no body). */
  readonly #fates = new Map<number, { fate: Fate; method: string; then: Armed["then"]; hit: () => void }>();
  readonly #toUpstream: DelayPipe | undefined;
  readonly #toClient: DelayPipe | undefined;

  constructor(client: Socket, proxy: ProxyState, upstreamAt: { host: string; port: number } | undefined) {
    this.#client = client;
    this.#proxy = proxy;
    this.#answers = new HttpFramer("response", (i) => this.#fates.get(i)?.method);
    client.setNoDelay(true);
    client.on("error", () => this.#close());
    client.on("close", () => this.#close());
    if (upstreamAt === undefined) {
      // Opened during a dropping silence: nothing will ever answer on it.
      this.#state = "silent";
      client.on("data", () => {});
      return;
    }
    const upstream = connect(upstreamAt);
    upstream.setNoDelay(true);
    this.#upstream = upstream;
    this.#toUpstream = new DelayPipe(client, upstream, proxy);
    this.#toClient = new DelayPipe(upstream, client, proxy);
    client.on("data", (chunk: Buffer) => this.#fromClient(chunk));
    client.on("end", () => this.#toUpstream?.end());
    upstream.on("data", (chunk: Buffer) => this.#fromUpstream(chunk));
    upstream.on("end", () => {
      if (this.#state !== "open") return;
      for (const piece of this.#answers.close()) this.#answer(piece);
      this.#toClient?.end();
    });
    // A dead member's RST reaches the client as an RST, so it sees what a direct connection would.
    upstream.on("error", () => {
      if (this.#state === "open") this.reset();
    });
    upstream.on("close", () => {
      if (this.#state === "open") this.#toClient?.end();
    });
    if (proxy.holding()) this.hold();
  }

  hold(): void {
    this.#toUpstream?.hold();
    this.#toClient?.hold();
  }

  unhold(): void {
    this.#toUpstream?.unhold();
    this.#toClient?.unhold();
  }

  silence(): void {
    if (this.#state !== "open") return;
    this.#state = "silent";
    this.#toUpstream?.discard();
    this.#toClient?.discard();
    this.#upstream?.destroy();
  }

  reset(): void {
    if (this.#state === "closed") return;
    this.#client.resetAndDestroy();
    this.#upstream?.destroy();
    this.#close();
  }

  #close(): void {
    if (this.#state === "closed") return;
    this.#state = "closed";
    this.#toUpstream?.discard();
    this.#toClient?.discard();
    this.#client.destroy();
    this.#upstream?.destroy();
    this.#proxy.forget(this);
  }

  #fromClient(chunk: Buffer): void {
    if (this.#state !== "open") return;
    for (const piece of this.#requests.feed(chunk)) {
      if (this.#state !== "open") return;
      if (piece.kind === "head") {
        const { method, path } = parseRequestLine(piece.startLine);
        const fault = this.#proxy.claim(method, path);
        this.#fates.set(piece.index, {
          fate: fault?.kind ?? "forward",
          method,
          then: fault?.then ?? "close",
          hit: fault?.hit ?? (() => {}),
        });
        if (fault?.kind === "swallow") {
          this.#proxy.count("swallowed");
          this.silence();
          fault.hit();
          return;
        }
      }
      if (piece.kind !== "end") this.#toUpstream!.write(piece.bytes);
    }
  }

  #fromUpstream(chunk: Buffer): void {
    if (this.#state !== "open") return;
    for (const piece of this.#answers.feed(chunk)) {
      this.#answer(piece);
      if (this.#state !== "open") return;
    }
  }

  #answer(piece: Piece): void {
    if (piece.kind === "end") {
      if (piece.index >= 0) this.#fates.delete(piece.index);
      return;
    }
    if (piece.kind === "head") {
      const fate = this.#fates.get(piece.index);
      if (fate?.fate === "drop-answer") {
        // The server has answered, so it has applied the request: the client never learns it.
        this.#proxy.count("answersDropped");
        if (fate.then === "close") this.reset();
        else this.silence();
        fate.hit();
        return;
      }
    }
    this.#toClient!.write(piece.bytes);
  }
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once("error", onError);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", onError);
      const address = server.address();
      if (address === null || typeof address === "string") reject(new Error("fault proxy has no TCP address"));
      else resolve(address.port);
    });
  });
}
