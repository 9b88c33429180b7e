// Issue 9, items 2, 3 and 8 against stub fetches: redirects are never followed, what the client buffers is
// bounded, and malformed answers are BAD_RESPONSE instead of success. Each test names the old behaviour.
import { describe, expect, it } from "vitest";
import { Etcd, EtcdBadResponseError, type Fetch } from "../../src/index.js";
import { lines } from "../../src/gateway/ndjson.js";
import { rejection, within } from "../support/async.js";
import { A, gatewayClient, json, jsonText, stubFetch } from "../support/gateway.js";
import { header } from "../support/wire.js";

const encoder = new TextEncoder();

/**
 * A body that repeats `chunk` (after `first`) as long as it is read, recording whether the client cancelled it
 * and how much it pulled. It yields to the event loop between chunks, so timers still run, and ends after
 * 64 MiB, so that a client without a cap finishes (and fails the test) instead of running out of memory.
 */
function endless(chunk: Uint8Array, first?: Uint8Array) {
  const state = { pulled: 0, cancelled: false };
  let sentFirst = first === undefined;
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      await new Promise((resolve) => setImmediate(resolve));
      if (state.pulled >= 64 * 1024 * 1024) return controller.close();
      const next = sentFirst ? chunk : first!;
      sentFirst = true;
      state.pulled += next.byteLength;
      controller.enqueue(next);
    },
    cancel() {
      state.cancelled = true;
    },
  });
  return { stream, state };
}

describe("item 2: redirects", () => {
  it.each([301, 302, 303, 307, 308])(
    "a %s is BAD_RESPONSE, with no retry (old: the global fetch followed it)",
    async (status) => {
      const fetch = stubFetch(
        () => new Response(null, { status, headers: { location: "http://elsewhere.test/v3/kv/range" } }),
      );
      const error = await rejection(() => gatewayClient({ fetch, retries: 3 }).get("k"));
      expect(error).toBeInstanceOf(EtcdBadResponseError);
      expect(error).toMatchObject({ code: "BAD_RESPONSE", status });
      expect(error.message).toMatch(/redirect, which the client never follows/);
      expect(fetch.calls).toEqual(["/v3/kv/range"]);
    },
  );

  it("every request asks fetch not to follow redirects, credentials included", async () => {
    const inits: Array<Parameters<Fetch>[1]> = [];
    const fetch = stubFetch((path, init) => {
      inits.push(init);
      return path === "/v3/auth/authenticate" ? new Response(null, { status: 307 }) : json({ header: header() });
    });
    const error = await rejection(() =>
      new Etcd({ endpoints: [A], fetch, auth: { username: "u", password: "p" } }).get("k"),
    );
    expect(error.code).toBe("BAD_RESPONSE");
    expect(inits.map((init) => init.redirect)).toEqual(["manual"]);
    expect(fetch.calls).toEqual(["/v3/auth/authenticate"]);
  });

  it("a browser's opaque redirect (status 0) is BAD_RESPONSE too", async () => {
    const fetch = stubFetch(() => ({ status: 0, body: null, text: async () => "" }) as unknown as Response);
    expect((await rejection(() => gatewayClient({ fetch }).get("k"))).code).toBe("BAD_RESPONSE");
  });
});

