// What the mock's etcd 3.6 and 3.7 dialects answer differently from 3.4 and 3.5 (docs/testing.md): error shapes,
// the server's versions, watches from a negative or a future revision, Bearer tokens, and the RBAC that came with
// CVE-2026-33413 and CVE-2026-44283 (lease calls, a renewal's keys, a txn's nested puts and txns).
import { describe, expect, it } from "vitest";
import { Etcd } from "../../src/index.js";
import {
  createMockEtcd,
  type EtcdVersion,
  type MockEtcd,
  PROGRESS_NOTIFY_INTERVAL_MS,
} from "../../src/testing/index.js";
import { rejection, sleep } from "../support/async.js";
import { APP_ROLES, call, MOCK_ENDPOINT, rawWatch } from "../support/mock.js";
import { b64 } from "../support/wire.js";

const LATER: EtcdVersion[] = ["3.6", "3.7"];

/** A watch stream's lines so far, once queued work (and `settle`) has run. */
async function watchLines(mock: MockEtcd, requests: object[], settle: () => void = () => {}) {
  const stream = await rawWatch(mock, ...requests);
  await sleep(20);
  settle();
  await sleep(20);
  const lines = await stream.lines();
  stream.abort();
  return lines;
}

/** Auth on, with APP_ROLES. */
const authed = (version: EtcdVersion) =>
  createMockEtcd({
    version,
    auth: APP_ROLES,
  });

const login = async (mock: MockEtcd, name: string, password: string) =>
  (await call(mock, "/v3/auth/authenticate", { name, password })).body.token as string;

describe.each(LATER)("etcd %s on the wire", (version) => {
  it("unary errors are {code, message}, with no error field; the status is grpc-gateway v2's", async () => {
    const mock = createMockEtcd({ version });
    expect(await call(mock, "/v3/kv/range", {})).toEqual({
      status: 400,
      body: { code: 3, message: "etcdserver: key is not provided" },
    });
    await call(mock, "/v3/lease/grant", { TTL: 30, ID: "7" });
    // FailedPrecondition is 400 from grpc-gateway v2 on (412 on Debian's 3.4).
    expect(await call(mock, "/v3/lease/grant", { TTL: 30, ID: "7" })).toEqual({
      status: 400,
      body: { code: 9, message: "etcdserver: lease already exists" },
    });
    expect(await call(mock, "/v3/kv/nope", {})).toEqual({ status: 404, body: { code: 5, message: "Not Found" } });
    const wrongMethod = await mock.fetch(`${MOCK_ENDPOINT}/v3/kv/range`, { method: "GET" });
    expect([wrongMethod.status, await wrongMethod.json()]).toEqual([501, { code: 12, message: "Method Not Allowed" }]);
  });

  it("versions, health and status say which line this is", async () => {
    const mock = createMockEtcd({ version });
    const release = version === "3.6" ? "3.6.16" : "3.7.3";
    expect(await (await mock.fetch(`${MOCK_ENDPOINT}/version`)).json()).toEqual({
      etcdserver: release,
      etcdcluster: `${version}.0`,
      storage: `${version}.0`,
    });
    expect(await (await mock.fetch(`${MOCK_ENDPOINT}/health`)).json()).toEqual({ health: "true", reason: "" });
    const { body } = await call(mock, "/v3/maintenance/status", {});
    expect(body).toMatchObject({
      version: release,
      storageVersion: `${version}.0`,
      dbSizeQuota: "2147483648",
      downgradeInfo: {},
    });
    // Field order as protojson writes them: by field number.
    expect(Object.keys(body).slice(-4)).toEqual(["dbSizeInUse", "storageVersion", "dbSizeQuota", "downgradeInfo"]);
  });

  it("a watch from a negative revision is canceled as compacted at once; others on the stream go on", async () => {
    const mock = createMockEtcd({ version });
    mock.put("k", "1");
    const lines = await watchLines(
      mock,
      [
        { create_request: { key: b64("k"), start_revision: "2", watch_id: 1 } },
        { create_request: { key: b64("k"), start_revision: "-1", watch_id: 2 } },
      ],
      () => mock.put("k", "2"),
    );
    expect(lines.map((l) => [l.watch_id, l.created, l.canceled, l.cancel_reason])).toEqual([
      ["1", true, undefined, undefined],
      ["-1", true, true, "etcdserver: mvcc: required revision has been compacted"],
      ["1", undefined, undefined, undefined],
      ["1", undefined, undefined, undefined],
    ]);
    // Watch 1 replays revision 2 and sees 3: the refused watch empties no one's catch-up (as it does on 3.5).
    expect(lines.slice(2).map((l) => l.events.map((e: any) => atob(e.kv.value)))).toEqual([["1"], ["2"]]);
  });

  it("a watch from a future revision: no progress while the store is behind its start; events from there", async () => {
    const lines = async (v: EtcdVersion) => {
      const mock = createMockEtcd({ version: v });
      const start = String(mock.revision + 2);
      const body = [
        { create_request: { key: b64("f"), start_revision: start, progress_notify: true } },
        { progress_request: {} },
      ];
      const got = await watchLines(mock, body, () => {
        mock.advance(PROGRESS_NOTIFY_INTERVAL_MS);
        mock.put("f", "early");
        mock.put("f", "late");
      });
      return got.map((l) => [l.created, l.watch_id, l.events?.map((e: any) => atob(e.kv.value))]);
    };
    expect(await lines(version)).toEqual([
      [true, undefined, undefined],
      [undefined, undefined, ["late"]],
    ]);
    // 3.5 answers the progress request and the periodic notification at once (revision 1, before the start).
    expect(await lines("3.5")).toEqual([
      [true, undefined, undefined],
      [undefined, "-1", undefined],
      [undefined, undefined, undefined],
      [undefined, undefined, ["late"]],
    ]);
  });

  it("Authorization: Bearer <token> is the token", async () => {
    const mock = authed(version);
    const token = await login(mock, "app", "apppw");
    expect((await call(mock, "/v3/kv/put", { key: b64("app/x"), value: b64("1") }, `Bearer ${token}`)).status).toBe(
      200,
    );
    expect((await call(mock, "/v3/kv/range", { key: b64("app/x") }, "Bearer nonsense")).body.code).toBe(16);
  });
});

