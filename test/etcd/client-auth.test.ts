// Auth over a real etcd 3.4 with auth enabled: tokens, permissions, refresh after the server forgets tokens.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Etcd, EtcdError, EtcdServerError, op, type WatchBatch } from "../../src/index.js";
import { addUser, enableAuth, startEtcd, type EtcdMember } from "./harness";
import { events, pull, recordingFetch, within } from "./support";

const rootPassword = "root-pw";
let member: EtcdMember;

beforeAll(async () => {
  member = await startEtcd();
  await enableAuth(member, { rootPassword });
  await addUser(member, { rootPassword, user: "app", password: "app-pw", prefix: "app/" });
});
afterAll(async () => {
  await member?.stop();
});

const watches = new Set<AbortController>();
afterEach(() => {
  for (const controller of watches) controller.abort(new Error("test finished"));
  watches.clear();
});

function appClient(fetch = recordingFetch()) {
  return { etcd: new Etcd({ endpoints: member.clientUrl, auth: { username: "app", password: "app-pw" }, timeout: 5_000, fetch }), fetch };
}

function watchOn(etcd: Etcd, query: Parameters<Etcd["watch"]>[0]): AsyncIterator<WatchBatch> {
  const controller = new AbortController();
  watches.add(controller);
  return etcd.watch({ ...query, signal: controller.signal })[Symbol.asyncIterator]();
}

const authCalls = (fetch: ReturnType<typeof recordingFetch>) => fetch.paths().filter((p) => p === "/v3/auth/authenticate").length;

describe("with credentials", () => {
  it("puts and gets under the granted prefix; authenticates once for many calls", async () => {
    const { etcd, fetch } = appClient();
    await etcd.put("app/a", "1");
    await etcd.put("app/b", "2");
    expect(await etcd.get("app/a")).toMatchObject({ key: "app/a", value: "1" });
    const listed = await etcd.range({ prefix: "app/" });
    expect(listed.kvs.map((kv) => [kv.key, kv.value])).toEqual([
      ["app/a", "1"],
      ["app/b", "2"],
    ]);
    expect(authCalls(fetch)).toBe(1);
    expect(fetch.paths()[0]).toBe("/v3/auth/authenticate");
    // The token goes out raw in Authorization (3.4 refuses "Bearer ...").
    expect((await member.etcdctl(`--user=root:${rootPassword}`, "get", "app/a", "--print-value-only")).trim()).toBe("1");
  });

  it("concurrent first calls share one authentication", async () => {
    const { etcd, fetch } = appClient();
    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => etcd.put(`app/concurrent/${i}`, String(i))));
    expect(results).toHaveLength(5);
    expect(authCalls(fetch)).toBe(1);
  });

  it("outside the prefix: PERMISSION_DENIED for reads, writes, txn and deletes", async () => {
    const { etcd } = appClient();
    await expect(etcd.put("other/k", "v")).rejects.toMatchObject({ code: "PERMISSION_DENIED", grpcCode: 7 });
    await expect(etcd.get("other/k")).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
    await expect(etcd.range({ prefix: "" })).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
    await expect(etcd.delete({ prefix: "other/" })).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
    await expect(etcd.txn().then(op.put("app/ok", "v"), op.put("other/x", "v")).commit()).rejects.toMatchObject({
      code: "PERMISSION_DENIED",
    });
    // The permitted half of that txn was not applied either.
    expect(await etcd.get("app/ok")).toBeUndefined();
    // A sibling that only shares the text prefix without the slash is outside too.
    await expect(etcd.put("app-not-quite/k", "v")).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
  });

  it("a watch works under the prefix, and is PERMISSION_DENIED outside it", async () => {
    const { etcd } = appClient();
    const rev = (await etcd.put("app/watched", "1")).header.revision;
    await etcd.put("app/watched", "2");
    const watch = watchOn(etcd, { key: "app/watched", startRevision: rev });
    const batches = await pull(watch, (b) => events(b).length >= 2, 5_000);
    expect(events(batches).map((e) => e.kv.value)).toEqual(["1", "2"]);
    // And live events.
    await etcd.put("app/watched", "3");
    await pull(watch, (b) => events(b).length >= 3, 5_000, batches);
    expect(events(batches)[2]!.kv.value).toBe("3");

    const denied = watchOn(etcd, { prefix: "other/" });
    await expect(within(3_000, "denied watch", denied.next())).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
  });
});