describe("item 3: bounded buffering", () => {
  it(
    "a unary body past maxResponseBytes is RESOURCE_EXHAUSTED and cancelled (old: " + "read whole, whatever its size)",
    async () => {
      const { stream, state } = endless(
        encoder.encode("x".repeat(64 * 1024)),
        encoder.encode(`{"header":${JSON.stringify(header())},"kvs":[`),
      );
      const fetch = stubFetch(() => new Response(stream, { status: 200 }));
      const error = await within(
        5_000,
        "capped read",
        rejection(() => gatewayClient({ fetch, maxResponseBytes: 1024 * 1024 }).get("k")),
      );
      expect(error.code).toBe("RESOURCE_EXHAUSTED");
      expect(error.message).toMatch(/maxResponseBytes \(1048576 bytes\)/);
      expect(state.cancelled).toBe(true);
      expect(state.pulled).toBeLessThan(2 * 1024 * 1024);
    },
  );

  it("a body cut inside a UTF-8 character, over many chunks, decodes whole", async () => {
    const text =
      `{"header":${JSON.stringify(header())},"kvs":[{"key":"aw==",` +
      `"mod_revision":"6","value":"dg=="}],"count":"1","note":"clé ✓ 🎉"}`;
    const bytes = encoder.encode(text);
    const fetch = stubFetch(
      () =>
        new Response(
          new ReadableStream<Uint8Array>({
            start(controller) {
              for (let i = 0; i < bytes.length; i += 3) controller.enqueue(bytes.slice(i, i + 3));
              controller.close();
            },
          }),
        ),
    );
    expect((await gatewayClient({ fetch }).get("k"))?.value).toBe("v");
  });

  it("the default cap is 16 MiB", async () => {
    const { stream, state } = endless(encoder.encode("x".repeat(1024 * 1024)));
    const fetch = stubFetch(() => new Response(stream, { status: 200 }));
    expect(new Etcd({ endpoints: [A] }).config.maxResponseBytes).toBe(16 * 1024 * 1024);
    const error = await within(
      10_000,
      "capped read",
      rejection(() => gatewayClient({ fetch }).get("k")),
    );
    expect(error.code).toBe("RESOURCE_EXHAUSTED");
    expect(state.pulled).toBeGreaterThan(16 * 1024 * 1024);
    // The cap plus what the stream machinery reads ahead (a few chunks).
    expect(state.pulled).toBeLessThanOrEqual(20 * 1024 * 1024);
  });

  it("an error body is read only as far as a preview (64 KiB), then dropped", async () => {
    const { stream, state } = endless(encoder.encode("<html>".repeat(10_000)));
    const fetch = stubFetch(() => new Response(stream, { status: 502 }));
    const error = await within(
      5_000,
      "error preview",
      rejection(() => gatewayClient({ fetch }).get("k")),
    );
    expect(error).toMatchObject({ code: "BAD_RESPONSE", status: 502 });
    expect(state.cancelled).toBe(true);
    expect(state.pulled).toBeLessThan(200 * 1024);
  });

  it("keepAliveOnce reads only the first line and cancels the rest (old: read the stream to its end)", async () => {
    const line = encoder.encode(`{"result":{"header":${JSON.stringify(header())},"ID":"7","TTL":"30"}}\n`);
    const { stream, state } = endless(line);
    const fetch = stubFetch(() => new Response(stream, { status: 200 }));
    const result = await within(2_000, "first line", gatewayClient({ fetch }).lease.keepAliveOnce("7"));
    expect(result.ttl).toBe(30);
    expect(state.cancelled).toBe(true);
    expect(state.pulled).toBeLessThan(10 * line.byteLength);
  });

  it("a keepalive whose first line never ends is capped as well", async () => {
    const { stream, state } = endless(encoder.encode("y".repeat(64 * 1024)), encoder.encode('{"result":{'));
    const fetch = stubFetch(() => new Response(stream, { status: 200 }));
    const error = await within(
      5_000,
      "capped line",
      rejection(() => gatewayClient({ fetch, maxResponseBytes: 256 * 1024 }).lease.keepAliveOnce("7")),
    );
    expect(error.code).toBe("RESOURCE_EXHAUSTED");
    expect(state.cancelled).toBe(true);
  });

  it(
    "lines() ends a line longer than its cap with RESOURCE_EXHAUSTED " +
      "and cancels the body (old: buffered until abort)",
    async () => {
      const { stream, state } = endless(encoder.encode("z".repeat(1000)), encoder.encode('{"result":{}}\n{"result":'));
      const seen: string[] = [];
      const error = await rejection(async () => {
        for await (const line of lines(stream, 10_000)) seen.push(line);
      });
      expect(error.code).toBe("RESOURCE_EXHAUSTED");
      expect(seen).toEqual(['{"result":{}}']);
      expect(state.cancelled).toBe(true);
      expect(state.pulled).toBeLessThan(12_000 + 20);
    },
  );

  it(
    "lines() counts bytes exactly across chunks: " + "a line of exactly the cap passes, one byte more does not",
    async () => {
      const collect = async (chunks: string[], max: number) => {
        const stream = new ReadableStream<Uint8Array>({
          start(controller) {
            for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
            controller.close();
          },
        });
        const out: string[] = [];
        for await (const line of lines(stream, max)) out.push(line);
        return out;
      };
      expect(await collect(["aaaa", "a\nbb", "bbb\n"], 5)).toEqual(["aaaaa", "bbbbb"]);
      expect((await rejection(() => collect(["aaaa", "aa\nb\n"], 5))).code).toBe("RESOURCE_EXHAUSTED");
      expect((await rejection(() => collect(["a\naaaaaa\nb\n"], 5))).code).toBe("RESOURCE_EXHAUSTED");
      // Multi-byte characters count as their UTF-8 bytes.
      expect((await rejection(() => collect(["ééé\n"], 5))).code).toBe("RESOURCE_EXHAUSTED");
    },
  );

  it(
    "a watch message without a newline ends the watch at the default cap (old: " + "buffered until the caller aborted)",
    async () => {
      const created = encoder.encode(
        `{"result":{"header":${JSON.stringify(header())},"created":true}}\n{"result":{"events":[`,
      );
      const { stream, state } = endless(encoder.encode("w".repeat(1024 * 1024)), created);
      const fetch = stubFetch(() => new Response(stream, { status: 200 }));
      const error = await within(
        10_000,
        "watch line cap",
        rejection(async () => {
          for await (const _ of gatewayClient({ fetch }).watch({ key: "k", retries: 0 })) {
            // nothing arrives
          }
        }),
      );
      expect(error.code).toBe("RESOURCE_EXHAUSTED");
      expect(state.cancelled).toBe(true);
    },
  );
});

