import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cmp, op } from "../../src/index.js";
import { type Backend, openBackend, rejection } from "./backend.js";

// The same auth checks on the in-memory gateway (configured users) and on a real auth-enabled member.
let backend: Backend;
const auth = { rootPassword: "root-pw", users: { alice: { password: "alice-pw", prefix: "alice/" } } };

beforeAll(async () => {
  backend = await openBackend({ auth });
}, 60_000);
afterAll(() => backend?.close());

describe("auth", () => {
  it("a user reads and writes under its prefix with a token fetched for it", async () => {
    const etcd = backend.client({ auth: { username: "alice", password: "alice-pw" } });
    await etcd.put("alice/k", "v");
    expect((await etcd.get("alice/k"))?.value).toBe("v");
    const result = await etcd.txn().if(cmp.value("alice/k", "==", "v")).then(op.get("alice/k")).commit();
    expect(result.succeeded).toBe(true);
  });

  it("outside its prefix the user gets PERMISSION_DENIED, and nothing is written", async () => {
    const etcd = backend.client({ auth: { username: "alice", password: "alice-pw" } });
    expect((await rejection(etcd.put("bob/k", "v"))).code).toBe("PERMISSION_DENIED");
    const root = backend.client({ auth: { username: "root", password: "root-pw" } });
    expect(await root.get("bob/k")).toBeUndefined();
  });

  it("without credentials, and with a wrong password, calls fail with UNAUTHENTICATED", async () => {
    expect((await rejection(backend.client().get("alice/k"))).code).toBe("UNAUTHENTICATED");
    const wrong = backend.client({ auth: { username: "alice", password: "nope" } });
    expect((await rejection(wrong.get("alice/k"))).code).toBe("UNAUTHENTICATED");
  });

  it("a lock works for a user whose role covers the lock's prefix", async () => {
    const etcd = backend.client({ auth: { username: "alice", password: "alice-pw" } });
    const owner = await etcd.withLock("alice/lock", async (lock) => lock.key, { ttl: 5 });
    expect(owner).toMatch(/^alice\/lock\/[0-9a-f]+$/);
    expect((await etcd.range({ prefix: "alice/lock/" })).kvs).toEqual([]);
  });
});
