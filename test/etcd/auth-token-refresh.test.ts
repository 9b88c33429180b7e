// Auth that only a real member can show: it keeps simple tokens in memory, so a restart makes it forget every
// token it handed out. Calls and watches that hold a stale token must re-authenticate once and carry on.
// (Tokens, permissions and failures that both backends share: test/conformance/conformance-auth.test.ts.)
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Etcd, WatchBatch } from "../../src/index.js";
import { authCalls, client, events, pull, recordingFetch } from "../support/etcd.js";
import { addUser, enableAuth, startEtcd, type EtcdMember } from "./harness.js";

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

function appClient(): { etcd: Etcd; fetch: ReturnType<typeof recordingFetch> } {
  const fetch = recordingFetch();
  return { etcd: client({ endpoints: member.clientUrl, auth: { username: "app", password: "app-pw" }, fetch }), fetch };
}

describe("token refresh after the server forgets its tokens", () => {
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
    watch = watcher.etcd
      .watch({ key: "app/refresh", startRevision: rev, signal: controller.signal })
      [Symbol.asyncIterator]();
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
    const values = await Promise.all(
      Array.from({ length: 5 }, (_, i) => concurrent.etcd.put(`app/stale/${i}`, String(i)).then(() => i)),
    );
    expect(values).toEqual([0, 1, 2, 3, 4]);
    expect(authCalls(concurrent.fetch)).toBe(1);
    expect(concurrent.fetch.calls.filter((c) => c.status === 401).length).toBeGreaterThanOrEqual(1);
    expect((await concurrent.etcd.range({ prefix: "app/stale/" })).count).toBe(5);
  });

  // On reconnect with the stale token, etcd answers
  // {"created":true,"canceled":true,"cancel_reason":"... invalid auth token"}.
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
