// What the client puts on the wire: request bodies, base64, ranges, namespaces, headers, how fetch is called.
import { afterEach, describe, expect, it, vi } from "vitest";
import { cmp, Etcd, op } from "../../src/index.js";
import { createMockEtcd } from "../../src/testing/index.js";
import {
  A,
  controlledStream,
  gatewayClient,
  json,
  jsonText,
  route,
  streamResponse,
  useGateway,
} from "../support/gateway.js";
import { until } from "../support/async.js";
import { BIG_LEASE, b64, createdLine, header, kv } from "../support/wire.js";

const server = useGateway();

const STANDARD_PADDED_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

describe("keys and values", () => {
  it("are padded standard base64 (never URL-safe, never unpadded)", async () => {
    const seen = route(server, "/v3/kv/put", () => json({ header: header(2) }));
    // Bytes chosen so that URL-safe base64 would differ (+ and / vs - and _) and padding is needed.
    const key = new Uint8Array([0xfb, 0xff, 0xbf]); // "+/+/" in standard, "-_-_" in URL-safe
    await gatewayClient().put(key, new Uint8Array([0xfb, 0xef]));
    await gatewayClient().put("a", "ab");
    expect(seen[0]!.body).toEqual({ key: "+/+/", value: "++8=" });
    expect(seen[1]!.body).toEqual({ key: "YQ==", value: "YWI=" });
    for (const { body } of seen) {
      expect(body.key).toMatch(STANDARD_PADDED_BASE64);
      expect(body.value).toMatch(STANDARD_PADDED_BASE64);
    }
  });

  it("utf-8 keys are encoded as UTF-8 bytes", async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(2) }));
    await gatewayClient().get("clé/✓");
    expect(seen[0]!.body).toEqual({ key: b64("clé/✓") });
  });

  it("text values are their UTF-8 bytes, ASCII or not (U+0080..U+00FF take two bytes each)", async () => {
    const seen = route(server, "/v3/kv/txn", () => json({ header: header(2), succeeded: true }));
    const values = ["plain", "\0\x01\x7f", "\x80", "é", "ÿ", "ā", "✓", "😀", "a\u00e9b"];
    for (const value of values) {
      await gatewayClient()
        .txn()
        .if(cmp.value("k", "==", value))
        .then(op.put("k", value))
        .commit();
    }
    expect(seen.map(({ body }) => [body.compare[0].value, body.success[0].request_put.value])).toEqual(
      values.map((value) => [b64(value), b64(value)]),
    );
    await expect(gatewayClient().put("k", "a\uD800")).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: expect.stringContaining("lone surrogate"),
    });
  });

  it("an empty value is left out (protojson zero value)", async () => {
    const seen = route(server, "/v3/kv/put", () => json({ header: header(2) }));
    await gatewayClient().put("k", "");
    expect(seen[0]!.body).toEqual({ key: b64("k") });
  });
});

describe("ranges", () => {
  it("a prefix gets range_end = prefix with its last byte incremented", async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(2) }));
    await gatewayClient().range({ prefix: "jobs/" });
    expect(seen[0]!.body).toEqual({ key: b64("jobs/"), range_end: b64("jobs0") });
  });

  it("a prefix ending in 0xff bytes cuts them and increments the last byte below 0xff", async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(2) }));
    await gatewayClient().range({ prefix: new Uint8Array([0x61, 0xff, 0xff]) });
    expect(seen[0]!.body).toEqual({ key: b64(new Uint8Array([0x61, 0xff, 0xff])), range_end: b64("b") });
  });

  it('an all-0xff prefix has no end: range_end "AA==" ("\\0", every key >= key)', async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(2) }));
    await gatewayClient().range({ prefix: new Uint8Array([0xff, 0xff]) });
    expect(seen[0]!.body).toEqual({ key: "//8=", range_end: "AA==" });
  });

  it('an empty prefix means every key: key "AA==" and range_end "AA=="', async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(2) }));
    await gatewayClient().range({ prefix: "" });
    expect(seen[0]!.body).toEqual({ key: "AA==", range_end: "AA==" });
  });

  it("{ key, end } sends both; end '\\0' sends AA==", async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(2) }));
    await gatewayClient().range({ key: "a", end: "c" });
    await gatewayClient().range({ key: "a", end: "\0" });
    expect(seen[0]!.body).toEqual({ key: b64("a"), range_end: b64("c") });
    expect(seen[1]!.body).toEqual({ key: b64("a"), range_end: "AA==" });
  });

  it("deleterange with a prefix sends the same key/range_end", async () => {
    const seen = route(server, "/v3/kv/deleterange", () => json({ header: header(2), deleted: "2" }));
    const result = await gatewayClient().delete({ prefix: "jobs/" });
    expect(result.deleted).toBe(2);
    expect(seen[0]!.body).toEqual({ key: b64("jobs/"), range_end: b64("jobs0") });
  });
});

