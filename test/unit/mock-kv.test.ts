import { describe, expect, it } from "vitest";
import { createMockEtcd } from "../../src/testing/index.js";
import { call } from "../support/mock.js";
import { b64 } from "../support/wire.js";

const BASE = "http://etcd.test:2379";
const HEADER = { cluster_id: expect.any(String), member_id: expect.any(String), raft_term: "2" };

describe("kv over mock.fetch", () => {
  it("starts at revision 1 and omits every zero value", async () => {
    const mock = createMockEtcd();
    const miss = await call(mock, "/v3/kv/range", { key: b64("a") });
    expect(miss).toEqual({ status: 200, body: { header: { ...HEADER, revision: "1" } } });
    await call(mock, "/v3/kv/put", { key: b64("a"), value: "" });
    const hit = await call(mock, "/v3/kv/range", { key: b64("a") });
    expect(hit.body).toEqual({
      header: { ...HEADER, revision: "2" },
      kvs: [{ key: b64("a"), create_revision: "2", mod_revision: "2", version: "1" }],
      count: "1",
    });
  });

  it("put returns prev_kv, keeps create_revision, bumps version; lowerCamel input works", async () => {
    const mock = createMockEtcd();
    await call(mock, "/v3/kv/put", { key: b64("k"), value: b64("1") });
    const second = await call(mock, "/v3/kv/put", { key: b64("k"), value: b64("2"), prevKv: true });
    expect(second.body).toEqual({
      header: { ...HEADER, revision: "3" },
      prev_kv: { key: b64("k"), create_revision: "2", mod_revision: "2", version: "1", value: b64("1") },
    });
    expect(mock.get("k")).toMatchObject({ value: "2", createRevision: 2, modRevision: 3, version: 2, lease: 0n });
  });

  it("put errors: lease not found, ignore_* on a missing key, value with ignore_value", async () => {
    const mock = createMockEtcd();
    expect(await call(mock, "/v3/kv/put", { key: b64("x"), lease: "123" })).toEqual({
      status: 404,
      body: {
        error: "etcdserver: requested lease not found",
        message: "etcdserver: requested lease not found",
        code: 5,
      },
    });
    expect((await call(mock, "/v3/kv/put", { key: b64("x"), ignore_lease: true })).body).toMatchObject({
      code: 3,
      message: "etcdserver: key not found",
    });
    expect((await call(mock, "/v3/kv/put", { key: b64("x"), value: b64("v"), ignore_value: true })).body).toMatchObject(
      {
        code: 3,
        message: "etcdserver: value is provided",
      },
    );
    expect((await call(mock, "/v3/kv/put", { key: b64("x"), lease: "5", ignore_lease: true })).body.message).toBe(
      "etcdserver: lease is provided",
    );
    expect((await call(mock, "/v3/kv/put", { key: "", value: b64("v") })).body.message).toBe(
      "etcdserver: key is not provided",
    );
    expect(mock.revision).toBe(1);
  });

  it("ignore_value keeps the value, ignore_lease keeps the lease", async () => {
    const mock = createMockEtcd();
    const grant = await call(mock, "/v3/lease/grant", { TTL: 30 });
    await call(mock, "/v3/kv/put", { key: b64("k"), value: b64("v"), lease: grant.body.ID });
    await call(mock, "/v3/kv/put", { key: b64("k"), ignore_value: true, ignore_lease: true });
    expect(mock.get("k")).toMatchObject({ value: "v", version: 2, lease: BigInt(grant.body.ID) });
  });

  it("range: range_end, \\0, limit/more/count, keys_only, count_only, sort, min/max filters", async () => {
    const mock = createMockEtcd();
    mock.put("s1", "b");
    mock.put("s2", "a");
    mock.put("s3", "c");
    mock.put("t", "z");
    const r = (extra: object) =>
      call(mock, "/v3/kv/range", { key: b64("s"), range_end: b64("t"), ...extra }).then((x) => x.body);
    expect((await r({})).kvs.map((kv: any) => atob(kv.key))).toEqual(["s1", "s2", "s3"]);
    expect((await call(mock, "/v3/kv/range", { key: b64("s2"), range_end: "AA==" })).body.count).toBe("3");
    const limited = await r({ limit: 1 });
    expect([limited.kvs.length, limited.more, limited.count]).toEqual([1, true, "3"]);
    expect((await r({ keys_only: true })).kvs[0]).toEqual({
      key: b64("s1"),
      create_revision: "2",
      mod_revision: "2",
      version: "1",
    });
    expect(await r({ count_only: true, limit: 1 })).toEqual({ header: { ...HEADER, revision: "5" }, count: "3" });
    expect((await r({ sort_target: "VALUE" })).kvs.map((kv: any) => atob(kv.value))).toEqual(["a", "b", "c"]);
    expect((await r({ sort_target: 3, sort_order: 2 })).kvs.map((kv: any) => atob(kv.key))).toEqual(["s3", "s2", "s1"]);
    expect((await r({ sortOrder: "DESCEND", limit: 2 })).kvs.map((kv: any) => atob(kv.key))).toEqual(["s3", "s2"]);
    // count is the range's total before the revision filters, exactly as etcd 3.4 answers.
    const filtered = await r({ min_mod_revision: 3, limit: 1 });
    expect([filtered.kvs.map((kv: any) => atob(kv.key)), filtered.more, filtered.count]).toEqual([["s2"], true, "3"]);
    expect((await r({ max_create_revision: 2 })).kvs).toHaveLength(1);
    expect((await call(mock, "/v3/kv/range", { key: b64("t"), range_end: b64("s") })).body.kvs).toBeUndefined();
  });

  it("keys compare bytewise", async () => {
    const mock = createMockEtcd();
    for (const key of [[0xff], [0x01], [0x80, 0x00], [0x7f]]) mock.put(new Uint8Array(key), "v");
    const all = await call(mock, "/v3/kv/range", { key: "AA==", range_end: "AA==" });
    expect(all.body.kvs.map((kv: any) => kv.key)).toEqual(["AQ==", "fw==", "gAA=", "/w=="]);
  });

  it("deleterange: one revision for many keys, prev_kvs, no bump when nothing matched", async () => {
    const mock = createMockEtcd();
    mock.put("d/1", "1");
    mock.put("d/2", "2");
    const none = await call(mock, "/v3/kv/deleterange", { key: b64("zzz") });
    expect(none.body).toEqual({ header: { ...HEADER, revision: "3" } });
    const del = await call(mock, "/v3/kv/deleterange", { key: b64("d/"), range_end: b64("d0"), prev_kv: true });
    expect(del.body).toMatchObject({ header: { revision: "4" }, deleted: "2" });
    expect(del.body.prev_kvs).toHaveLength(2);
    expect(mock.keys()).toEqual([]);
    mock.put("d/1", "again");
    expect(mock.get("d/1")).toMatchObject({ createRevision: 5, version: 1 });
  });

  it("history: old revisions readable until compaction, then code 11; future revision is code 11", async () => {
    const mock = createMockEtcd();
    mock.put("h", "1");
    mock.put("h", "2");
    await call(mock, "/v3/kv/deleterange", { key: b64("h") });
    const at2 = await call(mock, "/v3/kv/range", { key: b64("h"), revision: 2 });
    expect(at2.body.kvs[0]).toMatchObject({ value: b64("1"), mod_revision: "2" });
    expect(at2.body.header.revision).toBe("4");
    expect(await call(mock, "/v3/kv/range", { key: b64("h"), revision: 9 })).toEqual({
      status: 400,
      body: {
        error: "etcdserver: mvcc: required revision is a future revision",
        message: "etcdserver: mvcc: required revision is a future revision",
        code: 11,
      },
    });
    expect((await call(mock, "/v3/kv/compaction", { revision: 3 })).body).toEqual({
      header: { ...HEADER, revision: "4" },
    });
    expect((await call(mock, "/v3/kv/range", { key: b64("h"), revision: 3 })).body.kvs[0].value).toBe(b64("2"));
    const compacted = await call(mock, "/v3/kv/range", { key: b64("h"), revision: 2 });
    expect(compacted).toMatchObject({
      status: 400,
      body: { code: 11, message: "etcdserver: mvcc: required revision has been compacted" },
    });
    expect((await call(mock, "/v3/kv/compaction", { revision: 3 })).status).toBe(400);
    expect((await call(mock, "/v3/kv/compaction", { revision: 40, physical: true })).body.message).toBe(
      "etcdserver: mvcc: required revision is a future revision",
    );
  });

  it("bad input: base64, JSON, enum; unknown fields ignored", async () => {
    const mock = createMockEtcd();
    expect(await call(mock, "/v3/kv/range", { key: "YQ" })).toEqual({
      status: 400,
      body: { error: "illegal base64 data at input byte 0", message: "illegal base64 data at input byte 0", code: 3 },
    });
    expect((await call(mock, "/v3/kv/range", { key: "a-_b" })).body.code).toBe(3);
    expect((await call(mock, "/v3/kv/range", { key: b64("a"), sort_order: "BOGUS" })).body.message).toBe(
      'unknown value "BOGUS" for enum etcdserverpb.RangeRequest_SortOrder',
    );
    expect((await call(mock, "/v3/kv/range", { key: b64("a"), bogus: 1 })).status).toBe(200);
    const res = await mock.fetch(`${BASE}/v3/kv/range`, { method: "POST", body: '{"key":"YQ==",' });
    expect([res.status, await res.json()]).toEqual([
      400,
      { error: "unexpected EOF", message: "unexpected EOF", code: 3 },
    ]);
    expect((await call(mock, "/v3/kv/range", {})).body.message).toBe("etcdserver: key is not provided");
  });

  it("HTTP surface: 404 text for unknown paths, 405 for GET, /v3beta alias, health", async () => {
    const mock = createMockEtcd();
    const unknown = await mock.fetch(`${BASE}/v3/kv/nope`, { method: "POST", body: "{}" });
    expect([unknown.status, await unknown.text()]).toEqual([404, "Not Found\n"]);
    const get = await mock.fetch(`${BASE}/v3/kv/range`);
    expect([get.status, await get.text()]).toEqual([405, "Method Not Allowed\n"]);
    const beta = await mock.fetch(`${BASE}/v3beta/kv/range`, {
      method: "POST",
      body: JSON.stringify({ key: b64("a") }),
    });
    expect(beta.status).toBe(200);
    expect(await (await mock.fetch(`${BASE}/health`)).json()).toEqual({ health: "true" });
    // mock.fetch needs no receiver and accepts Request and URL inputs.
    const { fetch } = mock;
    expect(
      (await fetch(new Request(`${BASE}/v3/kv/range`, { method: "POST", body: JSON.stringify({ key: b64("a") }) })))
        .status,
    ).toBe(200);
    expect(
      (await fetch(new URL(`${BASE}/v3/kv/range`), { method: "POST", body: JSON.stringify({ key: b64("a") }) })).status,
    ).toBe(200);
  });

  it("inspection helpers and reset", async () => {
    const mock = createMockEtcd();
    mock.put("app/a", "1");
    mock.put("app/b", "2");
    mock.put("other", "3");
    expect(mock.keys("app/")).toEqual(["app/a", "app/b"]);
    expect(mock.revision).toBe(4);
    mock.reset();
    expect([mock.revision, mock.keys(), mock.now()]).toEqual([1, [], 0]);
  });
});