describe("item 8: answers are checked for what must be there", () => {
  const answering = (body: unknown, status = 200) => gatewayClient({ fetch: stubFetch(() => json(body, status)) });
  const kv = { key: "aw==", create_revision: "5", mod_revision: "6", version: "2", value: "dg==" };

  it("{} for a put is BAD_RESPONSE (old: a success with revision 0)", async () => {
    const error = await rejection(() => answering({}).put("k", "v"));
    expect(error).toBeInstanceOf(EtcdBadResponseError);
    expect(error).toMatchObject({ status: 200 });
    expect((error as EtcdBadResponseError).body).toBe("{}");
  });

  it.each([
    ["a header without a revision", { header: { cluster_id: "1", member_id: "2", raft_term: "3" } }],
    ["a negative revision", { header: { ...header(), revision: "-5" } }],
    ["a hex revision (old: 16)", { header: { ...header(), revision: "0x10" } }],
    ["an exponent (old: 1000)", { header: { ...header(), revision: "1e3" } }],
    ["a padded number", { header: { ...header(), revision: " 42" } }],
    ["a leading zero", { header: { ...header(), revision: "042" } }],
    ["a fraction as a JSON number", { header: { ...header(), revision: 4.5 } }],
    ["a negative create_revision", { header: header(), kvs: [{ ...kv, create_revision: "-1" }], count: "1" }],
    ["a version beyond 2^53", { header: header(), kvs: [{ ...kv, version: "9007199254740993" }], count: "1" }],
    ["a kv without a key", { header: header(), kvs: [{ mod_revision: "6" }], count: "1" }],
    ["a member ID that is not a uint64", { header: { ...header(), member_id: "18446744073709551616" } }],
  ])("a range answer with %s is BAD_RESPONSE", async (_name, body) => {
    const error = await rejection(() => answering(body).range({ prefix: "k" }));
    expect(error).toBeInstanceOf(EtcdBadResponseError);
    expect(error.code).toBe("BAD_RESPONSE");
  });

  it(
    "a revision as a JSON number within 2^53 is accepted: " + "the proto3 JSON mapping allows numbers for int64",
    async () => {
      const result = await answering({ header: { ...header(), revision: 42 }, count: 0 }).range({ prefix: "k" });
      expect(result.header.revision).toBe(42);
    },
  );

  it(
    "a lease ID as a JSON number past 2^53 is refused, " + "never rounded (old: 7587899071857085703 became ...5700)",
    async () => {
      const text = `{"header":${JSON.stringify(header())},"ID":7587899071857085703,"TTL":"30"}`;
      const error = await rejection(() => gatewayClient({ fetch: stubFetch(() => jsonText(text)) }).lease.grant(30));
      expect(error.code).toBe("BAD_RESPONSE");
      expect(error.message).toMatch(/ID/);
    },
  );

  it.each([
    ['no ID (old: lease "0", whose keys never expire)', { header: header(), TTL: "30" }],
    ['ID "0"', { header: header(), ID: "0", TTL: "30" }],
    ["an ID past int64", { header: header(), ID: "9223372036854775808", TTL: "30" }],
    ["no TTL", { header: header(), ID: "7" }],
    ["no header", { ID: "7", TTL: "30" }],
  ])("a grant answer with %s is BAD_RESPONSE", async (_name, body) => {
    expect((await rejection(() => answering(body).lease.grant(30))).code).toBe("BAD_RESPONSE");
  });

  it("a time-to-live answer without TTL is a lease in its last second (protojson omits 0), not an error", async () => {
    const result = await answering({ header: header(), ID: "7", grantedTTL: "5" }).lease.timeToLive("7");
    expect(result).toMatchObject({ ttl: 0, grantedTtl: 5 });
  });

  it("a grant of a requested ID must answer that ID", async () => {
    expect(
      (await rejection(() => answering({ header: header(), ID: "8", TTL: "30" }).lease.grant(30, { id: "7" }))).code,
    ).toBe("BAD_RESPONSE");
  });

  it("a keepalive or time-to-live answer about another lease is BAD_RESPONSE", async () => {
    const line = `{"result":{"header":${JSON.stringify(header())},"ID":"8","TTL":"30"}}\n`;
    expect(
      (await rejection(() => gatewayClient({ fetch: stubFetch(() => jsonText(line)) }).lease.keepAliveOnce("7"))).code,
    ).toBe("BAD_RESPONSE");
    expect((await rejection(() => answering({ header: header(), ID: "8", TTL: "5" }).lease.timeToLive("7"))).code).toBe(
      "BAD_RESPONSE",
    );
  });

  it.each([
    ["characters outside base64 (old: silently decoded to garbage)", "@@@@"],
    ["a length that is not a multiple of 4 (old: a plain Error)", "dg="],
    ["URL-safe base64", "-_-_"],
    ["unpadded base64", "dg"],
  ])("a value with %s is EtcdBadResponseError with status and body", async (_name, value) => {
    const error = await rejection(() => answering({ header: header(), kvs: [{ ...kv, value }], count: "1" }).get("k"));
    expect(error).toBeInstanceOf(EtcdBadResponseError);
    expect(error).toMatchObject({ code: "BAD_RESPONSE", status: 200 });
    expect((error as EtcdBadResponseError).body).toContain(value);
  });

  it("bad base64 in a key is BAD_RESPONSE too", async () => {
    expect(
      (await rejection(() => answering({ header: header(), kvs: [{ ...kv, key: "a b=" }], count: "1" }).get("k"))).code,
    ).toBe("BAD_RESPONSE");
  });

  it(
    "bad base64 inside a watch ends the watch with BAD_RESPONSE (old: " + "a plain Error, reconnecting forever)",
    async () => {
      const fetch = stubFetch(() =>
        jsonText(
          `{"result":{"header":${JSON.stringify(header())},"created":true}}\n` +
            `{"result":{"header":${JSON.stringify({ ...header(), revision: "43" })},` +
            `"events":[{"kv":{"key":"%%%%","mod_revision":"43"}}]}}\n`,
        ),
      );
      const error = await within(
        3_000,
        "watch ends",
        rejection(async () => {
          for await (const _ of gatewayClient({ fetch }).watch({ key: "k", retries: 1_000 })) {
            // no batch is valid
          }
        }),
      );
      expect(error.code).toBe("BAD_RESPONSE");
      expect(fetch.calls).toHaveLength(1);
    },
  );

  it(
    "a watch's created message without a revision is BAD_RESPONSE (old: " + "the watch restarted from revision 1)",
    async () => {
      const { revision: _revision, ...noRevision } = header();
      const fetch = stubFetch(() => jsonText(`{"result":{"header":${JSON.stringify(noRevision)},"created":true}}\n`));
      const error = await within(
        3_000,
        "watch ends",
        rejection(async () => {
          for await (const _ of gatewayClient({ fetch }).watch({ key: "k" })) {
            // nothing
          }
        }),
      );
      expect(error.code).toBe("BAD_RESPONSE");
    },
  );

  it("a txn's sub-responses may carry partial headers, as etcd sends them", async () => {
    const body = {
      header: header(),
      succeeded: true,
      responses: [
        { response_range: { header: { revision: "42" }, kvs: [kv], count: "1" } },
        {
          response_txn: { header: {}, succeeded: true, responses: [{ response_put: { header: { revision: "42" } } }] },
        },
      ],
    };
    const { op } = await import("../../src/index.js");
    const result = await answering(body)
      .txn()
      .then(op.get("k"), op.txn([], [op.put("k", "v")]))
      .commit();
    expect(result.succeeded).toBe(true);
  });
});
