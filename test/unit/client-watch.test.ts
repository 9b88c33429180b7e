// Watch: NDJSON framing, reconnection from the right revision without duplicates, cancellation and errors.
// Streams go through directFetch (support/gateway.ts) where chunk boundaries must reach the client exactly
// as written; the rest goes over msw's network interception.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Etcd, EtcdCompactedError, EtcdError, type WatchBatch, type WatchQuery } from "../../src/index.js";
import { rejection, sleep } from "../support/async.js";
import { mockClient } from "../support/mock.js";
import {
  A,
  controlledStream,
  directFetch,
  json,
  route,
  streamResponse,
  type StreamControl,
  useGateway,
} from "../support/gateway.js";
import { b64, createdLine, eventsLine, header, kv, putEvent, resultLine, streamErrorLine } from "../support/wire.js";

const server = useGateway();
const encoder = new TextEncoder();

/** Reads `count` batches (then stops the watch), or fails after 3 s. */
async function take(iterable: AsyncIterable<WatchBatch>, count: number): Promise<WatchBatch[]> {
  const out: WatchBatch[] = [];
  const run = (async () => {
    if (count === 0) return;
    for await (const batch of iterable) {
      out.push(batch);
      if (out.length >= count) break;
    }
  })();
  await Promise.race([
    run,
    sleep(3_000).then(() => Promise.reject(new Error(`only ${out.length} of ${count} batches arrived`))),
  ]);
  return out;
}

function direct(query: WatchQuery, calls?: string[]): AsyncIterable<WatchBatch> {
  return new Etcd({ endpoints: [A], fetch: directFetch(server, calls) }).watch(query);
}

/** Splits `bytes` at the given offsets into chunks. */
function splitAt(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...new Set(cuts.filter((c) => c > 0 && c < bytes.length))].sort((a, b) => a - b);
  const chunks: Uint8Array[] = [];
  let start = 0;
  for (const point of [...points, bytes.length]) {
    chunks.push(bytes.slice(start, point));
    start = point;
  }
  return chunks;
}

// A realistic stream, with a multi-byte value (base64 keeps JSON ASCII) and an unknown field carrying raw
// multi-byte UTF-8 so that chunk cuts can land inside a character; blank lines and a CRLF between messages.
const STREAM_TEXT =
  createdLine(10) +
  "\n" +
  eventsLine(11, [putEvent("k/é", "✓ value", 11)]) +
  `{"result":{"header":${JSON.stringify(header(12))},` +
  `"events":[{"type":"DELETE","kv":${JSON.stringify(kv({ key: "k/é", mod: 12 }))}}],"note":"clé ✓ 🎉"}}\r\n` +
  "\n\n" +
  eventsLine(13, [putEvent("k/a", "1", 13), putEvent("k/b", "2", 13)]);

function checkBatches(batches: WatchBatch[]) {
  expect(batches.map((b) => b.header.revision)).toEqual([11, 12, 13]);
  expect(batches[0]!.events).toEqual([
    expect.objectContaining({
      type: "put",
      kv: expect.objectContaining({ key: "k/é", value: "✓ value", modRevision: 11, version: 1 }),
    }),
  ]);
  expect(batches[1]!.events[0]).toMatchObject({
    type: "delete",
    kv: { key: "k/é", value: "", modRevision: 12, version: 0 },
  });
  expect(batches[2]!.events.map((e) => [e.type, e.kv.key, e.kv.value])).toEqual([
    ["put", "k/a", "1"],
    ["put", "k/b", "2"],
  ]);
}