describe("int64 and zero-value options", () => {
  it("a put's lease goes out as its canonical decimal ID, below 2^63", async () => {
    const seen = route(server, "/v3/kv/put", () => json({ header: header(2) }));
    const given = ["1", "42", "007", "123456789012345678", "8999999999999999999", "9223372036854775807", "0"];
    for (const lease of given) await gatewayClient().put("k", "v", { lease });
    expect(seen.map(({ body }) => body.lease)).toEqual([
      "1",
      "42",
      "7",
      "123456789012345678",
      "8999999999999999999",
      "9223372036854775807",
      undefined,
    ]);
    for (const lease of ["9223372036854775808", "99999999999999999999", "-1", "1e3", " 1", "", "0x10"]) {
      const error = await gatewayClient()
        .put("k", "v", { lease })
        .catch((e: unknown) => e);
      expect(error, lease).toMatchObject({ code: "INVALID_ARGUMENT" });
    }
    expect(seen).toHaveLength(given.length);
  });

  it("int64 fields go out as strings; sort enums as names", async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(2) }));
    await gatewayClient().range({
      prefix: "p/",
      limit: 10,
      revision: 42,
      minModRevision: 3,
      maxModRevision: 40,
      minCreateRevision: 2,
      maxCreateRevision: 39,
      sort: { target: "modRevision", order: "descend" },
      keysOnly: true,
      countOnly: true,
      serializable: true,
    });
    expect(seen[0]!.body).toEqual({
      key: b64("p/"),
      range_end: b64("p0"),
      limit: "10",
      revision: "42",
      min_mod_revision: "3",
      max_mod_revision: "40",
      min_create_revision: "2",
      max_create_revision: "39",
      sort_target: "MOD",
      sort_order: "DESCEND",
      keys_only: true,
      count_only: true,
      serializable: true,
    });
  });

  it("zero and false options are omitted entirely", async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(2) }));
    await gatewayClient().range({
      key: "k",
      limit: 0,
      revision: 0,
      keysOnly: false,
      countOnly: false,
      serializable: false,
    });
    expect(seen[0]!.text).toBe(`{"key":"${b64("k")}"}`);
    const puts = route(server, "/v3/kv/put", () => json({ header: header(2) }));
    await gatewayClient().put("k", "v", { prevKv: false, ignoreLease: false, lease: "0" });
    expect(puts[0]!.body).toEqual({ key: b64("k"), value: b64("v") });
  });

  it("a put with a lease above 2^53 sends the exact lease ID as a string", async () => {
    const seen = route(server, "/v3/kv/put", () =>
      json({ header: header(2), prev_kv: kv({ key: "k", value: "old", create: 1, mod: 1, version: 1 }) }),
    );
    const result = await gatewayClient().put("k", "v", { lease: BIG_LEASE, prevKv: true });
    expect(seen[0]!.body).toEqual({ key: b64("k"), value: b64("v"), lease: BIG_LEASE, prev_kv: true });
    expect(result.prevKv).toMatchObject({ key: "k", value: "old" });
  });

  it("lease calls send TTL and ID as int64 strings, under the lease service's field names", async () => {
    const grants = route(server, "/v3/lease/grant", () => json({ header: header(2), ID: BIG_LEASE, TTL: "30" }));
    const revokes = route(server, "/v3/lease/revoke", () => json({ header: header(2) }));
    const keeps = route(server, "/v3/lease/keepalive", () =>
      jsonText(`{"result":{"header":${JSON.stringify(header(2))},"ID":"${BIG_LEASE}","TTL":"30"}}\n`),
    );
    const ttls = route(server, "/v3/lease/timetolive", () =>
      json({ header: header(2), ID: BIG_LEASE, TTL: "20", grantedTTL: "30" }),
    );
    const etcd = gatewayClient();
    await etcd.lease.grant(30);
    await etcd.lease.grant(30, { id: BIG_LEASE });
    await etcd.lease.revoke(BIG_LEASE);
    await etcd.lease.keepAliveOnce(BIG_LEASE);
    await etcd.lease.timeToLive(BIG_LEASE, { keys: true });
    await etcd.lease.timeToLive(BIG_LEASE);
    expect(grants.map((g) => g.body)).toEqual([{ TTL: "30" }, { TTL: "30", ID: BIG_LEASE }]);
    expect(revokes[0]!.body).toEqual({ ID: BIG_LEASE });
    expect(keeps[0]!.body).toEqual({ ID: BIG_LEASE });
    expect(ttls.map((t) => t.body)).toEqual([{ ID: BIG_LEASE, keys: true }, { ID: BIG_LEASE }]);
  });

  it("compact sends its revision as a string", async () => {
    const seen = route(server, "/v3/kv/compaction", () => json({ header: header(50) }));
    await gatewayClient().compact(40);
    expect(seen[0]!.body).toEqual({ revision: "40" });
  });

  it("txn compares/ops: int64 as strings, enum names, nested request_* shapes", async () => {
    const seen = route(server, "/v3/kv/txn", () =>
      json({
        header: header(9),
        succeeded: true,
        responses: [{ response_put: { header: header(9) } }, { response_delete_range: { header: header(9) } }],
      }),
    );
    await gatewayClient()
      .txn()
      .if(
        cmp.version("a", "==", 0),
        cmp.version("a2", "!=", 3),
        cmp.modRevision("b", "<", 7),
        cmp.createRevision("c", ">", 2),
        cmp.value("d", "!=", "x"),
        cmp.lease("e", "==", BIG_LEASE),
      )
      .then(op.put("a", "1", { lease: BIG_LEASE }), op.delete({ prefix: "q/" }))
      .else(op.get("a"))
      .commit();
    expect(seen[0]!.body).toEqual({
      // Zero values are left out, as protojson leaves them out: target VERSION, result EQUAL, a 0 operand.
      compare: [
        { key: b64("a") },
        { key: b64("a2"), result: "NOT_EQUAL", version: "3" },
        { key: b64("b"), target: "MOD", result: "LESS", mod_revision: "7" },
        { key: b64("c"), target: "CREATE", result: "GREATER", create_revision: "2" },
        { key: b64("d"), target: "VALUE", result: "NOT_EQUAL", value: b64("x") },
        { key: b64("e"), target: "LEASE", lease: BIG_LEASE },
      ],
      success: [
        { request_put: { key: b64("a"), value: b64("1"), lease: BIG_LEASE } },
        { request_delete_range: { key: b64("q/"), range_end: b64("q0") } },
      ],
      failure: [{ request_range: { key: b64("a") } }],
    });
  });
});

