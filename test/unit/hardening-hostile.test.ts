// A hostile gateway on loopback (node:http): garbage, redirects to another origin, huge, endless and
// gzip-bombed bodies, headers that never come, watch lines that never end. Every case must end in a typed
// error within the call's budget, with memory growth bounded by the client's cap, through the runtime's
// global fetch and through etcd-edge/node's fetch alike.
import { createGzip } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Etcd, EtcdBadResponseError, EtcdError, type Fetch } from "../../src/index.js";
import { createNodeFetch } from "../../src/node/index.js";
import { within } from "../support/async.js";
import { header } from "../support/wire.js";
import { httpLoopback, type HttpLoopback, pour } from "../support/loopback.js";

/** Memory the process holds (JS heap and array buffers). */
function memory(): number {
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

/** Runs `action`, sampling memory meanwhile; returns its outcome and the peak growth in bytes. */
async function peakGrowth(action: () => Promise<unknown>): Promise<{ outcome: unknown; growth: number }> {
  const base = memory();
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, memory())), 2);
  let outcome: unknown;
  try {
    await action();
  } catch (error) {
    outcome = error;
  } finally {
    clearInterval(sampler);
    peak = Math.max(peak, memory());
  }
  return { outcome, growth: peak - base };
}

const MiB = 1024 * 1024;
const CAP = 4 * MiB;
/** Far past the cap; an uncapped client buffered several times this (1.2-1.4 GiB for 300 MiB). */
const HUGE = 300 * MiB;
/**
 * What a capped read may cost at its peak: the cap a few times over (the bytes, socket reads and the server's
 * own buffers in this process, garbage not yet collected). Measured: 11-25 MiB for a 4 MiB cap; an uncapped
 * read of the 300 MiB answer costs more than 1 GiB.
 */
const BOUND = 12 * CAP;
const BUDGET = 3_000;

let gateway: HttpLoopback;
let elsewhere: HttpLoopback;
/** ~250 KiB of gzip that inflates to 256 MiB of zeros. */
let bomb: Buffer;

beforeAll(async () => {
  [gateway, elsewhere] = await Promise.all([httpLoopback(), httpLoopback()]);
  bomb = await new Promise<Buffer>((resolve, reject) => {
    const gzip = createGzip({ level: 9 });
    const parts: Buffer[] = [];
    gzip.on("data", (part: Buffer) => parts.push(part));
    gzip.on("end", () => resolve(Buffer.concat(parts)));
    gzip.on("error", reject);
    const zeros = Buffer.alloc(MiB);
    let left = 256;
    const feed = () => {
      while (left > 0) {
        left--;
        if (!gzip.write(zeros)) return void gzip.once("drain", feed);
      }
      gzip.end();
    };
    feed();
  });
}, 30_000);

afterAll(async () => {
  await Promise.all([gateway?.close(), elsewhere?.close()]);
});

const fetches: Array<[string, () => Fetch & { close?: () => Promise<void> }]> = [
  ["the global fetch", () => ((input, init) => globalThis.fetch(input, init)) as Fetch],
  ["etcd-edge/node's fetch", () => createNodeFetch({ connections: 4 })],
];

