// The SDK's mutex and etcd's server-side lock (v3lock) on the same name, on the mock and on real etcd: they share
// one line (`<name>/<lease hex>`, oldest create revision first), so each waits for the other, in order.
// v3lock callers here are plain gateway requests (the public API has no v3lock client): a lock request stays open
// until the lock is acquired.
import { afterAll, describe, expect, it } from "vitest";
import type { Session } from "../../src/index.js";
import { stillPending, within } from "../support/async.js";
import { freshNames, untilLineLength, sharedEndpoint } from "../support/etcd.js";
import { b64, unb64 } from "../support/wire.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();
const sessions: Session[] = [];
const aborts: AbortController[] = [];

// Registered after useBackend's, so it runs before the backend closes.
afterAll(async () => {
  for (const a of aborts) a.abort();
  await Promise.all(sessions.map((s) => s.close().catch(() => {})));
});

const fresh = freshNames("v3lock");

/** The gateway the backend's clients talk to (the mock answers any host). */
function endpoint(): string {
  return backend.name === "mock" ? "http://etcd.test:2379" : sharedEndpoint();
}

/** Raw HTTP to the gateway: the mock's own fetch, or the runtime's. */
function rawFetch(url: string, init: RequestInit): Promise<Response> {
  return backend.mock ? backend.mock.fetch(url, init) : fetch(url, init);
}

