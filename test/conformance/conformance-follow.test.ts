// A holding that learns at once (issue 32): in a session that keeps its lease alive itself (`keepAlive: "auto"`),
// a holding that has lasted a second follows its key on its line's watch, so an outside delete, overwrite or
// revocation turns `held` false, aborts `signal` with LOCK_LOST naming the cause and tells `onEvent`, within one
// watch event: before, it said `held` until its lease's deadline or its release. A short holding opens nothing.
// The latency (p99 on loopback) is measured by `npm run bench`; the bound here only tells "at once" from "at
// the next renewal or later".
// Tests run side by side (describe.concurrent) to overlap their one-second waits: each has its own client,
// session and names; those that count requests run alone.
import { describe, expect, it } from "vitest";
import { type EtcdEvent, type Lock, op } from "../../src/index.js";
import { sleep, until, within } from "../support/async.js";
import { freshNames, recordingFetch, untilLineLength, useSessions } from "../support/etcd.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();
const newSession = useSessions(etcd, { ttl: 60 });
const fresh = freshNames("follow");

/** A lock held for longer than a second in an auto session, and what its client told `onEvent`. */
async function lastingLock() {
  const events: EtcdEvent[] = [];
  const fetch = recordingFetch(backend.fetch);
  const client = backend.client({ fetch, onEvent: (event) => events.push(event) });
  const session = await newSession({ keepAlive: "auto" }, client);
  const lock = await session.mutex(fresh()).lock();
  await sleep(1_300);
  return { lock, session, events, fetch };
}

/** How long, at most, a holding takes to learn what happened to its key: one event, one read, and slack. */
const AT_ONCE_MS = 2_000;

describe.concurrent("a holding that has lasted a second, in an auto session", () => {
  it("learns that another client deleted its key", async () => {
    const { lock, events } = await lastingLock();
    expect(lock.held).toBe(true);
    await etcd.delete(lock.key);
    await until("held turns false", AT_ONCE_MS, () => !lock.held);
    expect(lock.signal.reason).toMatchObject({ code: "LOCK_LOST" });
    expect((lock.signal.reason as Error).message).toContain("deleted by another client");
    expect(events.some((e) => e.type === "lock.lost" && e.revision === lock.revision)).toBe(true);
    await expect(lock.unlock()).rejects.toMatchObject({ code: "LOCK_LOST" });
  });

  it("learns that its lease was revoked, and so does its session", async () => {
    const { lock, session } = await lastingLock();
    await etcd.lease.revoke(session.leaseId);
    await until("held turns false", AT_ONCE_MS, () => !lock.held);
    expect((lock.signal.reason as Error).message).toContain("lease");
    expect(session.alive).toBe(false);
  });

  it("learns that a put overwrote its key (cut loose from its lease), then deleted so it blocks nobody", async () => {
    const { lock } = await lastingLock();
    await etcd.put(lock.key, "someone else's");
    await until("held turns false", AT_ONCE_MS, () => !lock.held);
    expect((lock.signal.reason as Error).message).toContain("overwritten");
    await until("the cut-loose key is gone", AT_ONCE_MS, async () => (await etcd.get(lock.key)) === undefined);
  });

  it("learns that its ticket was taken over", async () => {
    const { lock } = await lastingLock();
    const taken = await backend.client().resumeLock(lock.ticket());
    await until("held turns false", AT_ONCE_MS, () => !lock.held);
    expect((lock.signal.reason as Error).message).toContain("taken over with its ticket");
    expect(taken.held).toBe(true);
    await taken.unlock();
    await taken.session.close();
  });

  it("a leader's own proclamation does not end its leadership", async () => {
    const session = await newSession({ keepAlive: "auto" });
    const election = session.election(fresh());
    await election.campaign("one");
    await sleep(1_300);
    await election.proclaim("two");
    await sleep(300);
    expect(election.isLeader).toBe(true);
    await election.resign();
  });
});

// Alone: it counts its client's requests, which a slow machine's renewals would add to.
describe("a holding that has lasted a second, in an auto session: its streams", () => {
  it("one watch per line and client, however many holdings are in it, and one for requests", async () => {
    const name = fresh();
    const fetch = recordingFetch(backend.fetch);
    const client = backend.client({ fetch });
    const session = await newSession({ keepAlive: "auto" }, client);
    const semaphore = session.semaphore(name, { permits: 3 });
    const permits = await Promise.all([semaphore.acquire(), semaphore.acquire(), semaphore.acquire()]);
    const lock = await session.mutex(fresh()).lock();
    await sleep(1_300);
    // The semaphore's line, the mutex's line, and the operators' records (line/requests.ts) of all holdings.
    const watches = fetch.calls.filter((c) => c.path === "/v3/watch");
    expect(watches).toHaveLength(3);
    await lock.unlock();
    await etcd.delete(permits[1]!.key);
    await until("that permit is lost", AT_ONCE_MS, () => !permits[1]!.held);
    expect([permits[0]!.held, permits[2]!.held]).toEqual([true, true]);
    await Promise.all([permits[0]!.release(), permits[2]!.release()]);
  });
});