describe.each(fetches)("through %s", (_name, makeFetch) => {
  let fetch: Fetch & { close?: () => Promise<void> };
  beforeAll(() => {
    fetch = makeFetch();
  });
  afterAll(async () => {
    await fetch.close?.();
  });
  /** A client of this file's hostile server, through the fetch under test. */
  const hostileClient = (
    options: { auth?: { username: string; password: string }; headers?: Record<string, string>; timeout?: number } = {},
  ) => new Etcd({ endpoints: [gateway.url], fetch, retries: 1, timeout: BUDGET, maxResponseBytes: CAP, ...options });

  /** The call's error, which must be an EtcdError and must come within the call's budget. */
  async function fails(call: () => Promise<unknown>, budget = BUDGET): Promise<EtcdError> {
    const started = performance.now();
    const error = await within(
      budget + 1_500,
      "the call",
      call().then(
        () => {
          throw new Error("the call succeeded against a hostile gateway");
        },
        (thrown: unknown) => thrown,
      ),
    );
    expect(error, String(error)).toBeInstanceOf(EtcdError);
    expect(performance.now() - started).toBeLessThan(budget + 1_000);
    return error as EtcdError;
  }

  it.each([
    ["HTML from a proxy", "text/html", "<html><body>502 Bad Gateway</body></html>"],
    ["binary garbage", "application/octet-stream", "\u0000\u00ff\u0001garbage\u0002"],
    ["truncated JSON", "application/json", `{"header":${JSON.stringify(header()).slice(0, 30)}`],
    ["JSON of the wrong shape", "application/json", '{"kvs":"none"}'],
    ["an empty 200", "application/json", ""],
  ])("%s is BAD_RESPONSE with the status and the start of the body", async (_case, type, text) => {
    gateway.handle((_request, response) => {
      response.writeHead(200, { "content-type": type });
      response.end(text);
    });
    const error = await fails(() => hostileClient().get("k"));
    expect(error).toBeInstanceOf(EtcdBadResponseError);
    expect(error).toMatchObject({ code: "BAD_RESPONSE", status: 200 });
    expect((error as EtcdBadResponseError).body).toBe(text.slice(0, 512));
  });

  it.each([307, 308])(
    "a %s of /v3/auth/authenticate to another origin is BAD_RESPONSE; the other origin receives nothing",
    async (status) => {
      gateway.handle((_request, response) => {
        response.writeHead(status, { location: `${elsewhere.url}/v3/auth/authenticate` });
        response.end();
      });
      elsewhere.handle((_request, response) => {
        response.writeHead(200, { "content-type": "application/json" });
        response.end(JSON.stringify({ header: header(), token: "stolen" }));
      });
      const error = await fails(() => hostileClient({ auth: { username: "root", password: "hunter2" } }).get("k"));
      expect(error).toMatchObject({ code: "BAD_RESPONSE", status });
      expect(gateway.seen.map((request) => request.path)).toEqual(["/v3/auth/authenticate"]);
      expect(elsewhere.seen).toEqual([]);
    },
  );

  it("a redirect of a call never carries the headers option to another origin", async () => {
    gateway.handle((_request, response) => {
      response.writeHead(302, { location: `${elsewhere.url}/v3/kv/range` });
      response.end();
    });
    elsewhere.handle((_request, response) => response.end("{}"));
    const error = await fails(() => hostileClient({ headers: { "x-proxy-secret": "s" } }).get("k"));
    expect(error.code).toBe("BAD_RESPONSE");
    expect(elsewhere.seen).toEqual([]);
  });

  it("a 300 MiB answer is RESOURCE_EXHAUSTED at the cap, with bounded memory", async () => {
    gateway.handle((_request, response) => {
      response.writeHead(200, { "content-type": "application/json", "content-length": String(HUGE) });
      response.write(`{"header":${JSON.stringify(header())},"kvs":[{"key":"`);
      pour(response, Buffer.alloc(64 * 1024, "a"), HUGE);
    });
    const { outcome, growth } = await peakGrowth(() =>
      fails(() => hostileClient().range({ prefix: "k" })).then((error) => Promise.reject(error)),
    );
    expect((outcome as EtcdError).code).toBe("RESOURCE_EXHAUSTED");
    expect(growth).toBeLessThan(BOUND);
  });

  it("an endless chunked answer is RESOURCE_EXHAUSTED at the cap", async () => {
    gateway.handle((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      pour(response, Buffer.alloc(16 * 1024, " "));
    });
    const { outcome, growth } = await peakGrowth(() =>
      fails(() => hostileClient().get("k")).then((error) => Promise.reject(error)),
    );
    expect((outcome as EtcdError).code).toBe("RESOURCE_EXHAUSTED");
    expect(growth).toBeLessThan(BOUND);
  });

  it("an endless error body is cut to a preview: BAD_RESPONSE with its status", async () => {
    gateway.handle((_request, response) => {
      response.writeHead(500, { "content-type": "text/html" });
      pour(response, Buffer.alloc(16 * 1024, "e"));
    });
    const { outcome, growth } = await peakGrowth(() =>
      fails(() => hostileClient().put("k", "v")).then((error) => Promise.reject(error)),
    );
    expect(outcome).toMatchObject({ code: "BAD_RESPONSE", status: 500 });
    expect(growth).toBeLessThan(BOUND);
  });

  it("a gzip bomb (250 KiB inflating to 256 MiB) ends in a typed error with bounded memory", async () => {
    gateway.handle((_request, response) => {
      response.writeHead(200, {
        "content-type": "application/json",
        "content-encoding": "gzip",
        "content-length": String(bomb.byteLength),
      });
      response.end(bomb);
    });
    const { outcome, growth } = await peakGrowth(() =>
      fails(() => hostileClient().get("k")).then((error) => Promise.reject(error)),
    );
    // The global fetch inflates: the cap counts inflated bytes. undici's request does not: the gzip is not JSON.
    expect(["RESOURCE_EXHAUSTED", "BAD_RESPONSE"]).toContain((outcome as EtcdError).code);
    expect(growth).toBeLessThan(BOUND);
  });

  it("headers that never come end in TIMEOUT within the call's timeout", async () => {
    gateway.handle(() => {
      // Never answers; the client's abort closes the socket.
    });
    const error = await fails(() => hostileClient().get("k", { timeout: 300 }), 300);
    expect(error.code).toBe("TIMEOUT");
  });

  it("a body that trickles forever ends in TIMEOUT within the call's timeout", async () => {
    gateway.handle((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.write("{");
      const timer = setInterval(() => (response.destroyed ? clearInterval(timer) : response.write(" ")), 20);
    });
    const error = await fails(() => hostileClient().get("k", { timeout: 400 }), 400);
    expect(error.code).toBe("TIMEOUT");
  });

  it("a keepalive that streams forever is read to its first line only", async () => {
    gateway.handle((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      pour(response, Buffer.from(`{"result":{"header":${JSON.stringify(header())},"ID":"7","TTL":"30"}}\n`));
    });
    const result = await within(BUDGET, "keepalive", hostileClient().lease.keepAliveOnce("7"));
    expect(result.ttl).toBe(30);
  });

  it("a watch line without a newline ends the watch with RESOURCE_EXHAUSTED, with bounded memory", async () => {
    gateway.handle((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.write(`{"result":{"header":${JSON.stringify(header())},"created":true}}\n{"result":{"events":[`);
      pour(response, Buffer.alloc(64 * 1024, "w"));
    });
    const watching = async () => {
      // The watch's line cap is the default (16 MiB) until watch.ts passes the client's maxResponseBytes.
      for await (const _ of hostileClient().watch({ key: "k", retries: 0 })) {
        // nothing valid arrives
      }
    };
    const { outcome, growth } = await peakGrowth(() => within(10_000, "watch", watching()));
    expect(outcome).toBeInstanceOf(EtcdError);
    expect((outcome as EtcdError).code).toBe("RESOURCE_EXHAUSTED");
    // Measured: 35-55 MiB for the 16 MiB line cap; uncapped, the line grows until the caller aborts.
    expect(growth).toBeLessThan(8 * 16 * MiB);
  });

  it(
    "an answer in small chunks, a character split between two, " + "a keepalive's newline in a late chunk: read whole",
    async () => {
      const text =
        `{"header":${JSON.stringify(header())},"kvs":[{"key":"aw==",` +
        `"mod_revision":"6","value":"dg=="}],"count":"1","note":"clé ✓"}`;
      const bytes = Buffer.from(text);
      const line = Buffer.from(`{"result":{"header":${JSON.stringify(header())},"ID":"7","TTL":"30"}}\n{"result":`);
      gateway.handle((request, response) => {
        const body = request.url === "/v3/lease/keepalive" ? line : bytes;
        response.writeHead(200, { "content-type": "application/json" });
        let at = 0;
        const next = () => {
          if (response.destroyed) return;
          if (at >= body.length) return void response.end();
          response.write(body.subarray(at, (at += 7)));
          setTimeout(next, 1);
        };
        next();
      });
      expect((await hostileClient().get("k"))?.value).toBe("v");
      expect((await hostileClient().lease.keepAliveOnce("7")).ttl).toBe(30);
    },
  );

  it("a connection closed without an answer is UNAVAILABLE", async () => {
    gateway.handle((request) => request.socket.destroy());
    const error = await fails(() => hostileClient().get("k"));
    expect(error.code).toBe("UNAVAILABLE");
  });

  // Each reconnect's `created` used to reset the retry budget, so this watch reconnected forever.
  it("a server that answers `created` then closes, in a loop, ends the watch within its retries", async () => {
    gateway.handle((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(`{"result":{"header":${JSON.stringify(header())},"created":true}}\n`);
    });
    const controller = new AbortController();
    const watching = (async () => {
      for await (const _ of hostileClient().watch({ key: "k", retries: 2, signal: controller.signal })) {
        // no events
      }
    })();
    try {
      const error = await within(
        5_000,
        "the watch to give up",
        watching.then(
          () => undefined,
          (thrown: unknown) => thrown,
        ),
      );
      expect(error).toBeInstanceOf(EtcdError);
      expect((error as EtcdError).code).toBe("UNAVAILABLE");
    } finally {
      controller.abort();
      await watching.catch(() => {});
    }
  });
});
