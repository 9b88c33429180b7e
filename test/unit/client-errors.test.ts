// Error bodies of etcd 3.4, 3.5 and 3.6, non-JSON answers, stream error lines: each maps to a stable code.
import { describe, expect, it } from "vitest";
import {
  EtcdBadResponseError,
  EtcdCompactedError,
  type Etcd,
  EtcdError,
  EtcdServerError,
  type EtcdErrorCode,
} from "../../src/index.js";
import { HttpResponse } from "msw";
import { rejection } from "../support/async.js";
import { A, gatewayClient, jsonText, permissionDenied, route, useGateway } from "../support/gateway.js";
import { BIG_LEASE, type EtcdVersion, header, streamErrorLine, unaryErrorBody } from "../support/wire.js";

const server = useGateway();

async function expectCode(promise: Promise<unknown>, code: EtcdErrorCode): Promise<any> {
  const error = await rejection(promise);
  expect(error).toBeInstanceOf(EtcdError);
  expect(error).toBeInstanceOf(Error);
  expect(error.code).toBe(code);
  return error;
}

interface Case {
  name: string;
  status: number;
  grpc: number;
  message: string;
  code: EtcdErrorCode;
  call: (etcd: Etcd) => Promise<unknown>;
  path: string;
}

const get = (etcd: Etcd) => etcd.get("k");
const CASES: Case[] = [
  {
    name: "InvalidArgument",
    status: 400,
    grpc: 3,
    message: "etcdserver: key is not provided",
    code: "INVALID_ARGUMENT",
    call: get,
    path: "/v3/kv/range",
  },
  {
    name: "InvalidArgument (txn)",
    status: 400,
    grpc: 3,
    message: "etcdserver: duplicate key given in txn request",
    code: "INVALID_ARGUMENT",
    call: (e) => e.txn().commit(),
    path: "/v3/kv/txn",
  },
  {
    name: "lease not found",
    status: 404,
    grpc: 5,
    message: "etcdserver: requested lease not found",
    code: "LEASE_NOT_FOUND",
    call: (e) => e.lease.revoke(BIG_LEASE),
    path: "/v3/lease/revoke",
  },
  {
    name: "compacted",
    status: 400,
    grpc: 11,
    message: "etcdserver: mvcc: required revision has been compacted",
    code: "COMPACTED",
    call: (e) => e.get("k", { revision: 2 }),
    path: "/v3/kv/range",
  },
  {
    name: "future revision",
    status: 400,
    grpc: 11,
    message: "etcdserver: mvcc: required revision is a future revision",
    code: "FUTURE_REVISION",
    call: (e) => e.get("k", { revision: 999 }),
    path: "/v3/kv/range",
  },
  {
    name: "Unauthenticated",
    status: 401,
    grpc: 16,
    message: "etcdserver: invalid auth token",
    code: "UNAUTHENTICATED",
    call: get,
    path: "/v3/kv/range",
  },
  {
    name: "user name is empty (no token on an auth cluster)",
    status: 400,
    grpc: 3,
    message: "etcdserver: user name is empty",
    code: "UNAUTHENTICATED",
    call: get,
    path: "/v3/kv/range",
  },
  {
    name: "PermissionDenied",
    status: 403,
    grpc: 7,
    message: "etcdserver: permission denied",
    code: "PERMISSION_DENIED",
    call: (e) => e.put("k", "v"),
    path: "/v3/kv/put",
  },
  {
    name: "Unavailable",
    status: 503,
    grpc: 14,
    message: "etcdserver: no leader",
    code: "UNAVAILABLE",
    call: (e) => e.put("k", "v"),
    path: "/v3/kv/put",
  },
  {
    name: "FailedPrecondition on Debian (412)",
    status: 412,
    grpc: 9,
    message: "etcdserver: authentication is not enabled",
    code: "FAILED_PRECONDITION",
    call: (e) => e.put("k", "v"),
    path: "/v3/kv/put",
  },
  {
    name: "FailedPrecondition upstream (400)",
    status: 400,
    grpc: 9,
    message: "etcdserver: authentication is not enabled",
    code: "FAILED_PRECONDITION",
    call: (e) => e.put("k", "v"),
    path: "/v3/kv/put",
  },
  {
    name: "lease already exists (412, code 9)",
    status: 412,
    grpc: 9,
    message: "etcdserver: lease already exists",
    code: "ALREADY_EXISTS",
    call: (e) => e.lease.grant(30, { id: BIG_LEASE }),
    path: "/v3/lease/grant",
  },
  {
    name: "ResourceExhausted",
    status: 429,
    grpc: 8,
    message: "etcdserver: too many requests",
    code: "RESOURCE_EXHAUSTED",
    call: (e) => e.put("k", "v"),
    path: "/v3/kv/put",
  },
];