describe("without or with wrong credentials", () => {
  it("no auth option → UNAUTHENTICATED (etcd says 'user name is empty', gRPC InvalidArgument)", async () => {
    const etcd = new Etcd({ endpoints: member.clientUrl, timeout: 5_000 });
    await expect(etcd.get("app/a")).rejects.toMatchObject({ code: "UNAUTHENTICATED", grpcCode: 3 });
    await expect(etcd.put("app/a", "x")).rejects.toMatchObject({ code: "UNAUTHENTICATED" });
  });

  // etcd 3.4 answers such a watch with ONE line {"created":true,"canceled":true,"cancel_reason":"... user name is empty"}.
  it("a watch without credentials fails with UNAUTHENTICATED promptly (no reconnect loop)", async () => {
    const etcd = new Etcd({ endpoints: member.clientUrl, timeout: 5_000 });
    const watch = watchOn(etcd, { prefix: "app/" });
    const started = Date.now();
    await expect(within(4_000, "unauthenticated watch", watch.next())).rejects.toMatchObject({ code: "UNAUTHENTICATED" });
    // Reconnecting cannot help when there are no credentials to send.
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("a wrong password fails the call with the server's error after ONE authenticate request, never sending the call", async () => {
    const fetch = recordingFetch();
    const etcd = new Etcd({ endpoints: member.clientUrl, auth: { username: "app", password: "wrong" }, timeout: 5_000, fetch });
    const call = etcd.get("app/a");
    await expect(call).rejects.toBeInstanceOf(EtcdServerError);
    // etcd 3.4: HTTP 400, "etcdserver: authentication failed, invalid user ID or password", gRPC 3 InvalidArgument.
    await expect(call).rejects.toMatchObject({ grpcCode: 3, httpStatus: 400, message: expect.stringMatching(/authentication failed/) });
    expect(fetch.paths()).toEqual(["/v3/auth/authenticate"]);
    // A second call tries again (the failed token is not cached), still without sending the call itself.
    await expect(etcd.put("app/a", "x")).rejects.toMatchObject({ message: expect.stringMatching(/authentication failed/) });
    expect(fetch.paths()).toEqual(["/v3/auth/authenticate", "/v3/auth/authenticate"]);
  });

  // Today this is INVALID_ARGUMENT (the raw gRPC code). Bad credentials are an authentication failure that
  // callers handle like a missing or expired token, not a malformed request: expect UNAUTHENTICATED.
  it("a wrong password or unknown user is classified UNAUTHENTICATED", async () => {
    const wrong = new Etcd({ endpoints: member.clientUrl, auth: { username: "app", password: "wrong" }, timeout: 5_000 });
    await expect(wrong.get("app/a")).rejects.toMatchObject({ code: "UNAUTHENTICATED" });
    const nobody = new Etcd({ endpoints: member.clientUrl, auth: { username: "nobody", password: "x" }, timeout: 5_000 });
    await expect(nobody.get("app/a")).rejects.toMatchObject({ code: "UNAUTHENTICATED" });
  });
});

describe("token refresh after the server forgets its tokens", () => {
  // etcd 3.4 keeps simple tokens in memory only, so a restart makes the server forget them.
  let sequential: ReturnType<typeof appClient>;
  let concurrent: ReturnType<typeof appClient>;
  let watcher: ReturnType<typeof appClient>;
  let watch: AsyncIterator<WatchBatch>;
  let seen: WatchBatch[];
  beforeAll(async () => {
    sequential = appClient();
    concurrent = appClient();
    watcher = appClient();
    await sequential.etcd.put("app/refresh", "before");
    await concurrent.etcd.get("app/refresh");
    const rev = (await watcher.etcd.get("app/refresh"))!.modRevision;
    const controller = new AbortController();
    watch = watcher.etcd.watch({ key: "app/refresh", startRevision: rev, signal: controller.signal })[Symbol.asyncIterator]();
    afterAllAbort = () => controller.abort(new Error("done"));
    seen = await pull(watch, (b) => events(b).length >= 1, 5_000);
    for (const c of [sequential, concurrent, watcher]) expect(authCalls(c.fetch)).toBe(1);

    // A kv write after the last authentication: 3.4 persists its applied index only with kv writes, and on
    // restart re-applies (so re-creates the tokens of) Authenticate entries after the last persisted index.
    await sequential.etcd.put("app/flush", "x");
    await member.stop({ keepDataDir: true });
    await member.restart();
    for (const c of [sequential, concurrent, watcher]) c.fetch.calls.length = 0;
  });
  let afterAllAbort = () => {};
  afterAll(() => afterAllAbort());

  it("a write is refused as unauthenticated (so not applied), re-authenticated once, and resent", async () => {
    await sequential.etcd.put("app/refresh", "after");
    expect(sequential.fetch.calls.map((c) => [c.path, c.status])).toEqual([
      ["/v3/kv/put", 401],
      ["/v3/auth/authenticate", 200],
      ["/v3/kv/put", 200],
    ]);
    expect(await sequential.etcd.get("app/refresh")).toMatchObject({ value: "after", version: 2 });
    expect(authCalls(sequential.fetch)).toBe(1);
  });

  it("concurrent calls that all hit the stale token share ONE re-authentication", async () => {
    const values = await Promise.all(Array.from({ length: 5 }, (_, i) => concurrent.etcd.put(`app/stale/${i}`, String(i)).then(() => i)));
    expect(values).toEqual([0, 1, 2, 3, 4]);
    expect(authCalls(concurrent.fetch)).toBe(1);
    expect(concurrent.fetch.calls.filter((c) => c.status === 401).length).toBeGreaterThanOrEqual(1);
    expect((await concurrent.etcd.range({ prefix: "app/stale/" })).count).toBe(5);
  });

  // On reconnect with the stale token, 3.4 answers {"created":true,"canceled":true,"cancel_reason":"... invalid auth token"}.
  it("a watch across the restart re-authenticates and delivers the next write, without repeats", async () => {
    await sequential.etcd.put("app/refresh", "after-watch");
    await pull(watch, (b) => events(b).some((e) => e.kv.value === "after-watch"), 6_000, seen);
    const values = events(seen).map((e) => e.kv.value);
    expect(values[0]).toBe("before");
    expect(values.at(-1)).toBe("after-watch");
    expect(new Set(values).size).toBe(values.length);
    expect(authCalls(watcher.fetch)).toBe(1);
  });
});