describe("NDJSON framing", () => {
  it("one chunk holding every line, blank lines and CRLF included", async () => {
    route(server, "/v3/watch", () => streamResponse(controlledStream([STREAM_TEXT])));
    checkBatches(await take(direct({ prefix: "k/" }), 3));
  });

  it("one byte per chunk (every line split everywhere, inside every multi-byte character)", async () => {
    const bytes = encoder.encode(STREAM_TEXT);
    route(server, "/v3/watch", () => streamResponse(controlledStream(splitAt(bytes, [...bytes.keys()]))));
    checkBatches(await take(direct({ prefix: "k/" }), 3));
  });

  it("a cut inside a 4-byte UTF-8 character", async () => {
    const bytes = encoder.encode(STREAM_TEXT);
    const emoji = STREAM_TEXT.indexOf("🎉");
    const at = encoder.encode(STREAM_TEXT.slice(0, emoji)).length;
    route(server, "/v3/watch", () => streamResponse(controlledStream(splitAt(bytes, [at + 1, at + 2, at + 3]))));
    checkBatches(await take(direct({ prefix: "k/" }), 3));
  });

  it("arbitrary cut points (property)", async () => {
    const bytes = encoder.encode(STREAM_TEXT);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 40 }), async (cuts) => {
        server.resetHandlers();
        route(server, "/v3/watch", () => streamResponse(controlledStream(splitAt(bytes, cuts))));
        checkBatches(await take(direct({ prefix: "k/" }), 3));
      }),
      { numRuns: 40 },
    );
  });

  it("events arriving later over the network, after created", async () => {
    const stream = controlledStream([createdLine(10)]);
    route(server, "/v3/watch", () => streamResponse(stream));
    setTimeout(() => stream.push(eventsLine(11, [putEvent("k", "late", 11)])), 30);
    const [batch] = await take(new Etcd({ endpoints: [A] }).watch({ key: "k" }), 1);
    expect(batch!.events[0]).toMatchObject({ type: "put", kv: { key: "k", value: "late" } });
  });

  it("a PUT event has no `type` on the wire; DELETE is named; prev_kv is decoded", async () => {
    const line =
      `{"result":{"header":${JSON.stringify(header(21))},` +
      `"events":[{"kv":${JSON.stringify(kv({ key: "x", value: "2", create: 20, mod: 21, version: 2 }))},` +
      `"prev_kv":${JSON.stringify(kv({ key: "x", value: "1", create: 20, mod: 20, version: 1 }))}}]}}\n`;
    route(server, "/v3/watch", () => streamResponse(controlledStream([createdLine(20), line])));
    const [batch] = await take(new Etcd({ endpoints: [A] }).watch({ key: "x", prevKv: true }), 1);
    expect(batch!.events[0]).toMatchObject({
      type: "put",
      kv: { value: "2", version: 2 },
      prevKv: { value: "1", version: 1 },
    });
  });
});

describe("requests", () => {
  it("sends the create_request with int64 start_revision as a string and filters by name", async () => {
    const seen = route(server, "/v3/watch", () =>
      streamResponse(controlledStream([createdLine(10), eventsLine(10, [putEvent("k", "v", 10)])])),
    );
    await take(
      new Etcd({ endpoints: [A] }).watch({
        key: "k",
        startRevision: 10,
        noPut: true,
        noDelete: true,
        progressNotify: true,
      }),
      1,
    );
    expect(seen[0]!.body).toEqual({
      create_request: { key: b64("k"), start_revision: "10", filters: ["NOPUT", "NODELETE"], progress_notify: true },
    });
  });
});

