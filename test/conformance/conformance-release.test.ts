// Releases off the critical path (issue 24), on the mock and on real etcd: a fenced write that releases the lock
// in the same transaction (`unlockWith` / `releaseWith`), for every holding; and `withLock` handing its release
// to the runtime's `waitUntil`. The handle knows how its lock ended in every case: released by the write,
// lost before it (nothing written, nothing of anyone else's deleted), or unknown after a lost answer (the
// release then goes on in the background).
import { describe, expect, it } from "vitest";
import { type Etcd, type EtcdEvent, op } from "../../src/index.js";
import { rejection, until } from "../support/async.js";
import { freshNames, keysUnder, useSessions } from "../support/etcd.js";
import { answerLosingFetch } from "../support/outage.js";
import { b64 } from "../support/wire.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();
const newSession = useSessions(etcd, { ttl: 30, keepAlive: "manual" });
const fresh = freshNames("release");
const session = (client: Etcd = etcd) => newSession({}, client);

const keysOf = (name: string) => keysUnder(etcd, name);
const valueAt = async (key: string) => (await etcd.get(key))?.value;

/** A client that records the gateway paths it sends and the lock events it tells. */
function observed(options: Parameters<typeof backend.client>[0] = {}) {
  const requests: string[] = [];
  const events: EtcdEvent["type"][] = [];
  const client = backend.client({
    ...options,
    onEvent: (event) => {
      if (event.type === "request") requests.push(event.path);
      else events.push(event.type);
    },
  });
  return { client, requests, events };
}

describe("a write that releases: lock.unlockWith(ops)", () => {
  it("writes and releases in one request; the handle is released, as after unlock()", async () => {
    const name = fresh();
    const { client, requests, events } = observed();
    const lock = await (await session(client)).mutex(name).lock();
    requests.length = 0;

    const [put] = await lock.unlockWith([op.put(`${name}-data`, "written")]);

    expect(requests).toEqual(["/v3/kv/txn"]);
    expect(put.header.revision).toBeGreaterThan(lock.revision);
    expect(await valueAt(`${name}-data`)).toBe("written");
    expect(await keysOf(name)).toEqual([]);
    expect(lock.held).toBe(false);
    expect(lock.signal.aborted).toBe(true);
    expect(events).toContain("lock.released");
    expect((await rejection(lock.unlock())).code).toBe("LOCK_RELEASED");
    expect((await rejection(lock.unlockWith([]))).code).toBe("LOCK_RELEASED");
  });

  it("a lost lock writes nothing and deletes nothing of its new holder's: LOCK_LOST with the reason", async () => {
    const name = fresh();
    const lock = await (await session()).mutex(name).lock();
    // The lock moves to another holder with its ticket: same key, another version.
    const resumed = await backend.client().resumeLock(lock.ticket());

    const error = await rejection(lock.unlockWith([op.put(`${name}-data`, "stale")]));

    expect(error.code).toBe("LOCK_LOST");
    expect(error.message).toMatch(/taken over with its ticket/);
    expect(await valueAt(`${name}-data`)).toBeUndefined();
    expect(await keysOf(name)).toEqual([resumed.key]);
    expect(resumed.held).toBe(true);
    expect(lock.held).toBe(false);
    await resumed.unlock();
    await resumed.session.close();
  });

  it("a lost answer: the error is indeterminate, the write landed, and the handle ends released", async () => {
    const name = fresh();
    const data = b64(`${name}-data`);
    const fetch = answerLosingFetch(backend.fetch, (path, body) => path === "/v3/kv/txn" && body.includes(data));
    const lock = await (await session(backend.client({ fetch }))).mutex(name).lock();

    const error = await rejection(lock.unlockWith([op.put(`${name}-data`, "landed")]));

    expect(fetch.lost).toBe(1);
    expect(error.indeterminate).toBe(true);
    expect(await valueAt(`${name}-data`)).toBe("landed");
    // The release goes on in the background and finds the key gone after its own send: released.
    await until("the background release settles", 10_000, () => !lock.held, 50);
    expect(await keysOf(name)).toEqual([]);
    await lock.unlock();
    expect((await rejection(lock.unlock())).code).toBe("LOCK_RELEASED");
  });

  it("every holding of one key or several releases with a write: permit, read and write lock, lockAll", async () => {
    const name = fresh();
    const s = await session();
    const permit = await s.semaphore(`${name}-pool`, { permits: 2 }).acquire();
    await permit.releaseWith([op.put(`${name}-permit`, "p")]);
    const read = await s.rwlock(`${name}-doc`).readLock();
    await read.unlockWith([op.put(`${name}-read`, "r")]);
    const write = await s.rwlock(`${name}-doc`).writeLock();
    await write.unlockWith([op.put(`${name}-write`, "w")]);
    const both = await s.lockAll([`${name}-a`, `${name}-b`]);
    const [got] = await both.unlockWith([op.get(`${name}-write`)]);
    expect(got.kvs[0]?.value).toBe("w");
    for (const key of ["permit", "read", "write"]) expect(await valueAt(`${name}-${key}`)).toBe(key[0]);
    for (const held of [permit, read, write, both]) expect(held.held).toBe(false);
    for (const prefix of ["pool", "doc", "a", "b"]) expect(await keysOf(`${name}-${prefix}`)).toEqual([]);
  });

  it("lockAll: if one of its locks was lost, nothing is written and the others are not released", async () => {
    const name = fresh();
    const both = await (await session()).lockAll([`${name}-a`, `${name}-b`]);
    await etcd.delete(both.keys[1]!);
    const error = await rejection(both.unlockWith([op.put(`${name}-data`, "x")]));
    expect(error.code).toBe("LOCK_LOST");
    expect(error.message).toMatch(/deleted by another client/);
    expect(await valueAt(`${name}-data`)).toBeUndefined();
    expect(await keysOf(`${name}-a`)).toEqual([both.keys[0]]);
  });
});