describe("Bearer before 3.6", () => {
  it("3.5.16 reads `Bearer <token>` as a bad token", async () => {
    const mock = authed("3.5");
    const token = await login(mock, "app", "apppw");
    expect(await call(mock, "/v3/kv/range", { key: b64("app/x") }, `Bearer ${token}`)).toEqual({
      status: 401,
      body: { code: 16, message: "etcdserver: invalid auth token" },
    });
  });
});

describe.each(LATER)("etcd %s RBAC on leases (CVE-2026-33413)", (version) => {
  /** A lease held by root with `other` attached, and one of app's with `app/mine`. */
  async function setup() {
    const mock = authed(version);
    const root = await login(mock, "root", "rootpw");
    const app = await login(mock, "app", "apppw");
    await call(mock, "/v3/lease/grant", { TTL: 60, ID: "1" }, root);
    await call(mock, "/v3/kv/put", { key: b64("other"), lease: "1" }, root);
    await call(mock, "/v3/lease/grant", { TTL: 60, ID: "2" }, app);
    await call(mock, "/v3/kv/put", { key: b64("app/mine"), lease: "2" }, app);
    return { mock, root, app, reader: await login(mock, "reader", "rpw") };
  }
  const denied = { code: 7, message: "etcdserver: permission denied" };

  it("renewing needs write on every key of the lease: refused without it, allowed with it", async () => {
    const { mock, root, app, reader } = await setup();
    expect(await call(mock, "/v3/lease/keepalive", { ID: "1" }, app)).toEqual({ status: 403, body: { error: denied } });
    expect((await call(mock, "/v3/lease/keepalive", { ID: "2" }, app)).body.result).toMatchObject({ TTL: "60" });
    expect((await call(mock, "/v3/lease/keepalive", { ID: "1" }, root)).body.result).toMatchObject({ TTL: "60" });
    // Read is not enough.
    expect((await call(mock, "/v3/lease/keepalive", { ID: "2" }, reader)).status).toBe(403);
    // An unknown lease holds no key: its renewal answers without a TTL, as before.
    expect((await call(mock, "/v3/lease/keepalive", { ID: "9" }, app)).body.result.TTL).toBeUndefined();
  });

  it("a refused renewal after granted ones ends the stream with an error line (status 200 by then)", async () => {
    const { mock, app } = await setup();
    // Three requests in one body: each JSON value is one.
    const body = [{ ID: "2" }, { ID: "1" }, { ID: "2" }].map((r) => JSON.stringify(r)).join("");
    const res = await call(mock, "/v3/lease/keepalive", body, app);
    expect(res.status).toBe(200);
    expect(res.body).toEqual([{ result: expect.objectContaining({ ID: "2", TTL: "60" }) }, { error: denied }]);
  });

  it("the SDK's renewal reads the refusal as PERMISSION_DENIED", async () => {
    const { mock } = await setup();
    const etcd = new Etcd({
      endpoints: [MOCK_ENDPOINT],
      fetch: mock.fetch,
      auth: { username: "app", password: "apppw" },
    });
    expect(await rejection(etcd.lease.keepAliveOnce("1"))).toMatchObject({ code: "PERMISSION_DENIED", grpcCode: 7 });
    expect((await etcd.lease.keepAliveOnce("2")).ttl).toBe(60);
  });

  it("every lease call needs a token", async () => {
    const { mock } = await setup();
    const empty = { code: 3, message: "etcdserver: user name is empty" };
    expect(await call(mock, "/v3/lease/grant", { TTL: 60 })).toEqual({ status: 400, body: empty });
    expect(await call(mock, "/v3/lease/revoke", { ID: "9" })).toEqual({ status: 400, body: empty });
    expect(await call(mock, "/v3/lease/timetolive", { ID: "2" })).toEqual({ status: 400, body: empty });
    expect(await call(mock, "/v3/lease/leases", {})).toEqual({ status: 400, body: empty });
    expect(await call(mock, "/v3/lease/keepalive", { ID: "2" })).toEqual({ status: 400, body: { error: empty } });
  });

  it("listing leases needs read on every leased key", async () => {
    const { mock, root, app } = await setup();
    expect(await call(mock, "/v3/lease/leases", {}, app)).toEqual({ status: 403, body: denied });
    expect((await call(mock, "/v3/lease/leases", {}, root)).body.leases).toEqual([{ ID: "1" }, { ID: "2" }]);
    await call(mock, "/v3/lease/revoke", { ID: "1" }, root);
    expect((await call(mock, "/v3/lease/leases", {}, app)).body.leases).toEqual([{ ID: "2" }]);
  });
});