describe("reconnection", () => {
  it("a stream that ends (EOF) is reopened from the last delivered mod_revision + 1, with no duplicate", async () => {
    const streams: StreamControl[] = [
      controlledStream(
        [createdLine(10), eventsLine(11, [putEvent("k", "a", 11)]), eventsLine(12, [putEvent("k", "b", 12, 11, 2)])],
        { close: true },
      ),
      // The server may resend the last revision; the client must not deliver it again.
      controlledStream([
        createdLine(13),
        eventsLine(12, [putEvent("k", "b", 12, 11, 2)]),
        eventsLine(14, [putEvent("k", "c", 14, 11, 3)]),
      ]),
    ];
    const seen = route(server, "/v3/watch", (_req, i) => streamResponse(streams[i]!));
    const batches = await take(new Etcd({ endpoints: [A] }).watch({ key: "k" }), 3);
    expect(batches.map((b) => b.events.map((e) => e.kv.value))).toEqual([["a"], ["b"], ["c"]]);
    expect(seen).toHaveLength(2);
    expect(seen[0]!.body.create_request.start_revision).toBeUndefined();
    expect(seen[1]!.body).toEqual({ create_request: { key: b64("k"), start_revision: "13" } });
  });

  it("a stream that ends right after `created` resumes from the created header's revision + 1", async () => {
    const streams = [
      controlledStream([createdLine(30)], { close: true }),
      controlledStream([createdLine(30), eventsLine(31, [putEvent("k", "v", 31)])]),
    ];
    const seen = route(server, "/v3/watch", (_req, i) => streamResponse(streams[i]!));
    await take(new Etcd({ endpoints: [A] }).watch({ key: "k" }), 1);
    expect(seen[1]!.body.create_request.start_revision).toBe("31");
  });

  it.each(["3.5", "3.6"] as const)(
    "an %s error line with code 14 mid-stream → reconnect from the next revision",
    async (version) => {
      const streams = [
        controlledStream([
          createdLine(10),
          eventsLine(11, [putEvent("k", "a", 11)]),
          streamErrorLine(version, 14, "etcdserver: no leader"),
        ]),
        controlledStream([createdLine(11), eventsLine(12, [putEvent("k", "b", 12, 11, 2)])]),
      ];
      const seen = route(server, "/v3/watch", (_req, i) => streamResponse(streams[i]!));
      const batches = await take(direct({ key: "k" }), 2);
      expect(batches.map((b) => b.events[0]!.kv.value)).toEqual(["a", "b"]);
      expect(seen[1]!.body.create_request.start_revision).toBe("12");
      // The broken stream was dropped, not left open.
      await expect(Promise.race([streams[0]!.cancelled.then(() => true), sleep(500).then(() => false)])).resolves.toBe(
        true,
      );
    },
  );

  it("a 503 before the first message (no leader) → reconnect", async () => {
    const seen = route(server, "/v3/watch", (_req, i) =>
      i === 0
        ? new Response(streamErrorLine("3.5", 14, "etcdserver: no leader"), { status: 503 })
        : streamResponse(controlledStream([createdLine(5), eventsLine(6, [putEvent("k", "v", 6)])])),
    );
    const [batch] = await take(new Etcd({ endpoints: [A] }).watch({ key: "k" }), 1);
    expect(batch!.header.revision).toBe(6);
    expect(seen).toHaveLength(2);
  });

  it("gives up after `retries` consecutive failures with the last error", async () => {
    const seen = route(server, "/v3/watch", () => streamResponse(controlledStream([], { close: true })));
    const error = await rejection(take(new Etcd({ endpoints: [A] }).watch({ key: "k", retries: 2 }), 1));
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("UNAVAILABLE");
    expect(seen).toHaveLength(3);
  });
});

describe("renewal", () => {
  // The SDK asks the server to end each stream at idleTimeout and opens its successor shortly before. A server
  // (or proxy) that drops the Grpc-Timeout header never ends one: past the grace the successor takes over all
  // the same, so no successor sits idle for good beside a stream that lives on.
  it("on a server that ignores Grpc-Timeout the successor takes over: two streams at most, none lost", async () => {
    let open = 0;
    let most = 0;
    let opened = 0;
    const { etcd } = mockClient(
      {},
      {
        through: (input, init, forward) => {
          const { "grpc-timeout": _, ...headers } = init.headers;
          if (new URL(input).pathname === "/v3/watch") {
            opened++;
            most = Math.max(most, ++open);
            init.signal.addEventListener("abort", () => open--, { once: true });
          }
          return forward(input, { ...init, headers });
        },
      },
    );
    const { header } = await etcd.range({ key: "r/", countOnly: true });
    const iterator = etcd
      .watch({ prefix: "r/", startRevision: header.revision + 1, idleTimeout: 200 })
      [Symbol.asyncIterator]();
    // A stream lives idleTimeout plus the grace (1.2 s) before its successor takes over: two takeovers in 3 s.
    const N = 100;
    const received: WatchBatch[] = [];
    const pulled = (async () => {
      while (received.length < N) received.push((await iterator.next()).value as WatchBatch);
    })();
    const revisions: number[] = [];
    const until = performance.now() + 2_900;
    for (let i = 0; i < N; i++) {
      revisions.push((await etcd.put(`r/${String(i).padStart(3, "0")}`, String(i))).header.revision);
      if (performance.now() < until) await sleep(30);
    }
    await pulled;
    await iterator.return?.();
    expect(received.flatMap((b) => b.events.map((e) => e.kv.modRevision))).toEqual(revisions);
    expect(opened).toBeGreaterThanOrEqual(3);
    expect(most).toBeLessThanOrEqual(2);
    expect(open).toBe(0);
  });
});