describe("namespace", () => {
  const ns = () => gatewayClient({ namespace: "app/" });

  it("prefixes keys and range ends, and strips it from returned keys", async () => {
    const seen = route(server, "/v3/kv/range", () =>
      json({
        header: header(5),
        kvs: [kv({ key: "app/jobs/1", value: "x", create: 5, mod: 5, version: 1 })],
        count: "1",
      }),
    );
    const result = await ns().range({ prefix: "jobs/" });
    await ns().range({ key: "a", end: "c" });
    await ns().get("jobs/1");
    expect(seen[0]!.body).toEqual({ key: b64("app/jobs/"), range_end: b64("app/jobs0") });
    expect(seen[1]!.body).toEqual({ key: b64("app/a"), range_end: b64("app/c") });
    expect(seen[2]!.body).toEqual({ key: b64("app/jobs/1") });
    expect(result.kvs[0]!.key).toBe("jobs/1");
    expect(result.kvs[0]!.keyBytes).toEqual(new TextEncoder().encode("jobs/1"));
  });

  it("an empty prefix or end '\\0' stays inside the namespace", async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(5) }));
    await ns().range({ prefix: "" });
    await ns().range({ key: "m", end: "\0" });
    expect(seen[0]!.body).toEqual({ key: b64("app/"), range_end: b64("app0") });
    expect(seen[1]!.body).toEqual({ key: b64("app/m"), range_end: b64("app0") });
  });

  it("applies to puts, deletes and prev_kv answers", async () => {
    const puts = route(server, "/v3/kv/put", () =>
      json({ header: header(6), prev_kv: kv({ key: "app/k", value: "old", create: 2, mod: 3, version: 2 }) }),
    );
    const dels = route(server, "/v3/kv/deleterange", () =>
      json({
        header: header(7),
        deleted: "1",
        prev_kvs: [kv({ key: "app/k", value: "new", create: 2, mod: 6, version: 3 })],
      }),
    );
    const put = await ns().put("k", "new", { prevKv: true });
    const del = await ns().delete("k", { prevKv: true });
    expect(puts[0]!.body).toEqual({ key: b64("app/k"), value: b64("new"), prev_kv: true });
    expect(dels[0]!.body).toEqual({ key: b64("app/k"), prev_kv: true });
    expect(put.prevKv!.key).toBe("k");
    expect(del.prevKvs[0]!.key).toBe("k");
  });

  it("applies to txn compares and ops, and strips it from txn responses", async () => {
    const seen = route(server, "/v3/kv/txn", () =>
      json({
        header: header(9),
        responses: [
          {
            response_range: {
              header: header(9),
              kvs: [kv({ key: "app/lock", value: "o", create: 8, mod: 8, version: 1 })],
              count: "1",
            },
          },
        ],
      }),
    );
    const result = await ns()
      .txn()
      .if(cmp.version("lock", "==", 0))
      .then(op.put("lock", "me"))
      .else(op.get({ prefix: "lock" }))
      .commit();
    expect(seen[0]!.body).toEqual({
      compare: [{ key: b64("app/lock") }],
      success: [{ request_put: { key: b64("app/lock"), value: b64("me") } }],
      failure: [{ request_range: { key: b64("app/lock"), range_end: b64("app/locl") } }],
    });
    expect(result.succeeded).toBe(false);
    expect((result.responses[0] as { kvs: Array<{ key: string }> }).kvs[0]!.key).toBe("lock");
  });

  it("a compare and an operation shared by clients of two namespaces go in each one's, however often", async () => {
    const seen = route(server, "/v3/kv/txn", () => json({ header: header(9), succeeded: true }));
    // Each encodes once per keyspace and keeps it: what the other client's namespace made must not be reused.
    const absent = cmp.version("lock", "==", 0);
    const put = op.put("lock", "me");
    const [app, other, none] = [ns(), gatewayClient({ namespace: "other/" }), gatewayClient()];
    for (const client of [app, other, app, none, other]) await client.txn().if(absent).then(put).commit();
    const keys = seen.map(({ body }) => [
      (body.compare as Array<{ key: string }>)[0]!.key,
      (body.success as Array<{ request_put: { key: string } }>)[0]!.request_put.key,
    ]);
    const [inApp, inOther, bare] = [b64("app/lock"), b64("other/lock"), b64("lock")];
    expect(keys).toEqual([
      [inApp, inApp],
      [inOther, inOther],
      [inApp, inApp],
      [bare, bare],
      [inOther, inOther],
    ]);
  });

  it("applies to watch requests and strips it from watch events", async () => {
    const stream = controlledStream([
      createdLine(10),
      `{"result":{"header":${JSON.stringify(header(11))},"events":[{"kv":` +
        `${JSON.stringify(kv({ key: "app/jobs/1", value: "v", create: 11, mod: 11, version: 1 }))}}]}}\n`,
    ]);
    const seen = route(server, "/v3/watch", () => streamResponse(stream));
    const abort = new AbortController();
    for await (const batch of ns().watch({ prefix: "jobs/", signal: abort.signal, prevKv: true, noDelete: true })) {
      expect(batch.events[0]!.kv.key).toBe("jobs/1");
      break;
    }
    expect(seen[0]!.body).toEqual({
      create_request: { key: b64("app/jobs/"), range_end: b64("app/jobs0"), prev_kv: true, filters: ["NODELETE"] },
    });
  });

  it("applies to lease timetolive keys", async () => {
    route(server, "/v3/lease/timetolive", () =>
      json({ header: header(2), ID: BIG_LEASE, TTL: "20", grantedTTL: "30", keys: [b64("app/held")] }),
    );
    expect((await ns().lease.timeToLive(BIG_LEASE, { keys: true })).keys).toEqual(["held"]);
  });
});