describe.each(["3.4", "3.5", "3.6"] as EtcdVersion[])("etcd %s unary error bodies", (version) => {
  it.each(CASES)("$name → $code", async ({ status, grpc, message, code, call, path }) => {
    const seen = route(server, path, () => jsonText(unaryErrorBody(version, grpc, message), status));
    const error = await expectCode(call(gatewayClient()), code);
    expect(seen).toHaveLength(1);
    expect(error.message).toContain(message);
    expect(error.endpoint).toBe(A);
    if (code === "COMPACTED") {
      expect(error).toBeInstanceOf(EtcdCompactedError);
    } else {
      expect(error).toBeInstanceOf(EtcdServerError);
      expect(error.grpcCode).toBe(grpc);
      expect(error.httpStatus).toBe(status);
    }
  });
});

describe("the gRPC code decides, not the HTTP status", () => {
  it("code 9 is FAILED_PRECONDITION whether the status is 412 or 400", async () => {
    for (const status of [412, 400]) {
      route(server, "/v3/kv/put", () =>
        jsonText(unaryErrorBody("3.5", 9, "etcdserver: authentication is not enabled"), status),
      );
      await expectCode(gatewayClient().put("k", "v"), "FAILED_PRECONDITION");
    }
  });

  it("a 400 with code 14 is UNAVAILABLE; a 503 with code 3 is INVALID_ARGUMENT", async () => {
    route(server, "/v3/kv/put", () => jsonText(unaryErrorBody("3.6", 14, "etcdserver: request timed out"), 400));
    await expectCode(gatewayClient().put("k", "v"), "UNAVAILABLE");
    route(server, "/v3/kv/put", () => jsonText(unaryErrorBody("3.6", 3, "etcdserver: bad thing"), 503));
    await expectCode(gatewayClient().put("k", "v"), "INVALID_ARGUMENT");
  });

  it("a 3.6 body with extra `details` still maps", async () => {
    route(server, "/v3/kv/put", () => permissionDenied());
    await expectCode(gatewayClient().put("k", "v"), "PERMISSION_DENIED");
  });
});

