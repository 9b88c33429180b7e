// Decoding of the gateway's protojson answers: omitted zero values, int64 strings, big IDs, base64.
import { describe, expect, it } from "vitest";
import { cmp, EtcdError, op } from "../../src/index.js";
import { rejection } from "../support/async.js";
import { gatewayClient, jsonText, json, route, useGateway } from "../support/gateway.js";
import { BIG_LEASE, CLUSTER_ID, MEMBER_ID, b64, header, kv } from "../support/wire.js";

const server = useGateway();

describe("omitted protojson fields get zero values", () => {
  it("a range that found nothing answers only the header: kvs [], count 0, more false", async () => {
    route(server, "/v3/kv/range", () => json({ header: header(7) }));
    const result = await gatewayClient().range({ prefix: "nothing/" });
    expect(result.kvs).toEqual([]);
    expect(result.count).toBe(0);
    expect(result.more).toBe(false);
    expect(result.header).toEqual({ clusterId: CLUSTER_ID, memberId: MEMBER_ID, revision: 7, raftTerm: 2 });
    expect(await gatewayClient().get("missing")).toBeUndefined();
  });

  it("a body of only {} (no header at all) is BAD_RESPONSE: etcd always sends a header with a revision", async () => {
    route(server, "/v3/kv/range", () => jsonText("{}"));
    const error = await rejection(gatewayClient().range({ key: "k" }));
    expect(error.code).toBe("BAD_RESPONSE");
  });

  it("a KeyValue without value, lease, version or create_revision decodes to '', '0', 0, 0", async () => {
    route(server, "/v3/kv/range", () =>
      json({ header: header(9), kvs: [{ key: b64("empty"), mod_revision: "9" }], count: "1" }),
    );
    const got = await gatewayClient().get("empty");
    expect(got).toMatchObject({ key: "empty", value: "", lease: "0", version: 0, createRevision: 0, modRevision: 9 });
    expect(got!.valueBytes).toEqual(new Uint8Array(0));
  });

  it("a failed txn has no `succeeded`: it is false and the else-responses are decoded", async () => {
    route(server, "/v3/kv/txn", () =>
      json({
        header: header(12),
        responses: [
          {
            response_range: {
              header: header(12),
              kvs: [kv({ key: "lock", value: "owner", create: 3, mod: 4, version: 2 })],
              count: "1",
            },
          },
        ],
      }),
    );
    const result = await gatewayClient()
      .txn()
      .if(cmp.version("lock", "==", 0))
      .then(op.put("lock", "me"))
      .else(op.get("lock"))
      .commit();
    expect(result.succeeded).toBe(false);
    expect(result.responses).toHaveLength(1);
    const [range] = result.responses as [{ kvs: Array<{ key: string; value: string; version: number }> }];
    expect(range.kvs[0]).toMatchObject({ key: "lock", value: "owner", version: 2 });
  });

  it("a succeeded txn whose put response is an empty object still decodes", async () => {
    route(server, "/v3/kv/txn", () =>
      json({ header: header(13), succeeded: true, responses: [{ response_put: { header: header(13) } }] }),
    );
    const result = await gatewayClient()
      .txn()
      .if(cmp.version("lock", "==", 0))
      .then(op.put("lock", "me"))
      .commit();
    expect(result.succeeded).toBe(true);
    expect(result.responses[0]).toMatchObject({ header: { revision: 13 }, prevKv: undefined });
  });

  it("a put without prev_kv has prevKv undefined; a delete of nothing has deleted 0 and prevKvs []", async () => {
    route(server, "/v3/kv/put", () => json({ header: header(5) }));
    route(server, "/v3/kv/deleterange", () => json({ header: header(5) }));
    expect((await gatewayClient().put("k", "v")).prevKv).toBeUndefined();
    expect(await gatewayClient().delete("k")).toMatchObject({ deleted: 0, prevKvs: [] });
  });
});

