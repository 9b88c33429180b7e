// The mock's v3lock and v3election services, status and member list, through raw gateway requests.
import { describe, expect, it } from "vitest";
import { createMockEtcd } from "../../src/testing/index.js";
import { call } from "../support/mock.js";
import { b64, unb64 } from "../support/wire.js";

const BASE = "http://etcd.test:2379";

/** Whether a promise is still pending once queued work has run. */
async function pending(p: Promise<unknown>): Promise<boolean> {
  const marker = Symbol();
  return (await Promise.race([p, new Promise((r) => setTimeout(() => r(marker), 20))])) === marker;
}

describe("v3lock", () => {
  it("lock waits for the holder in create-revision order; unlock deletes the key and hands over", async () => {
    const mock = createMockEtcd();
    await call(mock, "/v3/lease/grant", { TTL: 60, ID: "16" });
    await call(mock, "/v3/lease/grant", { TTL: 60, ID: "17" });
    const first = await call(mock, "/v3/lock/lock", { name: b64("job"), lease: "16" });
    // Grants write no key, so the first lock's put is revision 2.
    expect(first).toEqual({
      status: 200,
      body: { header: expect.objectContaining({ revision: "2" }), key: b64("job/10") },
    });
    const second = call(mock, "/v3/lock/lock", { name: b64("job"), lease: 17 });
    expect(await pending(second)).toBe(true);
    expect(mock.keys("job/")).toEqual(["job/10", "job/11"]);
    // The same lease locking again owns the lock already (its key exists): etcd reuses it.
    expect((await call(mock, "/v3/lock/lock", { name: b64("job"), lease: "16" })).body.key).toBe(b64("job/10"));
    const unlock = await call(mock, "/v3/lock/unlock", { key: first.body.key });
    expect(unlock.body.header.revision).toBe("4");
    expect(await second).toEqual({
      status: 200,
      body: { header: expect.objectContaining({ revision: "4" }), key: b64("job/11") },
    });
  });

  it("without a lease the server grants a 60 s lease nobody renews; the lock ends with it", async () => {
    const mock = createMockEtcd();
    const lock = await call(mock, "/v3/lock/lock", { name: b64("n") });
    const [lease] = mock.leases();
    expect(lease).toMatchObject({ ttl: 60, keys: [unb64(lock.body.key)] });
    expect(unb64(lock.body.key)).toBe(`n/${lease!.id.toString(16)}`);
    mock.advance(60_000);
    expect(mock.keys("n/")).toEqual([]);
  });

  it("a waiter whose client goes away leaves the line (its key is deleted)", async () => {
    const mock = createMockEtcd();
    await call(mock, "/v3/lock/lock", { name: b64("q") });
    const abort = new AbortController();
    const waiting = call(mock, "/v3/lock/lock", { name: b64("q") }, abort.signal);
    await pending(waiting);
    expect(mock.keys("q/")).toHaveLength(2);
    abort.abort();
    await expect(waiting).rejects.toThrow(/abort/i);
    await new Promise((r) => setTimeout(r, 0));
    expect(mock.keys("q/")).toHaveLength(1);
  });

  it("errors come back as code 2 (500) with etcd's message", async () => {
    const mock = createMockEtcd({ version: "3.5" });
    expect(await call(mock, "/v3/lock/lock", { name: b64("x"), lease: "99" })).toEqual({
      status: 500,
      body: { code: 2, message: "etcdserver: requested lease not found" },
    });
    expect(await call(mock, "/v3/lock/unlock", {})).toEqual({
      status: 500,
      body: { code: 2, message: "etcdserver: key is not provided" },
    });
  });

  it(
    "3.5 answers 'mutex: session is expired' when the waiter's own key went while it waited; " + "3.4 acquires anyway",
    async () => {
      for (const version of ["3.4", "3.5"] as const) {
        const mock = createMockEtcd({ version });
        await call(mock, "/v3/lease/grant", { TTL: 60, ID: "1" });
        await call(mock, "/v3/lease/grant", { TTL: 60, ID: "2" });
        const holder = await call(mock, "/v3/lock/lock", { name: b64("s"), lease: "1" });
        const waiter = call(mock, "/v3/lock/lock", { name: b64("s"), lease: "2" });
        await pending(waiter);
        await call(mock, "/v3/lease/revoke", { ID: "2" });
        await call(mock, "/v3/lock/unlock", { key: holder.body.key });
        const answer = await waiter;
        if (version === "3.5")
          expect(answer).toEqual({ status: 500, body: { code: 2, message: "mutex: session is expired" } });
        else expect(answer.body.key).toBe(b64("s/2"));
      }
    },
  );
});

