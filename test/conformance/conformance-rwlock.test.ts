// A read-write lock's own line (src/lock/rwlock), on the mock and on real etcd: a reader waits only for the
// writers that joined before it, so a writer joining right behind a waiting reader never deadlocks with it; a
// waiting reader whose key another client deleted never holds; and a join whose first answer was lost after it
// landed holds once, with the one key its first send made.
import { describe, expect, it } from "vitest";
import { rejection, until } from "../support/async.js";
import { freshNames, keysUnder, useSessions } from "../support/etcd.js";
import { answerLosingFetch } from "../support/outage.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();
const session = useSessions(etcd, { ttl: 30, keepAlive: "manual" });
const fresh = freshNames("rwlock");
const keysOf = (name: string) => keysUnder(etcd, name);

describe("a reader waiting behind a writer", () => {
  it("with a writer joined right behind it: it holds once the first writer leaves, then that writer", async () => {
    const name = fresh();
    const first = await (await session()).rwlock(name).writeLock();
    const reader = (await session()).rwlock(name).readLock();
    await until("the reader joined", 2_000, async () => (await keysOf(name)).length === 2);
    // Nothing else is written meanwhile: the writer's key is created at the revision right after the reader's.
    const writer = (await session()).rwlock(name).writeLock();
    await until("the writer joined", 2_000, async () => (await keysOf(name)).length === 3);
    await first.unlock();
    const read = await reader;
    expect(read.held).toBe(true);
    expect(read.revision).toBeGreaterThan(first.revision);
    await read.unlock();
    const written = await writer;
    expect(written.revision).toBeGreaterThan(read.revision);
    await written.unlock();
    expect(await keysOf(name)).toEqual([]);
  });

  it("whose key another client deleted never holds: SESSION_EXPIRED saying it was not acquired", async () => {
    const name = fresh();
    const first = await (await session()).rwlock(name).writeLock();
    const reader = rejection((await session()).rwlock(name).readLock());
    await until("the reader joined", 2_000, async () => (await keysOf(name)).length === 2);
    const [key] = (await keysOf(name)).filter((key) => key.includes("/read/"));
    await etcd.delete(key!);
    await first.unlock();
    const error = await reader;
    expect(error.code).toBe("SESSION_EXPIRED");
    expect(error.message).toContain(`read lock ${name} was not acquired`);
    expect(await keysOf(name)).toEqual([]);
  });
});

describe("a join whose first answer was lost after it landed", () => {
  it.each(["readLock", "writeLock"] as const)("%s holds once, with the one key its first send made", async (how) => {
    const name = fresh();
    const fetch = answerLosingFetch(backend.fetch, (path, body) => path === "/v3/kv/txn" && body.includes("put"));
    const held = await (await session({}, backend.client({ fetch }))).rwlock(name)[how]();
    expect(fetch.lost).toBe(1);
    expect(held.held).toBe(true);
    expect(await keysOf(name)).toEqual([held.key]);
    await held.unlock();
    expect(await keysOf(name)).toEqual([]);
  });
});
