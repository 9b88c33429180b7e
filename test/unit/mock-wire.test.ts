// How the mock reads request bodies, per etcd version: exact int64s in any spelling etcd accepts, etcd's refusals
// word for word, byte arrays, trailing data, request size limits, and errors on the streaming endpoints.
// Every expected answer here was observed on etcd 3.4.23 and 3.5.16 (Debian builds).
import { describe, expect, it } from "vitest";
import { createMockEtcd, type MockEtcd } from "../../src/testing/index.js";
import { b64 } from "../support/wire.js";

const BASE = "http://etcd.test:2379";

async function raw(mock: MockEtcd, path: string, body: string) {
  const res = await mock.fetch(`${BASE}${path}`, { method: "POST", body });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // NDJSON or text
  }
  return { status: res.status, body: parsed, text };
}

const v34 = () => createMockEtcd({ version: "3.4" });
const v35 = () => createMockEtcd({ version: "3.5" });

describe("int64 fields", () => {
  it("a lease ID beyond 2^53 sent as a bare JSON number keeps every digit (3.4 and 3.5)", async () => {
    for (const mock of [v34(), v35()]) {
      const grant = await raw(mock, "/v3/lease/grant", '{"TTL":60,"ID":7057220748511990900}');
      expect(grant.body.ID).toBe("7057220748511990900");
      const put = await raw(mock, "/v3/kv/put", `{"key":"${b64("k")}","lease":7057220748511990900}`);
      expect(put.status).toBe(200);
      expect(mock.get("k")?.lease).toBe(7057220748511990900n);
      const ttl = await raw(mock, "/v3/lease/timetolive", '{"ID":7057220748511990900,"keys":true}');
      // 59, not 60: etcd truncates the time left, and time always passed since the grant.
      expect(ttl.body).toMatchObject({ ID: "7057220748511990900", TTL: "59", grantedTTL: "60", keys: [b64("k")] });
    }
  });

  it("3.4 refuses exponents, fractions and out-of-range integers as json.Unmarshal does", async () => {
    const mock = v34();
    const cases: [string, string][] = [
      ['{"TTL":1e2}', "json: cannot unmarshal number 1e2 into Go value of type int64"],
      ['{"TTL":2.0}', "json: cannot unmarshal number 2.0 into Go value of type int64"],
      [
        '{"TTL":99999999999999999999}',
        "json: cannot unmarshal number 99999999999999999999 into Go value of type int64",
      ],
      ['{"TTL":"05"}', "invalid character '5' after top-level value"],
      ['{"TTL":"+5"}', "invalid character '+' looking for beginning of value"],
      ['{"TTL":true}', "json: cannot unmarshal bool into Go value of type int64"],
      ['{"TTL":[]}', "json: cannot unmarshal array into Go value of type int64"],
    ];
    for (const [body, message] of cases) {
      expect(await raw(mock, "/v3/lease/grant", body)).toMatchObject({
        status: 400,
        body: { error: message, message, code: 3 },
      });
    }
    // A quoted number may carry spaces; "-0" is 0.
    expect((await raw(mock, "/v3/lease/grant", '{"TTL":" 5","ID":"1"}')).body.TTL).toBe("5");
    expect((await raw(mock, "/v3/lease/grant", '{"TTL":-0,"ID":"2"}')).body.TTL).toBe("2");
  });

  it("3.5 takes any exact integer spelling and refuses the rest with protojson's line:column", async () => {
    const mock = v35();
    expect((await raw(mock, "/v3/lease/grant", '{"TTL":1e2,"ID":"1"}')).body.TTL).toBe("100");
    expect((await raw(mock, "/v3/lease/grant", '{"TTL":"1.5e1","ID":"2"}')).body.TTL).toBe("15");
    expect((await raw(mock, "/v3/lease/grant", '{"TTL":2.0,"ID":"3"}')).body.TTL).toBe("2");
    const cases: [string, string][] = [
      ['{"TTL":99999999999999999999}', "(line 1:8): invalid value for int64 field TTL: 99999999999999999999"],
      ['{"TTL":" 5"}', '(line 1:8): invalid value for int64 field TTL: " 5"'],
      ['{"key":"YQ==","limit":1.5}', "(line 1:23): invalid value for int64 field limit: 1.5"],
      ['{"key":"YQ==","keys_only":"true"}', '(line 1:27): invalid value for bool field keysOnly: "true"'],
      ['{"key":"YQ==","limit":1,"limit":2}', '(line 1:25): duplicate field "limit"'],
      ["[1]", "syntax error (line 1:1): unexpected token ["],
    ];
    for (const [body, message] of cases) {
      const path = body.includes("TTL") ? "/v3/lease/grant" : "/v3/kv/range";
      // protobuf-go's prefix: "proto:" and a no-break space, in Debian's 3.5.16 build.
      expect(await raw(mock, path, body)).toEqual({
        status: 400,
        body: { code: 3, message: `proto:\u00a0${message}` },
        text: expect.any(String),
      });
    }
  });
});