describe.concurrent("an overwrite that keeps the holder's lease (issue 37, finding 5)", () => {
  // A write of another client to a holding's key, bound to the holding's own lease: the key keeps its create
  // revision and its lease, so only its version tells. Every holding learns it as a mutex's lock does; on
  // 4e52409 a leader, a permit and a read or write lock went on saying held, and their release was clean.
  const lasting = async () => {
    const session = await newSession({ keepAlive: "auto" });
    const name = fresh();
    return { session, name };
  };
  const kinds: Array<[string, () => Promise<{ key: string; held: () => boolean; signal: () => AbortSignal }>]> = [
    [
      "a lock",
      async () => {
        const { session, name } = await lasting();
        const lock = await session.mutex(name).lock();
        return { key: lock.key, held: () => lock.held, signal: () => lock.signal };
      },
    ],
    [
      "a leader",
      async () => {
        const { session, name } = await lasting();
        const election = session.election(name);
        await election.campaign("mine");
        return { key: election.key!, held: () => election.isLeader, signal: () => new AbortController().signal };
      },
    ],
    [
      "a permit",
      async () => {
        const { session, name } = await lasting();
        const permit = await session.semaphore(name, { permits: 2 }).acquire();
        return { key: permit.key, held: () => permit.held, signal: () => permit.signal };
      },
    ],
    [
      "a read lock",
      async () => {
        const { session, name } = await lasting();
        const lock = await session.rwlock(name).readLock();
        return { key: lock.key, held: () => lock.held, signal: () => lock.signal };
      },
    ],
    [
      "a write lock",
      async () => {
        const { session, name } = await lasting();
        const lock = await session.rwlock(name).writeLock();
        return { key: lock.key, held: () => lock.held, signal: () => lock.signal };
      },
    ],
    [
      "lockAll's locks",
      async () => {
        const { session, name } = await lasting();
        const locks = await session.lockAll([name, `${name}-b`]);
        return { key: locks.keys[1]!, held: () => locks.held, signal: () => locks.signal };
      },
    ],
  ];

  it.each(kinds)("%s learns it at once, and the key is deleted so it blocks nobody", async (kind, take) => {
    const holding = await take();
    await sleep(1_300);
    const { kvs } = await etcd.range({ key: holding.key });
    await etcd.put(holding.key, "someone else's", { lease: kvs[0]!.lease });
    await until("held turns false", AT_ONCE_MS, () => !holding.held());
    if (kind !== "a leader") expect((holding.signal().reason as Error).message).toContain("overwritten");
    await until("the overwritten key is gone", AT_ONCE_MS, async () => (await etcd.get(holding.key)) === undefined);
  });

  it("a lock with two waiters of its client behind it learns it at once too; they then hold in turn", async () => {
    const client = backend.client();
    const [holder, ...behind] = await Promise.all([0, 1, 2].map(() => newSession({ keepAlive: "auto" }, client)));
    const name = fresh();
    const lock = await holder!.mutex(name).lock();
    // The client's second waiter opens the line's stream, which asks etcd for deletes alone: the holding, once it
    // follows its key, needs puts too.
    const waiting: Array<Promise<Lock>> = [];
    for (const session of behind) {
      waiting.push(session.mutex(name).lock({ timeout: 20_000 }));
      await untilLineLength(etcd, name, waiting.length + 1);
    }
    await sleep(1_300);
    const { kvs } = await etcd.range({ key: lock.key });
    await etcd.put(lock.key, "someone else's", { lease: kvs[0]!.lease });
    await until("held turns false", AT_ONCE_MS, () => !lock.held);
    expect((lock.signal.reason as Error).message).toContain("overwritten");
    const next = await within(AT_ONCE_MS, "the first waiter takes the lock", waiting[0]!);
    await next.unlock();
    await (await within(AT_ONCE_MS, "the second waiter takes it after", waiting[1]!)).unlock();
  });

  it("a leader's proclamations, however many and however quick, are its own", async () => {
    const session = await newSession({ keepAlive: "auto" });
    const election = session.election(fresh());
    await election.campaign("v0");
    await sleep(1_300);
    for (let i = 1; i <= 20; i++) await election.proclaim(`v${i}`);
    await sleep(300);
    expect(election.isLeader).toBe(true);
    expect((await election.leader())?.value).toBe("v20");
    const written = await etcd
      .txn()
      .if(election.ifLeader())
      .then(op.put(`${election.prefix}-data`, "x"))
      .commit();
    expect(written.succeeded).toBe(true);
    await election.resign();
  });
});

describe("a short holding", () => {
  it("opens no watch: lock and unlock are two requests", async () => {
    const fetch = recordingFetch(backend.fetch);
    const session = await newSession({ keepAlive: "auto" }, backend.client({ fetch }));
    const start = fetch.calls.length;
    const lock = await session.mutex(fresh()).lock();
    await sleep(200);
    await lock.unlock();
    await sleep(1_200);
    expect(fetch.calls.slice(start).map((c) => c.path)).toEqual(["/v3/kv/txn", "/v3/kv/txn"]);
  });
});

describe("a manual session's holding", () => {
  it("follows nothing: it keeps the documented deadline, and its release finds what happened", async () => {
    const fetch = recordingFetch(backend.fetch);
    const session = await newSession({ keepAlive: "manual" }, backend.client({ fetch }));
    const lock = await session.mutex(fresh()).lock();
    await sleep(1_300);
    await etcd.txn().then(op.delete(lock.key)).commit();
    await sleep(300);
    expect(lock.held).toBe(true);
    expect(fetch.calls.some((c) => c.path === "/v3/watch")).toBe(false);
    await expect(lock.unlock()).rejects.toMatchObject({ code: "LOCK_LOST" });
  });
});
