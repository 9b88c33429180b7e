// etcd-edge/node's fetch on its own, against a node:http server on loopback: the bounded read (READ_BOUNDED)
// and its dropping of the rest with the connection, the web stream of an error body, abort before and after
// the head, and bytes that arrive before anyone reads them (held up to a small limit, then the connection
// waits), so that a server cannot grow the client's memory by sending what nobody asked for yet.
import { getEventListeners } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type FetchResponse, READ_BOUNDED, type ReadBounded } from "../../src/gateway/fetch.js";
import { createNodeFetch, type NodeFetch } from "../../src/node/index.js";
import { sleep, until, within } from "../support/async.js";
import { pour } from "../support/loopback.js";

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

const MiB = 1024 * 1024;
const WAIT = 5_000;
/** A dropped connection closes at once; the server's own idle timeout would close it only after seconds. */
const PROMPT = 1_000;

let server: Server;
let base: string;
let handler: Handler;
/** Requests the server received, with the socket each came on. */
let received: Array<{ path: string; socket: Socket }>;
let fetch: NodeFetch;

beforeAll(async () => {
  server = createServer((request, response) => {
    received.push({ path: request.url ?? "", socket: request.socket });
    response.on("error", () => {});
    // The request body is drained first so that a handler may answer at once.
    request.resume();
    request.on("end", () => handler(request, response));
  });
  server.on("connection", (socket: Socket) => {
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  base = `http://127.0.0.1:${address.port}`;
});

beforeEach(async () => {
  // Each test on fresh connections: a socket left over from the one before must not count as this one's.
  await fetch?.close();
  fetch = createNodeFetch({ connections: 2 });
  received = [];
  handler = (_request, response) => response.end();
});

afterAll(async () => {
  await fetch?.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function post(path: string, signal = new AbortController().signal): Promise<FetchResponse> {
  return fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
    signal,
    redirect: "manual",
  });
}

function readBounded(response: FetchResponse, maxBytes: number, firstLine = false): Promise<Uint8Array | undefined> {
  const read = (response as { [READ_BOUNDED]?: ReadBounded })[READ_BOUNDED];
  if (read === undefined) throw new Error("no READ_BOUNDED on the response");
  return read(maxBytes, firstLine);
}

/** Resolves once `socket` is closed: the client dropped the connection. */
function closed(socket: Socket): Promise<void> {
  return socket.destroyed ? Promise.resolve() : new Promise((resolve) => socket.once("close", () => resolve()));
}

/** Reads a web stream to its end. */
async function drain(body: ReadableStream<Uint8Array> | null): Promise<number> {
  if (body === null) throw new Error("no body");
  let bytes = 0;
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return bytes;
    bytes += value.byteLength;
  }
}

/** A second request, answered `{}`, goes on the connection of the first: the first's answer kept it. */
async function expectSecondOnSameConnection(): Promise<void> {
  handler = (_request, response) => response.end("{}");
  const second = await within(
    WAIT,
    "second",
    post("/v3/kv/range").then((next) => readBounded(next, MiB)),
  );
  expect(new TextDecoder().decode(second)).toBe("{}");
  expect(received).toHaveLength(2);
  expect(received[1]!.socket).toBe(received[0]!.socket);
}

const text = (bytes: Uint8Array | undefined) => (bytes === undefined ? undefined : new TextDecoder().decode(bytes));

describe("etcd-edge/node's fetch", () => {
  it(
    "reads a 200 body whole through READ_BOUNDED, " + "in several parts, and keeps the connection for the next request",
    async () => {
      const parts = ['{"header":{"revision":"7"},', '"kvs":[', `{"key":"${"k".repeat(100_000)}"}`, "]}"];
      handler = (_request, response) => {
        response.writeHead(200, { "content-type": "application/json" });
        let next = 0;
        const write = () =>
          next < parts.length - 1
            ? response.write(parts[next++], () => setTimeout(write, 5))
            : response.end(parts[next]);
        write();
      };
      const response = await within(WAIT, "head", post("/v3/kv/range"));
      expect(response.status).toBe(200);
      expect(text(await within(WAIT, "body", readBounded(response, MiB)))).toBe(parts.join(""));

      // Undici hands a connection on a full turn of the event loop after its answer ends.
      await sleep(20);
      await expectSecondOnSameConnection();
    },
  );

  it("with firstLine, a body that ends a little after its line (through a proxy) keeps its connection", async () => {
    let end: (() => void) | undefined;
    handler = (_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.write('{"result":{"TTL":"30"}}\n');
      end = () => response.end();
    };
    const response = await within(WAIT, "head", post("/v3/lease/keepalive"));
    // The line is answered at once, before the body's end.
    expect(text(await within(WAIT, "first line", readBounded(response, MiB, true)))).toBe('{"result":{"TTL":"30"}}');
    end!();

    await sleep(60);
    await expectSecondOnSameConnection();
  });

  it("with firstLine stops at the first newline and drops the endless rest with its connection", async () => {
    let poured: { sent: () => number } | undefined;
    handler = (_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.write('{"result":{"TTL":"30"}}\n');
      poured = pour(response, new TextEncoder().encode('{"result":{"TTL":"29"}}\n'.repeat(1000)), 1024 * MiB);
    };
    const response = await within(WAIT, "head", post("/v3/lease/keepalive"));
    expect(text(await within(WAIT, "first line", readBounded(response, MiB, true)))).toBe('{"result":{"TTL":"30"}}');
    await within(PROMPT, "connection closed", closed(received[0]!.socket));
    expect(poured!.sent()).toBeLessThan(1024 * MiB);
  });

  it("gives undefined for a body over maxBytes, and closes the connection", async () => {
    handler = (_request, response) => {
      response.writeHead(200, { "content-type": "application/json", "content-length": String(8 * MiB) });
      pour(response, new Uint8Array(64 * 1024).fill(0x61), 8 * MiB);
    };
    const response = await within(WAIT, "head", post("/v3/kv/range"));
    expect(await within(WAIT, "body", readBounded(response, 256 * 1024))).toBeUndefined();
    await within(PROMPT, "connection closed", closed(received[0]!.socket));
  });

  it("gives the body of another status as a web stream", async () => {
    const error = '{"error":"etcdserver: key not found","code":5}';
    handler = (_request, response) => {
      response.writeHead(404, { "content-type": "application/json" });
      response.write(error.slice(0, 10));
      setTimeout(() => response.end(error.slice(10)), 5);
    };
    const response = await within(WAIT, "head", post("/v3/kv/range"));
    expect(response.status).toBe(404);
    const body = response.body;
    if (body === null) throw new Error("no body");
    expect(await within(WAIT, "body", new Response(body).text())).toBe(error);
  });

  it("does not follow a redirect", async () => {
    handler = (_request, response) => response.writeHead(307, { location: `${base}/elsewhere` }).end();
    const response = await within(WAIT, "head", post("/v3/auth/authenticate"));
    expect(response.status).toBe(307);
    await sleep(50);
    expect(received.map((request) => request.path)).toEqual(["/v3/auth/authenticate"]);
  });

  it("rejects with the signal's reason when aborted before the head, and closes the connection", async () => {
    handler = () => {}; // never answers
    const controller = new AbortController();
    const pending = post("/v3/kv/range", controller.signal);
    await until("request received", WAIT, () => received.length === 1);
    const reason = new Error("given up");
    controller.abort(reason);
    await expect(within(WAIT, "rejection", pending)).rejects.toBe(reason);
    await within(PROMPT, "connection closed", closed(received[0]!.socket));
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
  });

  it("ends a body read with the signal's reason when aborted after the head, and closes the connection", async () => {
    for (const read of ["READ_BOUNDED", "body"] as const) {
      received = [];
      handler = (_request, response) => {
        response.writeHead(200, { "content-type": "application/json" });
        response.write('{"header":'); // and nothing more
      };
      const controller = new AbortController();
      const response = await within(WAIT, "head", post("/v3/kv/range", controller.signal));
      const reading = read === "READ_BOUNDED" ? readBounded(response, MiB) : drain(response.body);
      const outcome = reading.then(
        () => "read",
        (error: unknown) => error,
      );
      await sleep(20);
      const reason = new Error(`given up (${read})`);
      controller.abort(reason);
      expect(await within(WAIT, "read ended", outcome)).toBe(reason);
      await within(PROMPT, "connection closed", closed(received[0]!.socket));
      expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    }
  });

  it("sends nothing for a signal already aborted", async () => {
    const reason = new Error("too late");
    await expect(post("/v3/kv/range", AbortSignal.abort(reason))).rejects.toBe(reason);
    await sleep(50);
    expect(received).toHaveLength(0);
  });

  it("leaves no listener on a long-lived signal once its requests are done", async () => {
    handler = (_request, response) => response.end("{}");
    const signal = new AbortController().signal;
    for (let i = 0; i < 20; i++) {
      const response = await within(WAIT, "head", post("/v3/kv/range", signal));
      await readBounded(response, MiB);
    }
    // Answers not read yet, but complete: nothing is left to abort.
    const unread = await Promise.all([post("/v3/kv/range", signal), post("/v3/kv/range", signal)]);
    await sleep(20);
    expect(getEventListeners(signal, "abort")).toHaveLength(0);
    expect(unread.map((response) => response.status)).toEqual([200, 200]);
  });

  it(
    "holds only a little of a body nobody reads yet: " + "the server's writes stall, and resume once it is read",
    async () => {
      const total = 50 * MiB;
      let poured: { sent: () => number } | undefined;
      handler = (_request, response) => {
        response.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(total) });
        poured = pour(response, new Uint8Array(64 * 1024).fill(0x62), total);
      };
      const response = await within(WAIT, "head", post("/v3/kv/range"));
      // Nobody reads: the client holds its small allowance, the kernel's socket buffers fill (a few MiB on
      // loopback), and then the server can write no more. A client that buffered it all would take all 50 MiB.
      let last = -1;
      const stalled = await until(
        "the server's writes stall",
        WAIT,
        () => {
          const sent = poured?.sent() ?? -1;
          const still = sent === last;
          last = sent;
          return still && sent;
        },
        100,
      );
      expect(stalled).toBeLessThan(total / 2);

      const body = await within(10_000, "body", readBounded(response, total));
      expect(body?.byteLength).toBe(total);
      expect(poured!.sent()).toBe(total);
    },
  );
});
