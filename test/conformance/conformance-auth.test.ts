// Auth on the in-memory gateway (configured users) and on a real auth-enabled member: tokens, permissions,
// and how failures are classified. What only a real member can show (it forgets tokens on restart) is in
// test/etcd/auth-token-refresh.test.ts.
import { describe, expect, it } from "vitest";
import { cmp, EtcdServerError, op } from "../../src/index.js";
import { rejection, within } from "../support/async.js";
import { authCalls, eventCount, events, pull, recordingFetch, useWatches } from "../support/etcd.js";
import { useBackend } from "./backend.js";

const auth = { rootPassword: "root-pw", users: { alice: { password: "alice-pw", prefix: "alice/" } } };
const { backend } = useBackend({ auth });

/** A client that logs in as alice (or as `username`/`password`), with every request it sends recorded. */
function user(username = "alice", password = "alice-pw") {
  const fetch = recordingFetch(backend.fetch);
  return { etcd: backend.client({ auth: { username, password }, fetch }), fetch };
}

const watchOn = useWatches();

describe("with credentials", () => {
  it("a user reads and writes under its prefix, authenticating once for many calls", async () => {
    const { etcd, fetch } = user();
    await etcd.put("alice/a", "1");
    await etcd.put("alice/b", "2");
    expect((await etcd.get("alice/a"))?.value).toBe("1");
    expect((await etcd.range({ prefix: "alice/" })).kvs.map((kv) => [kv.key, kv.value])).toEqual([
      ["alice/a", "1"],
      ["alice/b", "2"],
    ]);
    const result = await etcd
      .txn()
      .if(cmp.value("alice/a", "==", "1"))
      .then(op.get("alice/a"))
      .commit();
    expect(result.succeeded).toBe(true);
    expect(fetch.paths()[0]).toBe("/v3/auth/authenticate");
    expect(authCalls(fetch)).toBe(1);
    const root = backend.client({ auth: { username: "root", password: "root-pw" } });
    expect((await root.get("alice/a"))?.value).toBe("1");
  });

  it("concurrent first calls share one authentication", async () => {
    const { etcd, fetch } = user();
    await Promise.all(Array.from({ length: 5 }, (_, i) => etcd.put(`alice/concurrent/${i}`, String(i))));
    expect(authCalls(fetch)).toBe(1);
    expect((await etcd.range({ prefix: "alice/concurrent/" })).count).toBe(5);
  });

  it("outside its prefix: PERMISSION_DENIED for writes, reads, deletes and txns, and nothing is written", async () => {
    const { etcd } = user();
    expect(await rejection(etcd.put("bob/k", "v"))).toMatchObject({
      code: "PERMISSION_DENIED",
      grpcCode: 7,
      httpStatus: 403,
    });
    expect((await rejection(etcd.get("bob/k"))).code).toBe("PERMISSION_DENIED");
    expect((await rejection(etcd.range({ prefix: "" }))).code).toBe("PERMISSION_DENIED");
    expect((await rejection(etcd.delete({ prefix: "bob/" }))).code).toBe("PERMISSION_DENIED");
    expect((await rejection(etcd.txn().then(op.put("alice/ok", "v"), op.put("bob/x", "v")).commit())).code).toBe(
      "PERMISSION_DENIED",
    );
    // The permitted half of that txn was not applied either.
    expect(await etcd.get("alice/ok")).toBeUndefined();
    // A sibling that shares the text but not the slash is outside too.
    expect((await rejection(etcd.put("alice-not-quite/k", "v"))).code).toBe("PERMISSION_DENIED");
    const root = backend.client({ auth: { username: "root", password: "root-pw" } });
    expect(await root.get("bob/k")).toBeUndefined();
  });

  it("a watch works under the prefix (history, then live), and is PERMISSION_DENIED outside it", async () => {
    const { etcd } = user();
    const rev = (await etcd.put("alice/watched", "1")).header.revision;
    await etcd.put("alice/watched", "2");
    const watch = watchOn(etcd, { key: "alice/watched", startRevision: rev });
    const batches = await pull(watch, eventCount(2), 5_000);
    expect(events(batches).map((e) => e.kv.value)).toEqual(["1", "2"]);
    await etcd.put("alice/watched", "3");
    await pull(watch, eventCount(3), 5_000, batches);
    expect(events(batches)[2]!.kv.value).toBe("3");

    const denied = watchOn(etcd, { prefix: "bob/" });
    await expect(within(3_000, "denied watch", denied.next())).rejects.toMatchObject({ code: "PERMISSION_DENIED" });
  });

  it("a lock works for a user whose role covers the lock's prefix", async () => {
    const { etcd } = user();
    const owner = await etcd.withLock("alice/lock", async (lock) => lock.key, { ttl: 5 });
    expect(owner).toMatch(/^alice\/lock\/[0-9a-f]+_[0-9a-f]{16}$/);
    expect((await etcd.range({ prefix: "alice/lock/" })).kvs).toEqual([]);
  });
});

describe("without or with wrong credentials", () => {
  it("no credentials: UNAUTHENTICATED (etcd says 'user name is empty', gRPC InvalidArgument)", async () => {
    const anonymous = backend.client();
    expect(await rejection(anonymous.get("alice/k"))).toMatchObject({ code: "UNAUTHENTICATED", grpcCode: 3 });
    expect((await rejection(anonymous.put("alice/k", "x"))).code).toBe("UNAUTHENTICATED");
  });

  // etcd answers such a watch with ONE line {"created":true,"canceled":true,"cancel_reason":"... user name is empty"}.
  it("a watch without credentials fails with UNAUTHENTICATED promptly (no reconnect loop)", async () => {
    const watch = watchOn(backend.client(), { prefix: "alice/" });
    const started = Date.now();
    await expect(within(4_000, "unauthenticated watch", watch.next())).rejects.toMatchObject({
      code: "UNAUTHENTICATED",
    });
    // Reconnecting cannot help when there are no credentials to send.
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("a wrong password fails after ONE authenticate request, never sending the call, and is not cached", async () => {
    const { etcd, fetch } = user("alice", "wrong");
    const error = await rejection(etcd.get("alice/k"));
    expect(error).toBeInstanceOf(EtcdServerError);
    // etcd: HTTP 400, "etcdserver: authentication failed, invalid user ID or password", gRPC 3 InvalidArgument;
    // a failed login is handled like a missing or expired token.
    expect(error).toMatchObject({ code: "UNAUTHENTICATED", grpcCode: 3, httpStatus: 400 });
    expect(error.message).toMatch(/authentication failed/);
    expect(fetch.paths()).toEqual(["/v3/auth/authenticate"]);
    // A second call tries again, still without sending the call itself.
    expect((await rejection(etcd.put("alice/k", "x"))).message).toMatch(/authentication failed/);
    expect(fetch.paths()).toEqual(["/v3/auth/authenticate", "/v3/auth/authenticate"]);
  });

  it("an unknown user is UNAUTHENTICATED too", async () => {
    expect((await rejection(user("nobody", "x").etcd.get("alice/k"))).code).toBe("UNAUTHENTICATED");
  });
});