describe("answers that are not the gateway's JSON → BAD_RESPONSE", () => {
  it("an HTML 502 from a proxy: status kept, body truncated to about 512 chars", async () => {
    const html = `<html><head><title>502 Bad Gateway</title></head><body>${"<p>nginx</p>".repeat(200)}</body></html>`;
    route(
      server,
      "/v3/kv/put",
      () => new HttpResponse(html, { status: 502, headers: { "content-type": "text/html" } }),
    );
    const error = await expectCode(gatewayClient().put("k", "v"), "BAD_RESPONSE");
    expect(error).toBeInstanceOf(EtcdBadResponseError);
    expect(error.status).toBe(502);
    expect(error.body.startsWith("<html><head><title>502 Bad Gateway")).toBe(true);
    expect(error.body.length).toBeGreaterThan(100);
    expect(error.body.length).toBeLessThanOrEqual(520);
    expect(error.message).toContain("502");
  });

  it("a 404 from a server that is not the gateway: nothing applied, and a hint at the port", async () => {
    route(server, "/v3/kv/put", () => new HttpResponse("404 page not found\n", { status: 404 }));
    const error = await expectCode(gatewayClient().put("k", "v"), "BAD_RESPONSE");
    expect(error.status).toBe(404);
    expect(error.indeterminate).toBe(false);
    expect(error.message).toMatch(/is this etcd's client port \(2379 by default, its --listen-client-urls\)/);
  });

  it("an empty 200 body", async () => {
    route(server, "/v3/kv/range", () => new HttpResponse("", { status: 200 }));
    const error = await expectCode(gatewayClient().get("k"), "BAD_RESPONSE");
    expect(error).toBeInstanceOf(EtcdBadResponseError);
    expect(error.status).toBe(200);
    expect(error.body).toBe("");
  });

  it("a truncated JSON 200 body", async () => {
    const truncated = `{"header":{"cluster_id":"${"1".repeat(10)}","member_id":"1","rev`;
    route(server, "/v3/kv/range", () => jsonText(truncated));
    const error = await expectCode(gatewayClient().get("k"), "BAD_RESPONSE");
    expect(error).toBeInstanceOf(EtcdBadResponseError);
    expect(error.status).toBe(200);
    expect(error.body).toBe(truncated);
  });

  it("a 200 JSON body that does not match the schema", async () => {
    for (const body of [`{"header":{},"kvs":"nope"}`, `{"kvs":[{"key":5}]}`, `[]`, `null`, `"ok"`, `{"count":true}`]) {
      route(server, "/v3/kv/range", () => jsonText(body));
      const error = await expectCode(gatewayClient().range({ prefix: "p" }), "BAD_RESPONSE");
      expect(error).toBeInstanceOf(EtcdBadResponseError);
      expect(error.status).toBe(200);
    }
  });

  it("a non-200 JSON body that is not an etcd error (a proxy's JSON 500)", async () => {
    route(server, "/v3/kv/put", () => jsonText(`{"status":"fail","reason":"upstream"}`, 500));
    const error = await expectCode(gatewayClient().put("k", "v"), "BAD_RESPONSE");
    expect(error.status).toBe(500);
  });

  it(
    "a connection closed with no reply (upstream 3.4.23 on any gateway error) is an error, " + "not a success",
    async () => {
      route(server, "/v3/kv/put", () => HttpResponse.error());
      await expectCode(gatewayClient().put("k", "v"), "UNAVAILABLE");
    },
  );

  it("wrong-method answers (405 text of 3.4) never happen: the client always POSTs", async () => {
    const seen = route(server, "/v3/kv/range", () => jsonText(`{"header":${JSON.stringify(header(1))}}`));
    await gatewayClient().get("k");
    expect(seen.map((s) => s.method)).toEqual(["POST"]);
  });
});

describe("stream error lines (lease keepalive)", () => {
  const cases: Array<[EtcdVersion, number, string, EtcdErrorCode]> = [
    ["3.4", 5, "etcdserver: requested lease not found", "LEASE_NOT_FOUND"],
    ["3.5", 14, "etcdserver: no leader", "UNAVAILABLE"],
    ["3.6", 7, "etcdserver: permission denied", "PERMISSION_DENIED"],
    ["3.6", 16, "etcdserver: invalid auth token", "UNAUTHENTICATED"],
  ];

  it.each(cases)("%s error line code %i (%s) after a 200 status → %s", async (version, grpc, message, code) => {
    route(server, "/v3/lease/keepalive", () => jsonText(streamErrorLine(version, grpc, message), 200));
    const error = await expectCode(gatewayClient().lease.keepAliveOnce(BIG_LEASE), code);
    expect(error.message).toContain(message);
  });

  // Before the first result the gateway writes the mapped HTTP status (503 for no leader) and the same
  // `{"error":{...}}` line as the body (grpc-gateway's handleForwardResponseStreamError).
  it.each([
    ["3.5", 14, 503, "etcdserver: no leader", "UNAVAILABLE"],
    ["3.6", 14, 503, "etcdserver: no leader", "UNAVAILABLE"],
    ["3.4", 7, 403, "etcdserver: permission denied", "PERMISSION_DENIED"],
  ] as Array<[EtcdVersion, number, number, string, EtcdErrorCode]>)(
    "%s error line code %i with HTTP %i (%s, before any result) → %s",
    async (version, grpc, status, message, code) => {
      route(server, "/v3/lease/keepalive", () => jsonText(streamErrorLine(version, grpc, message), status));
      const error = await expectCode(gatewayClient().lease.keepAliveOnce(BIG_LEASE), code);
      expect(error.message).toContain(message);
    },
  );
});