describe("bytes, framing and enums", () => {
  it("3.4 takes keys as byte arrays and ignores what follows the first JSON value; 3.5 refuses the array", async () => {
    const mock = v34();
    mock.put("ab", "1");
    expect((await raw(mock, "/v3/kv/range", '{"key":[97,98]}')).body.kvs[0].value).toBe(b64("1"));
    expect((await raw(mock, "/v3/kv/range", `{"key":"${b64("ab")}"} trailing {`)).body.count).toBe("1");
    expect((await raw(mock, "/v3/kv/range", '{"key":[300]}')).body.message).toBe(
      "json: cannot unmarshal number 300 into Go value of type uint8",
    );
    expect((await raw(mock, "/v3/kv/range", '{"key":"YQ"}')).body.message).toBe("illegal base64 data at input byte 0");
    // Go's base64 skips newlines.
    expect((await raw(mock, "/v3/kv/range", '{"key":"YW\\nI="}')).body.count).toBe("1");
    const mock35 = v35();
    expect((await raw(mock35, "/v3/kv/range", '{"key":[97,98]}')).body.message).toBe(
      "proto:\u00a0(line 1:8): invalid value for bytes field key: [",
    );
    // protojson takes unpadded and URL-safe base64.
    mock35.put("a", "1");
    expect((await raw(mock35, "/v3/kv/range", '{"key":"YQ"}')).body.count).toBe("1");
  });

  it("names: lowerCamel wins over the proto name in 3.4; unknown enum names: 3.4 refuses, 3.5 ignores", async () => {
    const mock = v34();
    mock.put("k", "v");
    expect(
      (await raw(mock, "/v3/kv/range", `{"key":"${b64("k")}","keys_only":true,"keysOnly":false}`)).body.kvs[0].value,
    ).toBe(b64("v"));
    expect((await raw(mock, "/v3/kv/range", `{"key":"${b64("k")}","sort_order":"descend"}`)).body.message).toBe(
      'unknown value "descend" for enum etcdserverpb.RangeRequest_SortOrder',
    );
    expect((await raw(v35(), "/v3/kv/range", `{"key":"${b64("k")}","sort_order":"descend"}`)).status).toBe(200);
  });

  it("3.4 drops the connection on a null in a repeated message field; 3.5 refuses it", async () => {
    await expect(v34().fetch(`${BASE}/v3/kv/txn`, { method: "POST", body: '{"compare":[null]}' })).rejects.toThrow(
      TypeError,
    );
    expect((await raw(v35(), "/v3/kv/txn", '{"compare":[null]}')).body.message).toBe(
      "proto:\u00a0syntax error (line 1:13): unexpected token null",
    );
  });

  it("unknown path and wrong method: 3.4 text 404/405, 3.5 JSON 404/501", async () => {
    expect(await raw(v34(), "/v3/kv/nope", "{}")).toMatchObject({ status: 404, text: "Not Found\n" });
    expect(await raw(v35(), "/v3/kv/nope", "{}")).toMatchObject({
      status: 404,
      body: { code: 5, message: "Not Found" },
    });
    const get = await v35().fetch(`${BASE}/v3/kv/range`);
    expect([get.status, await get.json()]).toEqual([501, { code: 12, message: "Method Not Allowed" }]);
    expect((await raw(v35(), "/v3/auth/authenticate", '{"name":"x"}')).status).toBe(400);
    expect((await raw(v34(), "/v3/auth/authenticate", '{"name":"x"}')).status).toBe(412);
  });
});

