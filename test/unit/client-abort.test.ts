// Caller signals and time budgets: ABORTED carries the signal's reason, TIMEOUT is its own error, and a
// watch's connection is dropped (its ReadableStream cancelled) when the caller stops.
import { describe, expect, it } from "vitest";
import { Etcd, EtcdError, EtcdTimeoutError, type Fetch } from "../../src/index.js";
import { rejection, sleep } from "../support/async.js";
import {
  A,
  B,
  controlledStream,
  directFetch,
  hang,
  json,
  route,
  streamResponse,
  useGateway,
} from "../support/gateway.js";
import { createdLine, eventsLine, header, putEvent } from "../support/wire.js";

const server = useGateway();

describe("unary calls", () => {
  it("aborting during a request → ABORTED with cause = the signal's reason, promptly", async () => {
    const seen = route(server, "/v3/kv/range", async (req) => {
      await hang(req.request);
      return json({ header: header(1) });
    });
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    const started = performance.now();
    setTimeout(() => controller.abort(reason), 50);
    const error = await rejection(new Etcd({ endpoints: [A] }).get("k", { signal: controller.signal }));
    const elapsed = performance.now() - started;
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("ABORTED");
    expect(error.cause).toBe(reason);
    expect(elapsed).toBeLessThan(500);
    expect(seen).toHaveLength(1);
  });

  it("a write aborted during the request is ABORTED too, and not resent", async () => {
    const a = route(
      server,
      "/v3/kv/put",
      async (req) => {
        await hang(req.request);
        return json({ header: header(1) });
      },
      A,
    );
    const b = route(server, "/v3/kv/put", () => json({ header: header(1) }), B);
    const error = await rejection(new Etcd({ endpoints: [A, B] }).put("k", "v", { signal: AbortSignal.timeout(50) }));
    expect(error.code).toBe("ABORTED");
    expect((error.cause as DOMException).name).toBe("TimeoutError");
    expect(a.length + b.length).toBe(1);
  });

  it("an already-aborted signal → ABORTED and no request reaches the server", async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(1) }));
    const reason = new Error("already");
    const error = await rejection(new Etcd({ endpoints: [A] }).get("k", { signal: AbortSignal.abort(reason) }));
    expect(error.code).toBe("ABORTED");
    expect(error.cause).toBe(reason);
    expect(seen).toHaveLength(0);
  });

  it("an already-aborted signal never calls an injected fetch (which may not check the signal)", async () => {
    let calls = 0;
    const fetch: Fetch = async () => {
      calls++;
      return new Response(JSON.stringify({ header: header(1) }), { status: 200 });
    };
    const error = await rejection(new Etcd({ endpoints: [A], fetch }).put("k", "v", { signal: AbortSignal.abort() }));
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("ABORTED");
    expect(calls).toBe(0);
  });

  it("an already-aborted signal with auth configured sends no authenticate request either", async () => {
    const auths = route(server, "/v3/auth/authenticate", () => json({ token: "t" }));
    const error = await rejection(
      new Etcd({ endpoints: [A], auth: { username: "u", password: "p" } }).get("k", { signal: AbortSignal.abort() }),
    );
    expect(error.code).toBe("ABORTED");
    expect(auths).toHaveLength(0);
  });

  it("`timeout` → TIMEOUT (EtcdTimeoutError) around the timeout", async () => {
    route(server, "/v3/kv/range", async (req) => {
      await hang(req.request);
      return json({ header: header(1) });
    });
    const started = performance.now();
    const error = await rejection(new Etcd({ endpoints: [A] }).get("k", { timeout: 100 }));
    const elapsed = performance.now() - started;
    expect(error).toBeInstanceOf(EtcdTimeoutError);
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("TIMEOUT");
    expect(error).toMatchObject({ timeout: 100 });
    expect(elapsed).toBeGreaterThanOrEqual(90);
    expect(elapsed).toBeLessThan(600);
  });

  it("the client-wide timeout applies when the call gives none", async () => {
    route(server, "/v3/kv/range", async (req) => {
      await hang(req.request);
      return json({ header: header(1) });
    });
    const error = await rejection(new Etcd({ endpoints: [A], timeout: 80 }).get("k"));
    expect(error.code).toBe("TIMEOUT");
  });

  it("the time budget covers retries: a read failing over and over ends with TIMEOUT", async () => {
    const fetch: Fetch = () => Promise.reject(new TypeError("fetch failed", { cause: { code: "ECONNRESET" } }));
    const started = performance.now();
    const error = await rejection(new Etcd({ endpoints: [A], fetch, retries: 1_000 }).get("k", { timeout: 150 }));
    expect(error.code).toBe("TIMEOUT");
    expect(performance.now() - started).toBeLessThan(700);
  });

  it("a timeout above setTimeout's 2^31-1 ms limit does not fire at once", async () => {
    route(server, "/v3/kv/range", async () => {
      await sleep(50);
      return json({ header: header(1) });
    });
    // Node and browsers run a setTimeout longer than 2147483647 ms after 1 ms instead.
    const result = await new Etcd({ endpoints: [A], timeout: 2 ** 31 }).range({ key: "k" });
    expect(result.header.revision).toBe(1);
  });

  it("timeout: Infinity means no limit", async () => {
    route(server, "/v3/kv/range", async () => {
      await sleep(30);
      return json({ header: header(1) });
    });
    expect(
      (await new Etcd({ endpoints: [A], timeout: Number.POSITIVE_INFINITY }).range({ key: "k" })).header.revision,
    ).toBe(1);
  });
});