describe("RBAC on leases before 3.6", () => {
  it("3.5.16 renews and lists for anyone, even without a token", async () => {
    const mock = authed("3.5");
    const root = await login(mock, "root", "rootpw");
    await call(mock, "/v3/lease/grant", { TTL: 60, ID: "1" }, root);
    await call(mock, "/v3/kv/put", { key: b64("other"), lease: "1" }, root);
    expect((await call(mock, "/v3/lease/keepalive", { ID: "1" })).body.result).toMatchObject({ TTL: "60" });
    expect((await call(mock, "/v3/lease/keepalive", { ID: "1" }, "garbage")).status).toBe(200);
    expect((await call(mock, "/v3/lease/leases", {})).body.leases).toEqual([{ ID: "1" }]);
  });
});

describe.each(["3.5", ...LATER] as EtcdVersion[])("etcd %s RBAC inside a txn (CVE-2026-44283)", (version) => {
  const checked = version !== "3.5";
  const outcome = (status: number) => (checked ? 403 : status);

  it(`a nested put's lease and prev_kv, and a nested txn, are ${checked ? "" : "not "}checked`, async () => {
    const mock = authed(version);
    const root = await login(mock, "root", "rootpw");
    await call(mock, "/v3/lease/grant", { TTL: 60, ID: "1" }, root);
    await call(mock, "/v3/kv/put", { key: b64("other"), lease: "1" }, root);
    const app = await login(mock, "app", "apppw");
    const writer = await login(mock, "writer", "wpw");
    const put = (key: string, more: object = {}) => ({ request_put: { key: b64(key), ...more } });
    // A plain put is checked in every version.
    expect((await call(mock, "/v3/kv/put", { key: b64("app/l"), lease: "1" }, app)).status).toBe(403);
    expect((await call(mock, "/v3/kv/put", { key: b64("app/w"), prev_kv: true }, writer)).status).toBe(403);
    const txn = (...success: object[]) => ({ success });
    expect((await call(mock, "/v3/kv/txn", txn(put("app/l", { lease: "1" })), app)).status).toBe(outcome(200));
    expect((await call(mock, "/v3/kv/txn", txn(put("app/w", { prev_kv: true })), writer)).status).toBe(outcome(200));
    const nested = txn({ request_txn: { success: [put("other", { value: b64("x") })] } });
    expect((await call(mock, "/v3/kv/txn", nested, app)).status).toBe(outcome(200));
    expect(mock.get("other")?.value).toBe(checked ? "" : "x");
  });
});