describe("request size limits", () => {
  const put = (n: number) => JSON.stringify({ key: b64("a"), value: btoa("x".repeat(n)) });

  it("a proposal over 1.5 MiB is 400 'request is too large'; a message over 2 MiB is 429 with its size", async () => {
    const mock = v34();
    // The mock's default member ID makes a 9-byte request ID, as most of etcd's: 1,572,840 bytes of value fit.
    expect((await raw(mock, "/v3/kv/put", put(1_572_840))).status).toBe(200);
    expect(await raw(mock, "/v3/kv/put", put(1_572_841))).toMatchObject({
      status: 400,
      body: { code: 3, message: "etcdserver: request is too large" },
    });
    expect(await raw(mock, "/v3/kv/put", put(2_097_152))).toMatchObject({
      status: 429,
      body: { code: 8, message: "grpc: received message larger than max (2097160 vs. 2097152)" },
    });
    // A range does not go through raft: only the gRPC limit applies.
    expect((await raw(mock, "/v3/kv/range", JSON.stringify({ key: btoa("k".repeat(1_600_000)) }))).status).toBe(200);
    expect(mock.revision).toBe(2);
  });

  it("maxRequestBytes sets the limits", async () => {
    const mock = createMockEtcd({ maxRequestBytes: 1024 });
    expect((await raw(mock, "/v3/kv/put", put(900))).status).toBe(200);
    expect((await raw(mock, "/v3/kv/put", put(1100))).body.message).toBe("etcdserver: request is too large");
    expect((await raw(mock, "/v3/kv/put", put(600_000))).body.message).toBe(
      "grpc: received message larger than max (600007 vs. 525312)",
    );
  });
});

describe("streaming endpoints", () => {
  it(
    "keepalive: several requests per body, one line each; " +
      "a bad first request is 500 code 2 on 3.4, an empty answer on 3.5",
    async () => {
      const mock = v34();
      await raw(mock, "/v3/lease/grant", '{"TTL":60,"ID":"7"}');
      const lines = (await raw(mock, "/v3/lease/keepalive", '{"ID":"7"}{"ID":8}{"ID":"7"}')).text
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).result);
      expect(lines.map((r) => [r.ID, r.TTL])).toEqual([
        ["7", "60"],
        ["8", undefined],
        ["7", "60"],
      ]);
      expect(await raw(mock, "/v3/lease/keepalive", '{"ID":"7"')).toMatchObject({
        status: 500,
        body: { error: "unexpected EOF", message: "unexpected EOF", code: 2 },
      });
      // A later bad request ends the requests: the answers before it still come.
      expect((await raw(mock, "/v3/lease/keepalive", '{"ID":"7"}[2]')).text.trim().split("\n")).toHaveLength(1);
      expect(await raw(v35(), "/v3/lease/keepalive", "[1]")).toMatchObject({ status: 200, text: "" });
    },
  );

  it("watch: a bad first request is 500 code 2 on 3.4; on 3.5 the stream never answers", async () => {
    expect(await raw(v34(), "/v3/watch", '{"create_request":')).toMatchObject({
      status: 500,
      body: { code: 2, message: "unexpected EOF" },
    });
    const abort = new AbortController();
    const pending = v35().fetch(`${BASE}/v3/watch`, { method: "POST", body: "[1]", signal: abort.signal });
    setTimeout(() => abort.abort(), 20);
    await expect(pending).rejects.toThrow(/abort/i);
  });
});