describe("watch streams", () => {
  it("aborting during a watch stream → ABORTED with the reason, and the stream is cancelled", async () => {
    const stream = controlledStream([createdLine(10), eventsLine(11, [putEvent("k", "v", 11)])]);
    route(server, "/v3/watch", () => streamResponse(stream));
    const controller = new AbortController();
    const reason = new Error("shutting down");
    const batches: number[] = [];
    const started = { t: 0 };
    const error = await rejection(
      (async () => {
        // directFetch: msw's socket path crashes undici when a pending body read is aborted (see support).
        for await (const batch of new Etcd({ endpoints: [A], fetch: directFetch(server) }).watch({
          key: "k",
          signal: controller.signal,
        })) {
          batches.push(batch.header.revision);
          started.t = performance.now();
          setTimeout(() => controller.abort(reason), 20);
        }
      })(),
    );
    expect(performance.now() - started.t).toBeLessThan(500);
    expect(batches).toEqual([11]);
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("ABORTED");
    expect(error.cause).toBe(reason);
    await expect(Promise.race([stream.cancelled.then(() => true), sleep(500).then(() => false)])).resolves.toBe(true);
  });

  it("aborting while waiting for the first message (the gateway sends no headers until then) → ABORTED", async () => {
    const seen = route(server, "/v3/watch", async (req) => {
      await hang(req.request);
      return json({});
    });
    const controller = new AbortController();
    setTimeout(() => controller.abort("stop"), 50);
    const started = performance.now();
    const error = await rejection(
      (async () => {
        for await (const _ of new Etcd({ endpoints: [A] }).watch({ key: "k", signal: controller.signal })) {
          // nothing arrives
        }
      })(),
    );
    expect(error.code).toBe("ABORTED");
    expect(error.cause).toBe("stop");
    expect(performance.now() - started).toBeLessThan(500);
    expect(seen).toHaveLength(1);
  });

  it("an already-aborted signal → the watch throws ABORTED without a request", async () => {
    const seen = route(server, "/v3/watch", () => json({}));
    const iterator = new Etcd({ endpoints: [A] })
      .watch({ key: "k", signal: AbortSignal.abort("no") })
      [Symbol.asyncIterator]();
    const error = await rejection(iterator.next());
    expect(error.code).toBe("ABORTED");
    expect(seen).toHaveLength(0);
  });

  it("`break` from for-await cancels the stream", async () => {
    const stream = controlledStream([createdLine(10), eventsLine(11, [putEvent("k", "v", 11)])]);
    const seen = route(server, "/v3/watch", () => streamResponse(stream));
    for await (const batch of new Etcd({ endpoints: [A] }).watch({ key: "k" })) {
      expect(batch.events).toHaveLength(1);
      break;
    }
    await expect(Promise.race([stream.cancelled.then(() => true), sleep(500).then(() => false)])).resolves.toBe(true);
    await sleep(50);
    expect(seen).toHaveLength(1); // and no reconnection
  });

  it("a watch's `timeout` bounds only the wait for the first message, not the stream's life", async () => {
    const stream = controlledStream([createdLine(10)]);
    route(server, "/v3/watch", () => streamResponse(stream));
    setTimeout(() => stream.push(eventsLine(11, [putEvent("k", "v", 11)])), 200);
    for await (const batch of new Etcd({ endpoints: [A] }).watch({ key: "k", timeout: 100 })) {
      expect(batch.header.revision).toBe(11);
      break;
    }
  });
});