describe("HTTP request", () => {
  afterEach(() => vi.restoreAllMocks());

  it("is a POST to /v3/... with JSON content-type, etcd-edge user-agent and hasleader", async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(2) }));
    await gatewayClient().get("k");
    const [req] = seen;
    expect(req!.method).toBe("POST");
    expect(req!.url).toBe(`${A}/v3/kv/range`);
    expect(req!.headers["content-type"]).toBe("application/json");
    expect(req!.headers["user-agent"]).toMatch(/^etcd-edge\/\d+\.\d+\.\d+/);
    expect(req!.headers["grpc-metadata-hasleader"]).toBe("true");
    expect(req!.headers.authorization).toBeUndefined();
  });

  it("requireLeader: false drops hasleader; extra headers are sent", async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(2) }));
    await gatewayClient({ requireLeader: false, headers: { "x-proxy-key": "s3cret" } }).get("k");
    expect(seen[0]!.headers["grpc-metadata-hasleader"]).toBeUndefined();
    expect(seen[0]!.headers["x-proxy-key"]).toBe("s3cret");
  });

  it("an endpoint with a trailing slash or a path prefix gives clean URLs", async () => {
    const seen = route(server, "/v3/kv/range", () => json({ header: header(2) }));
    const prefixed = route(server, "/etcd/v3/kv/range", () => json({ header: header(2) }), "http://proxy.test");
    await gatewayClient({ endpoints: `${A}/` }).get("k");
    await gatewayClient({ endpoints: ["http://proxy.test/etcd/"] }).get("k");
    expect(seen[0]!.url).toBe(`${A}/v3/kv/range`);
    expect(prefixed[0]!.url).toBe("http://proxy.test/etcd/v3/kv/range");
  });

  it(
    "the injected fetch gets exactly { method, headers, " +
      "body, signal, redirect } (no `cache`, which workerd rejects)",
    async () => {
      route(server, "/v3/kv/range", () => json({ header: header(2) }));
      const inits: Array<Record<string, unknown>> = [];
      const fetch = async (input: string, init: any) => {
        inits.push(init);
        return globalThis.fetch(input, init);
      };
      await gatewayClient({ fetch }).get("k");
      expect(inits).toHaveLength(1);
      const init = inits[0]!;
      expect(Object.keys(init).sort()).toEqual(["body", "headers", "method", "redirect", "signal"]);
      expect(init.redirect).toBe("manual");
      expect("cache" in init).toBe(false);
      expect(init.method).toBe("POST");
      expect(typeof init.body).toBe("string");
      expect(init.signal).toBeInstanceOf(AbortSignal);
    },
  );

  it(
    "the injected fetch is called without a receiver (`this` undefined: " + "workerd throws on a foreign `this`)",
    async () => {
      route(server, "/v3/kv/range", () => json({ header: header(2) }));
      const receivers: unknown[] = [];
      const fetch = function (this: unknown, input: string, init: any) {
        receivers.push(this);
        return globalThis.fetch(input, init);
      };
      const etcd = gatewayClient({ fetch });
      await etcd.get("k");
      await etcd.range({ prefix: "p" });
      expect(receivers).toEqual([undefined, undefined]);
    },
  );

  it("the global fetch is looked up on every call, not captured at construction", async () => {
    route(server, "/v3/kv/range", () => json({ header: header(2) }));
    const etcd = gatewayClient();
    const original = globalThis.fetch;
    const replacement = vi.fn((input: any, init: any) => original(input, init));
    globalThis.fetch = replacement as typeof fetch;
    try {
      await etcd.get("k");
    } finally {
      globalThis.fetch = original;
    }
    expect(replacement).toHaveBeenCalledTimes(1);
    expect(replacement.mock.calls[0]![0]).toBe(`${A}/v3/kv/range`);
  });
});

