import { setupServer } from "msw/node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMockEtcd } from "../../src/testing/index.js";
import { mswHandlers } from "../../src/testing/msw.js";
import { call } from "../support/mock.js";
import { b64 } from "../support/wire.js";

const BASE = "http://etcd.test:2379";

const authed = () =>
  createMockEtcd({
    auth: {
      users: { root: "rootpw", app: "apppw" },
      permissions: {
        app: [
          { key: "app/", prefix: true, type: "readwrite" },
          { key: "shared", type: "read" },
        ],
      },
    },
  });

describe("auth", () => {
  it("authenticate without auth enabled is 412 code 9", async () => {
    const r = await call(createMockEtcd(), "/v3/auth/authenticate", { name: "root", password: "x" });
    expect(r).toEqual({
      status: 412,
      body: {
        error: "etcdserver: authentication is not enabled",
        message: "etcdserver: authentication is not enabled",
        code: 9,
      },
    });
  });

  it("tokens; missing → 400/3, bad → 401/16, no permission → 403/7", async () => {
    const mock = authed();
    expect((await call(mock, "/v3/auth/authenticate", { name: "app", password: "nope" })).body).toMatchObject({
      code: 3,
      message: "etcdserver: authentication failed, invalid user ID or password",
    });
    const { body } = await call(mock, "/v3/auth/authenticate", { name: "app", password: "apppw" });
    expect(body.token).toMatch(/^[A-Za-z]{16}\.\d+$/);
    expect(body.header.revision).toBe("1");
    const token = body.token as string;
    expect(await call(mock, "/v3/kv/range", { key: b64("app/x") })).toEqual({
      status: 400,
      body: { error: "etcdserver: user name is empty", message: "etcdserver: user name is empty", code: 3 },
    });
    expect((await call(mock, "/v3/kv/range", { key: b64("app/x") }, "garbage")).status).toBe(401);
    expect((await call(mock, "/v3/kv/range", { key: b64("app/x") }, `Bearer ${token}`)).body.code).toBe(16);
    expect((await call(mock, "/v3/kv/put", { key: b64("app/x"), value: b64("1") }, token)).status).toBe(200);
    expect((await call(mock, "/v3/kv/range", { key: b64("shared") }, token)).status).toBe(200);
    expect(await call(mock, "/v3/kv/put", { key: b64("shared") }, token)).toEqual({
      status: 403,
      body: { error: "etcdserver: permission denied", message: "etcdserver: permission denied", code: 7 },
    });
    expect((await call(mock, "/v3/kv/range", { key: b64("app/"), range_end: b64("app0") }, token)).status).toBe(200);
    expect((await call(mock, "/v3/kv/range", { key: b64("app/"), range_end: b64("app1") }, token)).status).toBe(403);
    expect((await call(mock, "/v3/kv/txn", { compare: [{ key: b64("other") }] }, token)).status).toBe(403);
    // 3.4 does not check lease grants: no token is fine, a bad one is not.
    expect((await call(mock, "/v3/lease/grant", { TTL: 10 })).status).toBe(200);
    expect((await call(mock, "/v3/lease/grant", { TTL: 10 }, "bad")).status).toBe(401);
    const root = (await call(mock, "/v3/auth/authenticate", { name: "root", password: "rootpw" })).body.token;
    expect((await call(mock, "/v3/kv/put", { key: b64("anything") }, root)).status).toBe(200);
  });

  it("expireTokens and idle token TTL force re-authentication", async () => {
    const mock = authed();
    const token = (await call(mock, "/v3/auth/authenticate", { name: "app", password: "apppw" })).body.token;
    mock.auth.expireTokens();
    expect((await call(mock, "/v3/kv/range", { key: b64("app/x") }, token)).body.code).toBe(16);
    const fresh = (await call(mock, "/v3/auth/authenticate", { name: "app", password: "apppw" })).body.token;
    mock.advance(299_000);
    expect((await call(mock, "/v3/kv/range", { key: b64("app/x") }, fresh)).status).toBe(200);
    mock.advance(300_000);
    expect((await call(mock, "/v3/kv/range", { key: b64("app/x") }, fresh)).status).toBe(401);
  });

  it("watch auth failures are a canceled first line with HTTP 200", async () => {
    const mock = authed();
    const res = await mock.fetch(`${BASE}/v3/watch`, {
      method: "POST",
      body: JSON.stringify({ create_request: { key: b64("k") } }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    const line = JSON.parse((await reader.read()).value!);
    expect(line.result).toMatchObject({
      watch_id: "-1",
      created: true,
      canceled: true,
      cancel_reason: "rpc error: code = InvalidArgument desc = etcdserver: user name is empty",
    });
    await reader.cancel();
  });
});

describe("faults", () => {
  it("unavailable(n): the next n requests answer 503 code 14, streams with an error line", async () => {
    const mock = createMockEtcd();
    mock.faults.unavailable(2);
    expect(await call(mock, "/v3/kv/range", { key: b64("a") })).toEqual({
      status: 503,
      body: { error: "etcdserver: no leader", message: "etcdserver: no leader", code: 14 },
    });
    const watch = await mock.fetch(`${BASE}/v3/watch`, {
      method: "POST",
      body: JSON.stringify({ create_request: { key: b64("a") } }),
    });
    expect(watch.status).toBe(503);
    expect(JSON.parse(await watch.text())).toEqual({
      error: { grpc_code: 14, http_code: 503, message: "etcdserver: no leader", http_status: "Service Unavailable" },
    });
    expect((await call(mock, "/v3/kv/range", { key: b64("a") })).status).toBe(200);
  });

  it("latency(ms) delays in real time and the request's signal aborts the wait", async () => {
    const mock = createMockEtcd();
    mock.faults.latency(50);
    const started = Date.now();
    await call(mock, "/v3/kv/range", { key: b64("a") });
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    const abort = new AbortController();
    const pending = mock.fetch(`${BASE}/v3/kv/range`, { method: "POST", body: "{}", signal: abort.signal });
    abort.abort();
    await expect(pending).rejects.toThrow(/abort/i);
    mock.faults.latency(0);
  });
});

describe("through msw setupServer", () => {
  const mock = createMockEtcd();
  const server = setupServer(...mswHandlers(mock, BASE));
  beforeAll(() => server.listen({ onUnhandledFrame: "error" }));
  afterAll(() => server.close());

  const post = async (path: string, body: unknown, init: RequestInit = {}) =>
    fetch(`${BASE}${path}`, { method: "POST", body: JSON.stringify(body), ...init });

  it("serves kv, lease and errors with the real statuses", async () => {
    const put = await post("/v3/kv/put", { key: b64("m"), value: b64("1") });
    expect((await put.json()).header.revision).toBe("2");
    const range = await (await post("/v3/kv/range", { key: b64("m") })).json();
    expect(range.kvs[0].value).toBe(b64("1"));
    expect((await post("/v3/kv/put", { key: b64("m"), lease: "77" })).status).toBe(404);
    expect((await fetch(`${BASE}/v3/kv/range`)).status).toBe(405);
    expect((await post("/v3/nope", {})).status).toBe(404);
    const ka = await post("/v3/lease/keepalive", { ID: "1" });
    expect(JSON.parse(await ka.text()).result.ID).toBe("1");
  });

  it("streams watch events and ends on abort", async () => {
    const abort = new AbortController();
    const res = await post("/v3/watch", { create_request: { key: b64("m") } }, { signal: abort.signal });
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!text.includes("\n")) text += (await reader.read()).value ?? "";
    expect(JSON.parse(text.split("\n")[0]!).result.created).toBe(true);
    text = text.slice(text.indexOf("\n") + 1);
    await post("/v3/kv/put", { key: b64("m"), value: b64("2") });
    while (!text.includes("\n")) text += (await reader.read()).value ?? "";
    expect(JSON.parse(text.split("\n")[0]!).result.events[0].kv.value).toBe(b64("2"));
    abort.abort();
    await expect(reader.read()).rejects.toThrow();
    await new Promise((r) => setTimeout(r, 10));
    expect(mock.openWatchStreams).toBe(0);
  });

  it("cutStreams errors the client's body", async () => {
    const abort = new AbortController();
    const res = await post("/v3/watch", { create_request: { key: b64("cut") } }, { signal: abort.signal });
    const reader = res.body!.getReader();
    await reader.read();
    mock.faults.cutStreams();
    await expect(reader.read()).rejects.toThrow();
    abort.abort();
  });
});