describe("the server's end of a stream", () => {
  // The deadline's error line and the body's own end can come apart (nginx writes the last chunk's terminator
  // separately). A body dropped before its end takes its connection along: through a TLS proxy the next stream
  // then pays a handshake, on a hot lock's handoff (bench §9).
  const deadline = streamErrorLine("3.5", 4, "context deadline exceeded");

  it("is read to the body's end, which comes a little after it: the connection is kept, nothing reopened", async () => {
    const first = controlledStream([createdLine(10)]);
    const streams = [first, controlledStream([createdLine(10), eventsLine(11, [putEvent("k", "v", 11)])])];
    const seen = route(server, "/v3/watch", (_req, i) => streamResponse(streams[i]!));
    const events: string[] = [];
    const etcd = new Etcd({ endpoints: [A], fetch: directFetch(server), onEvent: (e) => events.push(e.type) });
    const batches = take(etcd.watch({ key: "k" }), 1);
    await sleep(50);
    first.push(deadline);
    await sleep(20);
    first.close();
    const [batch] = await batches;
    expect(batch!.events[0]!.kv.value).toBe("v");
    expect(seen[1]!.body.create_request.start_revision).toBe("11");
    expect(first.isCancelled()).toBe(false);
    expect(events).not.toContain("watch.reconnected");
  });

  it("a body that fails after it (a proxy that resets the rest) is a clean end too: nothing reopened", async () => {
    let body!: ReadableStreamDefaultController<Uint8Array>;
    const first = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(encoder.encode(createdLine(10)));
        body = controller;
      },
    });
    const next = controlledStream([createdLine(10), eventsLine(11, [putEvent("k", "v", 11)])]);
    const seen = route(server, "/v3/watch", (_req, i) =>
      i === 0 ? new Response(first, { status: 200 }) : streamResponse(next),
    );
    const events: string[] = [];
    const etcd = new Etcd({ endpoints: [A], fetch: directFetch(server), onEvent: (e) => events.push(e.type) });
    const batches = take(etcd.watch({ key: "k" }), 1);
    await sleep(50);
    body.enqueue(encoder.encode(deadline));
    await sleep(20);
    body.error(new TypeError("terminated"));
    expect((await batches)[0]!.events[0]!.kv.value).toBe("v");
    expect(seen).toHaveLength(2);
    expect(events).not.toContain("watch.reconnected");
  });

  it("a body that does not end is dropped as its successor takes over, as after a clean end", async () => {
    const first = controlledStream([createdLine(10)]);
    const streams = [first, controlledStream([createdLine(10), eventsLine(11, [putEvent("k", "v", 11)])])];
    route(server, "/v3/watch", (_req, i) => streamResponse(streams[i]!));
    const events: string[] = [];
    const etcd = new Etcd({ endpoints: [A], fetch: directFetch(server), onEvent: (e) => events.push(e.type) });
    const batches = take(etcd.watch({ key: "k" }), 1);
    await sleep(50);
    first.push(deadline);
    const pushed = performance.now();
    await first.cancelled;
    // Dropped when its successor takes over, within its life (the first stream's: a second) and the grace.
    expect(performance.now() - pushed).toBeLessThan(2_000);
    expect((await batches)[0]!.events[0]!.kv.value).toBe("v");
    expect(events).not.toContain("watch.reconnected");
  });
});