describe("a mutex's release", () => {
  it(
    "is its key's delete guarded by the acquisition's own revision, " + "the same request but for that revision",
    async () => {
      const mock = createMockEtcd();
      const txns: string[] = [];
      const fetch = ((url: string, init: RequestInit) => {
        if (url.endsWith("/v3/kv/txn")) txns.push(String(init.body));
        return mock.fetch(url, init as never);
      }) as never;
      const session = await new Etcd({ endpoints: [A], fetch }).session({ ttl: 30, keepAlive: "manual" });
      const mutex = session.mutex("m");
      const releases: Array<{ key: string; revision: number; body: unknown }> = [];
      for (let i = 0; i < 3; i++) {
        await mock.fetch(`${A}/v3/kv/put`, {
          method: "POST",
          body: JSON.stringify({ key: b64("other"), value: b64(String(i)) }),
        } as never);
        const lock = await mutex.lock();
        const before = txns.length;
        await lock.unlock();
        releases.push({ key: lock.key, revision: lock.revision, body: JSON.parse(txns[before]!) });
      }
      expect(new Set(releases.map((r) => r.revision)).size).toBe(3);
      // One after the other, the released key serves again (see keys.ts), each time a new incarnation.
      expect(new Set(releases.map((r) => r.key)).size).toBe(1);
      for (const { key, revision, body } of releases) {
        expect(body).toEqual({
          compare: [{ key: b64(key), target: "MOD", mod_revision: String(revision) }],
          success: [{ request_delete_range: { key: b64(key) } }],
        });
      }
      await session.close();
    },
  );
});