describe("a txn put checked for its lease before its key (3.7)", () => {
  it.each([
    ["3.6", "etcdserver: key not found"],
    ["3.7", "etcdserver: requested lease not found"],
  ] as const)("%s says %s", async (version, message) => {
    const mock = createMockEtcd({ version });
    const body = { success: [{ request_put: { key: b64("missing"), ignore_value: true, lease: "99" } }] };
    expect((await call(mock, "/v3/kv/txn", body)).body.message).toBe(message);
  });
});

describe("what etcd 3.6.16 and 3.7.3 showed the mock (mock-vs-etcd on real members)", () => {
  it.each([
    ["3.5", 200],
    ["3.6", 400],
    ["3.7", 400],
  ] as const)("%s: a sort order or target no enum names → %s", async (version, status) => {
    const mock = createMockEtcd({ version });
    for (const sort of [{ sort_order: 7 }, { sort_target: 9 }]) {
      const answer = await call(mock, "/v3/kv/range", { key: b64("a"), ...sort });
      expect(answer.status).toBe(status);
      if (status === 400) expect(answer.body.message).toBe("etcdserver: invalid sort option");
    }
  });

  it.each([
    ["3.6", "etcdserver: key not found"],
    ["3.7", "etcdserver: requested lease not found"],
  ] as const)("%s: a txn's checks run in order, a compacted range before a later put's", async (version, put) => {
    const mock = createMockEtcd({ version });
    for (const v of ["1", "2", "3"]) await call(mock, "/v3/kv/put", { key: b64("k"), value: b64(v) });
    await call(mock, "/v3/kv/compaction", { revision: "3" });
    const range = { request_range: { key: b64("k"), revision: "2" } };
    const missing = { request_put: { key: b64("missing"), ignore_value: true, lease: "99" } };
    expect((await call(mock, "/v3/kv/txn", { success: [range, missing] })).body.code).toBe(11);
    expect((await call(mock, "/v3/kv/txn", { success: [missing, range] })).body.message).toBe(put);
  });

  it("3.5: a txn's puts are checked before its ranges", async () => {
    const mock = createMockEtcd({ version: "3.5" });
    for (const v of ["1", "2", "3"]) await call(mock, "/v3/kv/put", { key: b64("k"), value: b64(v) });
    await call(mock, "/v3/kv/compaction", { revision: "3" });
    const range = { request_range: { key: b64("k"), revision: "2" } };
    const missing = { request_put: { key: b64("missing"), ignore_value: true } };
    expect((await call(mock, "/v3/kv/txn", { success: [range, missing] })).body.message).toBe(
      "etcdserver: key not found",
    );
  });

  it.each([
    ["3.6", false],
    ["3.7", true],
  ] as const)("%s: a keys_only range not sorted by value leaves leases out: %s", async (version, dropped) => {
    const mock = createMockEtcd({ version });
    await call(mock, "/v3/lease/grant", { TTL: 30, ID: "7" });
    await call(mock, "/v3/kv/put", { key: b64("a"), value: b64("x"), lease: "7" });
    const read = async (extra: object) =>
      (await call(mock, "/v3/kv/range", { key: b64("a"), keys_only: true, ...extra })).body.kvs[0].lease;
    expect(await read({})).toBe(dropped ? undefined : "7");
    expect(await read({ sort_target: "CREATE", sort_order: "DESCEND" })).toBe(dropped ? undefined : "7");
    expect(await read({ sort_target: "VALUE" })).toBe("7");
  });

  it.each([
    ["3.6", 403, 400],
    ["3.7", 200, 200],
  ] as const)("%s: /v3/auth/status with auth on → %s from a reader, %s with no token", async (version, ...statuses) => {
    const mock = authed(version);
    const token = await login(mock, "reader", "rpw");
    const asReader = await call(mock, "/v3/auth/status", {}, token);
    const anonymous = await call(mock, "/v3/auth/status", {});
    expect([asReader.status, anonymous.status]).toEqual(statuses);
  });
});