describe("v3election", () => {
  it("campaign, leader, proclaim, observe, resign with Go's key layout", async () => {
    const mock = createMockEtcd();
    await call(mock, "/v3/lease/grant", { TTL: 60, ID: "10" });
    await call(mock, "/v3/lease/grant", { TTL: 60, ID: "11" });
    expect(await call(mock, "/v3/election/leader", { name: b64("e") })).toEqual({
      status: 500,
      body: { error: "election: no leader", message: "election: no leader", code: 2 },
    });
    const a = await call(mock, "/v3/election/campaign", { name: b64("e"), lease: "10", value: b64("a") });
    expect(a.body.leader).toEqual({ name: b64("e"), key: b64("e/a"), rev: "2", lease: "10" });

    const abort = new AbortController();
    const observed = await mock.fetch(`${BASE}/v3/election/observe`, {
      method: "POST",
      body: JSON.stringify({ name: b64("e") }),
      signal: abort.signal,
    });
    const reader = observed.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    const next = async () => {
      while (!buffer.includes("\n")) buffer += (await reader.read()).value ?? "";
      const line = buffer.slice(0, buffer.indexOf("\n"));
      buffer = buffer.slice(buffer.indexOf("\n") + 1);
      return JSON.parse(line).result;
    };
    expect((await next()).kv).toMatchObject({ key: b64("e/a"), value: b64("a") });

    const b = call(mock, "/v3/election/campaign", { name: b64("e"), lease: "11", value: b64("b") });
    expect(await pending(b)).toBe(true);
    const proclaimed = await call(mock, "/v3/election/proclaim", { leader: a.body.leader, value: b64("a2") });
    expect(proclaimed.body.header.revision).toBe("4");
    expect((await next()).kv).toMatchObject({ key: b64("e/a"), value: b64("a2"), version: "2" });
    expect((await call(mock, "/v3/election/leader", { name: b64("e") })).body.kv).toMatchObject({
      key: b64("e/a"),
      value: b64("a2"),
    });
    // A stale leader key: not the leader.
    expect(
      (await call(mock, "/v3/election/proclaim", { leader: { ...a.body.leader, rev: "3" }, value: b64("x") })).body
        .message,
    ).toBe("election: not leader");

    await call(mock, "/v3/election/resign", { leader: a.body.leader });
    // The campaign's header is its joining txn's, whenever it was elected.
    expect((await b).body).toEqual({
      header: expect.objectContaining({ revision: "3" }),
      leader: { name: b64("e"), key: b64("e/b"), rev: "3", lease: "11" },
    });
    expect((await next()).kv).toMatchObject({ key: b64("e/b"), value: b64("b") });
    expect((await call(mock, "/v3/election/resign", {})).body.message).toBe('"leader" field must be provided');
    abort.abort();
  });
});

describe("maintenance status and member list", () => {
  it("describe the single member, which leads", async () => {
    const mock = createMockEtcd({ version: "3.5", memberId: "42", name: "m1", clientUrls: ["http://127.0.0.1:2379"] });
    const status = await call(mock, "/v3/maintenance/status", {});
    expect(status.body).toMatchObject({
      version: "3.5.16",
      leader: "42",
      raftTerm: "2",
      dbSize: expect.any(String),
      raftIndex: expect.any(String),
    });
    const members = await call(mock, "/v3/cluster/member/list", {});
    expect(members.body.header).not.toHaveProperty("revision");
    expect(members.body.members).toEqual([
      { ID: "42", name: "m1", peerURLs: ["http://localhost:2380"], clientURLs: ["http://127.0.0.1:2379"] },
    ]);
  });
});
