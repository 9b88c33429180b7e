import { describe, expect, it } from "vitest";
import { createMockEtcd, type MockEtcd } from "../../src/testing/index.js";
import { call } from "../support/mock.js";
import { b64 } from "../support/wire.js";

const txn = (mock: MockEtcd, body: unknown) => call(mock, "/v3/kv/txn", body);

const put = (key: string, value = "v") => ({ request_put: { key: b64(key), value: b64(value) } });
const get = (key: string) => ({ request_range: { key: b64(key) } });

describe("txn", () => {
  it("{key} alone means 'does not exist'; all writes share one revision; failed txn omits succeeded", async () => {
    const mock = createMockEtcd();
    const first = await txn(mock, {
      compare: [{ key: b64("q") }],
      success: [put("q"), put("r"), get("q")],
      failure: [get("q")],
    });
    expect(first.body.succeeded).toBe(true);
    expect(first.body.header.revision).toBe("2");
    expect(first.body.responses).toEqual([
      { response_put: { header: { revision: "2" } } },
      { response_put: { header: { revision: "2" } } },
      {
        response_range: {
          header: { revision: "2" },
          kvs: [{ key: b64("q"), create_revision: "2", mod_revision: "2", version: "1", value: b64("v") }],
          count: "1",
        },
      },
    ]);
    const second = await txn(mock, { compare: [{ key: b64("q") }], success: [put("q")], failure: [get("q")] });
    expect(second.body).not.toHaveProperty("succeeded");
    expect(second.body.header.revision).toBe("2");
  });

  it("a read before a write in the same txn sees the old revision; read-only txn does not bump", async () => {
    const mock = createMockEtcd();
    mock.put("a", "1");
    const r = await txn(mock, { success: [get("a"), put("a", "2")] });
    expect(r.body.responses[0].response_range.header.revision).toBe("2");
    expect(r.body.responses[1].response_put.header.revision).toBe("3");
    const ro = await txn(mock, { success: [get("a")] });
    expect(ro.body.header.revision).toBe("3");
    expect(mock.revision).toBe(3);
  });

  it("missing key compares as zero KeyValue, but a VALUE compare on it always fails", async () => {
    const mock = createMockEtcd();
    const ok = async (compare: object) =>
      (await txn(mock, { compare: [{ key: b64("missing"), ...compare }] })).body.succeeded === true;
    expect(await ok({ target: "CREATE", result: "EQUAL", create_revision: "0" })).toBe(true);
    expect(await ok({ target: "MOD", result: "LESS", mod_revision: "1" })).toBe(true);
    expect(await ok({ target: "LEASE", result: "EQUAL" })).toBe(true);
    expect(await ok({ target: "VALUE", result: "EQUAL", value: "" })).toBe(false);
    expect(await ok({ target: "VALUE", result: "NOT_EQUAL", value: b64("x") })).toBe(false);
  });

  it("VALUE compares bytewise; only the union field matching the target counts", async () => {
    const mock = createMockEtcd();
    mock.put(new TextEncoder().encode("k"), new Uint8Array([0x80]));
    const ok = async (compare: object) =>
      (await txn(mock, { compare: [{ key: b64("k"), ...compare }] })).body.succeeded === true;
    expect(await ok({ target: "VALUE", result: "GREATER", value: b64("\x7f") })).toBe(true);
    expect(await ok({ target: 3, result: 2, value: "gAA=" })).toBe(true); // [0x80] < [0x80,0x00]
    expect(await ok({ target: "VERSION", result: "EQUAL", mod_revision: "2" })).toBe(false); // version 1 vs 0
    expect(await ok({ target: "VERSION", result: "EQUAL", version: "1" })).toBe(true);
  });

  it("range compares require every key in range to satisfy", async () => {
    const mock = createMockEtcd();
    mock.put("p/a", "1");
    mock.put("p/b", "2");
    const ok = async (compare: object) =>
      (await txn(mock, { compare: [{ key: b64("p/"), range_end: b64("p0"), ...compare }] })).body.succeeded === true;
    expect(await ok({ target: "VERSION", result: "GREATER", version: "0" })).toBe(true);
    expect(await ok({ target: "MOD", result: "GREATER", mod_revision: "2" })).toBe(false);
    expect(await ok({ target: "MOD", result: "LESS", mod_revision: "4" })).toBe(true);
  });

  it("nested txns: compares see pre-txn state; nested header is empty", async () => {
    const mock = createMockEtcd();
    const r = await txn(mock, {
      success: [put("a"), { request_txn: { compare: [{ key: b64("a") }], success: [put("b")], failure: [put("c")] } }],
    });
    expect(r.body.responses[1]).toEqual({
      response_txn: { header: {}, succeeded: true, responses: [{ response_put: { header: { revision: "2" } } }] },
    });
    expect(mock.keys()).toEqual(["a", "b"]);
  });

  it("3.4's request errors", async () => {
    const mock = createMockEtcd();
    const dup = await txn(mock, { success: [put("d"), { request_delete_range: { key: b64("d") } }] });
    expect(dup).toEqual({
      status: 400,
      body: {
        error: "etcdserver: duplicate key given in txn request",
        message: "etcdserver: duplicate key given in txn request",
        code: 3,
      },
    });
    expect((await txn(mock, { success: [put("d")], failure: [put("d")] })).status).toBe(200);
    expect(
      (
        await txn(mock, {
          success: [{ request_delete_range: { key: b64("x") } }, { request_delete_range: { key: b64("x") } }],
        })
      ).status,
    ).toBe(200);
    const many = Array.from({ length: 129 }, (_, i) => get(`k${i}`));
    expect((await txn(mock, { success: many })).body.message).toBe("etcdserver: too many operations in txn request");
    expect((await txn(mock, { success: many.slice(0, 128) })).status).toBe(200);
    expect((await txn(mock, { success: [{}] })).body.message).toBe("etcdserver: key not found");
    expect((await txn(mock, { compare: [{ key: "" }] })).body.message).toBe("etcdserver: key is not provided");
    expect((await txn(mock, { success: [{ request_put: { key: b64("z"), lease: "9" } }] })).status).toBe(404);
    expect((await txn(mock, { success: [{ request_range: { key: b64("z"), revision: 99 } }] })).body.code).toBe(11);
  });

  it("a txn that would panic etcd 3.4 answers 500 code 13 and changes nothing", async () => {
    const mock = createMockEtcd();
    mock.put("cc", "1");
    const r = await txn(mock, {
      success: [
        { request_delete_range: { key: b64("c"), range_end: "AA==" } },
        { request_put: { key: b64("cc"), ignore_value: true } },
      ],
    });
    expect([r.status, r.body.code]).toEqual([500, 13]);
    expect([mock.revision, mock.get("cc")?.value]).toEqual([2, "1"]);
  });
});