describe("cancellation by the server", () => {
  it(
    "canceled with compact_revision → EtcdCompactedError carrying compactRevision; " + "the open stream is dropped",
    async () => {
      const stream = controlledStream([
        createdLine(50),
        resultLine({ header: header(50), canceled: true, compact_revision: "40" }),
      ]); // and the gateway keeps the HTTP stream open
      const seen = route(server, "/v3/watch", () => streamResponse(stream));
      const error = await rejection(take(new Etcd({ endpoints: [A] }).watch({ key: "k", startRevision: 5 }), 1));
      expect(error).toBeInstanceOf(EtcdCompactedError);
      expect(error).toBeInstanceOf(EtcdError);
      expect(error.code).toBe("COMPACTED");
      expect(error).toMatchObject({ compactRevision: 40 });
      expect(seen).toHaveLength(1);
      await expect(Promise.race([stream.cancelled.then(() => true), sleep(500).then(() => false)])).resolves.toBe(true);
    },
  );

  it("a permission-denied cancel → PERMISSION_DENIED, not retried", async () => {
    const seen = route(server, "/v3/watch", () =>
      streamResponse(
        controlledStream([
          resultLine({ header: header(50), canceled: true, cancel_reason: "etcdserver: permission denied" }),
        ]),
      ),
    );
    const error = await rejection(take(new Etcd({ endpoints: [A] }).watch({ key: "secret" }), 1));
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("PERMISSION_DENIED");
    expect(seen).toHaveLength(1);
  });

  it("a cancel reason split inside a multi-byte character is reassembled", async () => {
    const text = resultLine({
      header: header(50),
      canceled: true,
      cancel_reason: "etcdserver: permission denied (clé ✓)",
    });
    const bytes = encoder.encode(text);
    const at = encoder.encode(text.slice(0, text.indexOf("✓"))).length;
    route(server, "/v3/watch", () => streamResponse(controlledStream(splitAt(bytes, [at + 1, at + 2]))));
    const error = await rejection(take(direct({ key: "secret" }), 1));
    expect(error.code).toBe("PERMISSION_DENIED");
    expect(error.message).toContain("(clé ✓)");
  });

  it("an invalid-token cancel re-authenticates and reconnects", async () => {
    let n = 0;
    const auths = route(server, "/v3/auth/authenticate", () => json({ header: header(1), token: `tok${++n}` }));
    const seen = route(server, "/v3/watch", (req) =>
      req.headers.authorization === "tok1"
        ? streamResponse(
            controlledStream([
              resultLine({ header: header(50), canceled: true, cancel_reason: "etcdserver: invalid auth token" }),
            ]),
          )
        : streamResponse(controlledStream([createdLine(50), eventsLine(51, [putEvent("k", "v", 51)])])),
    );
    const [batch] = await take(
      new Etcd({ endpoints: [A], auth: { username: "u", password: "p" } }).watch({ key: "k" }),
      1,
    );
    expect(batch!.header.revision).toBe(51);
    expect(auths).toHaveLength(2);
    expect(seen.map((s) => s.headers.authorization)).toEqual(["tok1", "tok2"]);
  });
});

describe("progress notifications", () => {
  it("a message with no events (not created, not canceled) → a batch with events: []", async () => {
    route(server, "/v3/watch", () =>
      streamResponse(
        controlledStream([
          createdLine(10),
          resultLine({ header: header(25) }),
          eventsLine(26, [putEvent("k", "v", 26)]),
        ]),
      ),
    );
    const batches = await take(new Etcd({ endpoints: [A] }).watch({ key: "k", progressNotify: true }), 2);
    expect(batches[0]).toEqual({ header: expect.objectContaining({ revision: 25 }), events: [] });
    expect(batches[1]!.header.revision).toBe(26);
  });

  it("after a progress notification, a reconnect starts after its revision", async () => {
    const streams = [
      controlledStream([createdLine(10), resultLine({ header: header(25) })], { close: true }),
      controlledStream([createdLine(26), eventsLine(27, [putEvent("k", "v", 27)])]),
    ];
    const seen = route(server, "/v3/watch", (_req, i) => streamResponse(streams[i]!));
    await take(new Etcd({ endpoints: [A] }).watch({ key: "k" }), 2);
    expect(seen[1]!.body.create_request.start_revision).toBe("26");
  });
});

describe("bad lines", () => {
  it("a line that is not JSON → BAD_RESPONSE with the line", async () => {
    route(server, "/v3/watch", () => streamResponse(controlledStream([createdLine(10), "<html>oops</html>\n"])));
    const error = await rejection(take(new Etcd({ endpoints: [A] }).watch({ key: "k", retries: 0 }), 1));
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("BAD_RESPONSE");
    expect(error).toMatchObject({ body: "<html>oops</html>" });
  });
});