describe("a session's mutexes", () => {
  it("are one per name, kept for the 128 names used last, so a lock taken again builds no request again", async () => {
    const mock = createMockEtcd();
    const session = await new Etcd({ endpoints: [A], fetch: mock.fetch }).session({ ttl: 30, keepAlive: "manual" });
    const first = session.mutex("m");
    await (await session.mutex("m").lock()).unlock();
    expect(session.mutex("m")).toBe(first);
    const others = Array.from({ length: 127 }, (_, i) => session.mutex(`other/${i}`));
    // 128 names now; m, used again, is the last to go.
    expect(session.mutex("m")).toBe(first);
    // The 129th name drops the one used least lately: other/0.
    session.mutex("other/127");
    expect(session.mutex("m")).toBe(first);
    expect(session.mutex("other/1")).toBe(others[1]);
    expect(session.mutex("other/0")).not.toBe(others[0]);
    await session.close();
  });

  it(
    "join an empty line with one put under a compare that the line is empty, " +
      "and behind a holder read the holder and the two newest keys whole (their leases say they are contenders)",
    async () => {
      const mock = createMockEtcd();
      const exchanges: Array<{ body: string; answer: string }> = [];
      const fetch = (async (url: string, init: RequestInit) => {
        const response = await mock.fetch(url, init as never);
        if (!url.endsWith("/v3/kv/txn")) return response;
        const answer = await response.text();
        exchanges.push({ body: String(init.body), answer });
        return new Response(answer, { status: response.status });
      }) as never;
      const etcd = new Etcd({ endpoints: [A], fetch });
      const [first, second] = await Promise.all([
        etcd.session({ ttl: 30, keepAlive: "manual" }),
        etcd.session({ ttl: 30, keepAlive: "manual" }),
      ]);
      const prefix = { key: b64("m/"), range_end: b64("m0") };

      const held = await first.mutex("m").lock();
      expect(exchanges).toHaveLength(1);
      const empty = JSON.parse(exchanges[0]!.body) as {
        compare: unknown[];
        success: Array<Record<string, unknown>>;
        failure?: unknown[];
      };
      // "No key under the prefix": the compare's target, result and operand are all zero values, left out.
      expect(empty.compare).toEqual([prefix]);
      expect(empty.success.map((o) => Object.keys(o))).toEqual([["request_put"]]);
      // A new mutex guesses an empty line: the put alone, with nothing for a busy line.
      expect(empty.failure ?? []).toEqual([]);
      // The answer is the put's revision alone: no key-value to read, and the lock is held at that revision.
      const answer = JSON.parse(exchanges[0]!.answer) as {
        succeeded: boolean;
        header: { revision: string };
        responses: unknown[];
      };
      expect(answer.succeeded).toBe(true);
      expect(answer.responses).toEqual([{ response_put: { header: { revision: answer.header.revision } } }]);
      expect(held.revision).toBe(Number(answer.header.revision));

      const waiting = second.mutex("m").lock();
      // The put alone, refused (the line is busy), then the full join: the same compare, and a busy line's branch.
      await until("the second join", 5_000, () => exchanges.length === 3);
      const guessed = JSON.parse(exchanges[1]!.body) as {
        compare: unknown[];
        success: Array<{ request_put?: { key: string } }>;
        failure?: unknown[];
      };
      expect(guessed.compare).toEqual(empty.compare);
      // The waiter's key is its own: `m/<leaseHex>_<16 hex>`.
      const puts = guessed.success.map((o) => atob(o.request_put?.key ?? ""));
      expect(puts).toHaveLength(1);
      expect(puts[0]).toMatch(new RegExp(`^m/${second.leaseHex}_[0-9a-f]{16}$`));
      expect(guessed.failure ?? []).toEqual([]);
      expect((JSON.parse(exchanges[1]!.answer) as { succeeded?: boolean }).succeeded ?? false).toBe(false);
      const behind = JSON.parse(exchanges[2]!.body) as {
        compare: unknown[];
        success: Array<Record<string, unknown>>;
        failure: Array<{
          request_txn: { success: Array<{ request_range?: { limit?: string; keys_only?: boolean } }> };
        }>;
      };
      expect(behind.compare).toEqual(empty.compare);
      expect(behind.success.map((o) => Object.keys(o))).toEqual([["request_put"]]);
      const reads = behind.failure[0]!.request_txn.success.flatMap((o) => (o.request_range ? [o.request_range] : []));
      // Whole, not keys-only: etcd 3.7 leaves leases out of keys-only answers, and a key without one is no contender.
      expect(reads.map((r) => [r.limit, r.keys_only])).toEqual([
        ["1", undefined],
        ["2", undefined],
      ]);
      await held.unlock();
      await (await waiting).unlock();
      await Promise.all([first.close(), second.close()]);
    },
  );
});