describe("int64 fields", () => {
  it("int64 strings become numbers (revision, count, versions)", async () => {
    route(server, "/v3/kv/range", () =>
      json({
        header: header("123456", "17"),
        kvs: [kv({ key: "a", value: "1", create: 100, mod: 123456, version: 42 })],
        more: true,
        count: "5000",
      }),
    );
    const result = await gatewayClient().range({ prefix: "a", limit: 1 });
    expect(result.header.revision).toBe(123456);
    expect(result.header.raftTerm).toBe(17);
    expect(result.count).toBe(5000);
    expect(result.more).toBe(true);
    expect(result.kvs[0]).toMatchObject({ createRevision: 100, modRevision: 123456, version: 42 });
    expect(typeof result.kvs[0]!.modRevision).toBe("number");
  });

  it("cluster and member IDs above 2^53 stay exact decimal strings", async () => {
    route(server, "/v3/kv/range", () => json({ header: header(1) }));
    const { header: h } = await gatewayClient().range({ key: "k" });
    expect(h.clusterId).toBe(CLUSTER_ID);
    expect(h.memberId).toBe(MEMBER_ID);
  });

  it("a revision above Number.MAX_SAFE_INTEGER is refused with BAD_RESPONSE, not rounded", async () => {
    route(server, "/v3/kv/range", () => json({ header: { ...header(1), revision: "9007199254740993" } }));
    const error = await rejection(gatewayClient().range({ key: "k" }));
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("BAD_RESPONSE");
    expect(error.message).toContain("9007199254740993");
  });

  it("a mod_revision above Number.MAX_SAFE_INTEGER in a KeyValue is BAD_RESPONSE too", async () => {
    route(server, "/v3/kv/range", () =>
      json({ header: header(1), kvs: [{ key: b64("k"), mod_revision: "18014398509481984" }], count: "1" }),
    );
    const error = await rejection(gatewayClient().get("k"));
    expect(error).toBeInstanceOf(EtcdError);
    expect(error.code).toBe("BAD_RESPONSE");
  });

  it("lease IDs above 2^53 stay exact strings: grant, kv.lease, timetolive keys", async () => {
    route(server, "/v3/lease/grant", () =>
      jsonText(`{"header":${JSON.stringify(header(3))},"ID":"${BIG_LEASE}","TTL":"30"}`),
    );
    route(server, "/v3/kv/range", () =>
      json({
        header: header(4),
        kvs: [kv({ key: "held", value: "x", create: 4, mod: 4, version: 1, lease: BIG_LEASE })],
        count: "1",
      }),
    );
    route(server, "/v3/lease/timetolive", () =>
      json({ header: header(4), ID: BIG_LEASE, TTL: "29", grantedTTL: "30", keys: [b64("held")] }),
    );
    const etcd = gatewayClient();
    const grant = await etcd.lease.grant(30);
    expect(grant).toMatchObject({ id: BIG_LEASE, ttl: 30 });
    expect(grant.id).toBe("7587899071857085703");
    expect((await etcd.get("held"))!.lease).toBe(BIG_LEASE);
    const ttl = await etcd.lease.timeToLive(grant.id, { keys: true });
    expect(ttl).toMatchObject({ id: BIG_LEASE, ttl: 29, grantedTtl: 30, keys: ["held"] });
  });

  it("keepalive of an expired lease (no TTL on the wire) is LEASE_NOT_FOUND; timetolive TTL -1 too", async () => {
    route(server, "/v3/lease/keepalive", () =>
      jsonText(`{"result":{"header":${JSON.stringify(header(3))},"ID":"${BIG_LEASE}"}}\n`),
    );
    route(server, "/v3/lease/timetolive", () => json({ header: header(3), ID: BIG_LEASE, TTL: "-1" }));
    const etcd = gatewayClient();
    const keep = await rejection(etcd.lease.keepAliveOnce(BIG_LEASE));
    expect(keep).toBeInstanceOf(EtcdError);
    expect(keep.code).toBe("LEASE_NOT_FOUND");
    const ttl = await rejection(etcd.lease.timeToLive(BIG_LEASE));
    expect(ttl.code).toBe("LEASE_NOT_FOUND");
  });

  it("keepalive reads the first NDJSON line of the stream", async () => {
    route(server, "/v3/lease/keepalive", () =>
      jsonText(`{"result":{"header":${JSON.stringify(header(3))},"ID":"${BIG_LEASE}","TTL":"30"}}\n`),
    );
    expect(await gatewayClient().lease.keepAliveOnce(BIG_LEASE)).toMatchObject({ id: BIG_LEASE, ttl: 30 });
  });
});

describe("bytes", () => {
  it("decodes padded base64 of every padding length, multi-byte UTF-8 and binary values", async () => {
    const binary = new Uint8Array([0x00, 0xff, 0x80, 0x0a, 0xfe]);
    route(server, "/v3/kv/range", () =>
      jsonText(
        JSON.stringify({
          header: header(8),
          kvs: [
            { key: "YQ==", value: "YQ==", mod_revision: "2" }, // "a": two padding chars
            { key: "YWI=", value: "YWI=", mod_revision: "3" }, // "ab": one
            { key: "YWJj", value: "YWJj", mod_revision: "4" }, // "abc": none
            { key: b64("clé/✓"), value: b64("héllo ✓ 🎉"), mod_revision: "5" },
            { key: b64("bin"), value: b64(binary), mod_revision: "6" },
          ],
          count: "5",
        }),
      ),
    );
    const { kvs } = await gatewayClient().range({ prefix: "" });
    expect(kvs.map((k) => [k.key, k.value])).toEqual([
      ["a", "a"],
      ["ab", "ab"],
      ["abc", "abc"],
      ["clé/✓", "héllo ✓ 🎉"],
      ["bin", new TextDecoder().decode(binary)],
    ]);
    expect(kvs[3]!.keyBytes).toEqual(new TextEncoder().encode("clé/✓"));
    expect(kvs[3]!.valueBytes).toEqual(new TextEncoder().encode("héllo ✓ 🎉"));
    expect(kvs[4]!.valueBytes).toBeInstanceOf(Uint8Array);
    expect(Array.from(kvs[4]!.valueBytes)).toEqual(Array.from(binary));
  });

  it("a KeyValue carries key/value strings and keyBytes/valueBytes", async () => {
    route(server, "/v3/kv/range", () =>
      json({ header: header(8), kvs: [kv({ key: "k1", value: "v1", create: 2, mod: 8, version: 3 })], count: "1" }),
    );
    const got = (await gatewayClient().get("k1"))!;
    expect(Object.keys(got).sort()).toEqual(
      ["createRevision", "key", "keyBytes", "lease", "modRevision", "value", "valueBytes", "version"].sort(),
    );
    expect(got).toMatchObject({ key: "k1", value: "v1", createRevision: 2, modRevision: 8, version: 3, lease: "0" });
    expect(got.keyBytes).toEqual(new TextEncoder().encode("k1"));
    expect(got.valueBytes).toEqual(new TextEncoder().encode("v1"));
  });
});