async function post(path: string, body: unknown, signal?: AbortSignal): Promise<Record<string, unknown>> {
  const res = await rawFetch(`${endpoint()}${path}`, {
    method: "POST",
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

interface V3Lock {
  /** The lock key as the SDK's clients see it (namespace stripped). */
  key: string;
  /** The key's create revision: the v3lock holder's fencing token. */
  revision: number;
  rawKey: string;
}

/** POST /v3/lock/lock: resolves once the server has acquired the lock for `lease`. */
async function v3lock(name: string, lease: string): Promise<V3Lock> {
  const abort = new AbortController();
  aborts.push(abort);
  const res = await post("/v3/lock/lock", { name: b64(backend.namespace + name), lease }, abort.signal);
  const rawKey = res.key as string;
  const key = unb64(rawKey).slice(backend.namespace.length);
  const kv = await etcd.get(key);
  return { key, revision: kv!.createRevision, rawKey };
}

const v3unlock = (lock: V3Lock) => post("/v3/lock/unlock", { key: lock.rawKey });

async function session(ttl = 30): Promise<Session> {
  const s = await etcd.session({ ttl, keepAlive: "manual" });
  sessions.push(s);
  return s;
}

async function grant(ttl = 30): Promise<string> {
  return (await etcd.lease.grant(ttl)).id;
}

describe("v3lock and the SDK's mutex share one line", () => {
  it("a v3lock caller waits for the SDK holder, then the SDK waits for it; fencing tokens increase", async () => {
    const name = fresh();
    const holder = await (await session()).mutex(name).lock();
    const lease = await grant();
    const server = v3lock(name, lease);
    await untilLineLength(etcd, name, 2);
    expect(await stillPending(server, 200)).toBe(true);
    const line = await etcd.inspectLock(name);
    expect(line).toMatchObject({
      holder: { key: holder.key, revision: holder.revision },
      waiters: [{ key: `${name}/${BigInt(lease).toString(16)}`, leaseId: lease }],
    });

    await holder.unlock();
    const held = await within(5_000, "v3lock acquires after the SDK unlocks", server);
    expect(held.key).toBe(`${name}/${BigInt(lease).toString(16)}`);
    expect(held.revision).toBeGreaterThan(holder.revision);
    expect((await etcd.inspectLock(name)).holder).toMatchObject({
      key: held.key,
      revision: held.revision,
      leaseId: lease,
    });

    const next = (await session()).mutex(name);
    expect(await next.tryLock()).toBeUndefined();
    const waiting = next.lock();
    await untilLineLength(etcd, name, 2);
    expect(await stillPending(waiting, 200)).toBe(true);
    await v3unlock(held);
    const lock = await within(5_000, "SDK acquires after v3lock unlocks", waiting);
    expect(lock.revision).toBeGreaterThan(held.revision);
    await lock.unlock();
    expect((await etcd.range({ prefix: `${name}/` })).count).toBe(0);
  });

  it("mixed waiters are served in the order they joined: v3lock, SDK, v3lock, SDK", async () => {
    const name = fresh();
    const first = await v3lock(name, await grant());
    const order: string[] = [];
    const waiters: Promise<void>[] = [];
    const serverWaiter = async (label: string) => {
      const lock = await v3lock(name, await grant());
      order.push(label);
      expect((await etcd.inspectLock(name)).holder?.key).toBe(lock.key);
      await v3unlock(lock);
    };
    const sdkWaiter = async (label: string) => {
      const mutex = (await session()).mutex(name);
      const lock = await mutex.lock();
      order.push(label);
      expect((await etcd.inspectLock(name)).holder?.key).toBe(lock.key);
      await lock.unlock();
    };
    const labels = ["sdk-1", "v3lock-2", "sdk-3", "v3lock-4"];
    for (const [i, label] of labels.entries()) {
      waiters.push(label.startsWith("sdk") ? sdkWaiter(label) : serverWaiter(label));
      await untilLineLength(etcd, name, i + 2);
    }
    expect(order).toEqual([]);
    await v3unlock(first);
    await within(10_000, "every waiter served", Promise.all(waiters));
    expect(order).toEqual(labels);
    expect((await etcd.range({ prefix: `${name}/` })).count).toBe(0);
  });

  it("a v3lock holder whose lease is revoked hands over to the SDK waiter; its fenced key is gone", async () => {
    const name = fresh();
    const lease = await grant();
    const held = await v3lock(name, lease);
    const waiting = (await session()).mutex(name).lock();
    await untilLineLength(etcd, name, 2);
    await etcd.lease.revoke(lease);
    const lock = await within(5_000, "SDK acquires after the v3lock lease ended", waiting);
    expect(await etcd.get(held.key)).toBeUndefined();
    expect(lock.revision).toBeGreaterThan(held.revision);
    await lock.unlock();
  });

  it("a v3lock without a lease gets a 60 s lease from the server, which the SDK sees as the holder's", async () => {
    const name = fresh();
    const res = await post("/v3/lock/lock", { name: b64(backend.namespace + name) });
    const line = await etcd.inspectLock(name);
    expect(line.holder?.ttl).toBeGreaterThan(50);
    expect(line.holder?.ttl).toBeLessThanOrEqual(60);
    expect(atob(res.key as string)).toBe(`${backend.namespace}${name}/${BigInt(line.holder!.leaseId).toString(16)}`);
    await etcd.lease.revoke(line.holder!.leaseId);
    expect((await etcd.inspectLock(name)).holder).toBeUndefined();
  });

  it("operator.requestRelease neither blocks nor misleads v3lock, whichever side holds", async () => {
    const name = fresh();
    const held = await v3lock(name, await grant());
    const waiting = (await session()).mutex(name).lock();
    await untilLineLength(etcd, name, 2);
    expect((await etcd.requestRelease(name, { reason: "asked" }))?.key).toBe(held.key);
    expect(await stillPending(waiting, 300)).toBe(true);
    expect((await etcd.inspectLock(name)).holder?.key).toBe(held.key);
    await v3unlock(held);
    const lock = await within(5_000, "the SDK's lock after v3unlock", waiting);

    const v3waiting = v3lock(name, await grant());
    await untilLineLength(etcd, name, 2);
    expect((await etcd.requestRelease(name))?.key).toBe(lock.key);
    expect(await stillPending(v3waiting, 300)).toBe(true);
    await lock.unlock();
    const next = await within(5_000, "v3lock after the SDK's unlock", v3waiting);
    expect(next.revision).toBeGreaterThan(lock.revision);
    await v3unlock(next);
    expect((await etcd.range({ prefix: `${name}/` })).count).toBe(0);
  });
});