describe("withLock", () => {
  it("with unlockWith inside: the lock and the releasing write are its only requests", async () => {
    const name = fresh();
    const { client, requests } = observed();
    await client.withLock(name, () => {}); // grants the shared lease
    requests.length = 0;
    await client.withLock(name, (lock) => lock.unlockWith([op.put(`${name}-data`, "done")]));
    expect(requests).toEqual(["/v3/kv/txn", "/v3/kv/txn"]);
    expect(await valueAt(`${name}-data`)).toBe("done");
    expect(await keysOf(name)).toEqual([]);
    await client.close();
  });

  it("with waitUntil: resolves after fn, before the release, which the runtime finishes", async () => {
    const name = fresh();
    const { client, requests } = observed();
    await client.withLock(name, () => {});
    requests.length = 0;
    const later: Promise<unknown>[] = [];
    const value = await client.withLock(name, () => 42, { waitUntil: (release) => later.push(release) });
    expect(value).toBe(42);
    // Only the lock's join went before the answer; the release is the runtime's to finish.
    expect(requests).toEqual(["/v3/kv/txn"]);
    expect(later).toHaveLength(1);
    await later[0];
    expect(requests).toEqual(["/v3/kv/txn", "/v3/kv/txn"]);
    expect(await keysOf(name)).toEqual([]);
    await client.close();
  });

  it("with waitUntil: fn's error is thrown at once, and the release is still handed off", async () => {
    const name = fresh();
    const later: Promise<unknown>[] = [];
    const failing = etcd.withLock(
      name,
      () => {
        throw new Error("work failed");
      },
      { waitUntil: (release) => later.push(release) },
    );
    await expect(failing).rejects.toThrow("work failed");
    await Promise.all(later);
    expect(await keysOf(name)).toEqual([]);
  });

  it("waitUntil that is not a function is INVALID_ARGUMENT, before anything is sent", async () => {
    const { client, requests } = observed();
    const error = await rejection(client.withLock(fresh(), () => 1, { waitUntil: "later" as never }));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(requests).toEqual([]);
  });
});
