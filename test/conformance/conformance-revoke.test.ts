// Taking a lock away from its holder, and asking it to let go (issue 40): `operator.revokeLock` ends one holding (its
// key deleted, guarded by its token) and tells its holder the operator's reason; `operator.requestRelease` only asks,
// through a record beside the line that no contender reads. For every recipe: a mutex, an election's leader, a
// semaphore's permits, a read-write lock's writer and readers. Go's Mutex, `etcdctl lock` and v3lock beside a
// request are in test/etcd/revoke-interop.test.ts; the learn latency (p99) in `npm run bench`.
// Tests run side by side (describe.concurrent) to overlap their waits: each has its own clients and names.
import { describe, expect, it } from "vitest";
import { sleep, stillPending, until, within } from "../support/async.js";
import { fencedPut, freshNames, keysUnder, useSessions } from "../support/etcd.js";
import { useBackend } from "./backend.js";

const { etcd } = useBackend();
const newSession = useSessions(etcd, { ttl: 60 });
const fresh = freshNames("revoke");

/** A holding lasts this long before it follows its key (FOLLOW_AFTER), and a little more. */
const FOLLOWING_MS = 1_300;
/** How long, at most, a following holding takes to learn: one event, a read or two, and slack. */
const AT_ONCE_MS = 2_000;

const requestsOf = async (key: string) => (await etcd.get(`__etcd-edge/requests/${key}`))?.value;

describe.concurrent("operator.revokeLock", () => {
  it("ends the mutex's holding only: its holder learns why, its fenced writes fail, a waiter holds", async () => {
    const name = fresh();
    const session = await newSession();
    const lock = await session.mutex(name).lock();
    const other = await newSession();
    const waiting = other.mutex(name).lock({ timeout: 10_000 });
    await sleep(FOLLOWING_MS);

    const revoked = await etcd.revokeLock(name, { reason: "deploy 42 needs the nightly job stopped" });
    expect(revoked).toMatchObject({ key: lock.key, token: lock.revision, leaseId: session.leaseId });
    expect(revoked!.reason).toBe("deploy 42 needs the nightly job stopped");

    await until("the holder learns it", AT_ONCE_MS, () => !lock.held);
    expect(lock.signal.reason).toMatchObject({ code: "LOCK_LOST" });
    const message = (lock.signal.reason as Error).message;
    expect(message).toContain("revoked (operator.revokeLock)");
    expect(message).toContain("deploy 42 needs the nightly job stopped");
    // Taken away, not asked to let go: its releaseRequested stays quiet.
    expect(lock.releaseRequested.aborted).toBe(false);
    expect(await fencedPut(etcd, lock, `${name}-data`)).toBe(false);
    await expect(lock.unlock()).rejects.toMatchObject({ code: "LOCK_LOST" });
    // Only that holding: its session lives on, and can lock again.
    expect(session.alive).toBe(true);

    const next = await within(AT_ONCE_MS, "the waiter's lock", waiting);
    expect(next.revision).toBeGreaterThan(lock.revision);
    await next.unlock();
    const again = await session.mutex(name).lock();
    await again.unlock();
  });

  it("a holding younger than a second learns it at its release, with the reason", async () => {
    const name = fresh();
    const session = await newSession();
    const lock = await session.mutex(name).lock();
    await etcd.revokeLock(name, { reason: "stuck" });
    expect(await fencedPut(etcd, lock, `${name}-data`)).toBe(false);
    const error = await lock.unlock().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "LOCK_LOST" });
    expect((error as Error).message).toContain("revoked (operator.revokeLock): stuck");
  });

  it("resolves undefined on a free lock, and on a key that holds nothing", async () => {
    const name = fresh();
    expect(await etcd.revokeLock(name)).toBeUndefined();
    const session = await newSession();
    const lock = await session.mutex(name).lock();
    const waiter = await newSession();
    const waiting = waiter.mutex(name).lock({ timeout: 10_000 });
    await until("the waiter joined", AT_ONCE_MS, async () => (await keysUnder(etcd, name)).length === 2);
    const waiterKey = (await keysUnder(etcd, name)).find((key) => key !== lock.key)!;
    // A waiter does not hold: nothing to revoke, and its wait goes on.
    expect(await etcd.revokeLock(name, { key: waiterKey })).toBeUndefined();
    expect(await stillPending(waiting, 200)).toBe(true);
    await lock.unlock();
    await (await waiting).unlock();
  });

  it("refuses a bad reason or key, and names under the SDK's own prefix, before sending", async () => {
    await expect(etcd.revokeLock("x", { reason: "" })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(etcd.revokeLock("x", { reason: "r".repeat(1_025) })).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
    });
    await expect(etcd.requestRelease("x", { key: 7 as never })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(etcd.revokeLock("__etcd-edge/requests/x")).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    const session = await newSession();
    expect(() => session.mutex("__etcd-edge/x")).toThrow(/must not start with "__etcd-edge\/"/);
  });

  it("ends an election's leadership: the leader learns it, the next candidate leads", async () => {
    const name = fresh();
    const leader = (await newSession()).election(name);
    await leader.campaign("one");
    const next = (await newSession()).election(name);
    const campaigning = next.campaign("two", { timeout: 10_000 });
    await sleep(FOLLOWING_MS);
    const signal = leader.signal!;
    const revoked = await etcd.revokeLock(name, { reason: "failover drill" });
    expect(revoked?.token).toBe(leader.revision);
    await until("the leader learns it", AT_ONCE_MS, () => !leader.isLeader);
    expect(signal.reason).toMatchObject({ code: "LOCK_LOST" });
    expect((signal.reason as Error).message).toContain("failover drill");
    await within(AT_ONCE_MS, "the next leader", campaigning);
    expect(next.isLeader).toBe(true);
    await next.resign();
  });

  it("takes one permit of a semaphore: the oldest, or the one `key` names; the others hold on", async () => {
    const name = fresh();
    const session = await newSession();
    const semaphore = session.semaphore(name, { permits: 3 });
    const permits = [await semaphore.acquire(), await semaphore.acquire(), await semaphore.acquire()];
    await sleep(FOLLOWING_MS);
    expect((await etcd.revokeLock(name))?.key).toBe(permits[0]!.key);
    expect((await etcd.revokeLock(name, { key: permits[2]!.key }))?.key).toBe(permits[2]!.key);
    await until("both learn it", AT_ONCE_MS, () => !permits[0]!.held && !permits[2]!.held);
    expect(permits[1]!.held).toBe(true);
    await permits[1]!.release();
  });

  it("takes a read-write lock's writer, or one of its readers", async () => {
    const name = fresh();
    const session = await newSession();
    const rw = session.rwlock(name);
    const writer = await rw.writeLock();
    await sleep(FOLLOWING_MS);
    expect((await etcd.revokeLock(name, { reason: "w" }))?.key).toBe(writer.key);
    await until("the writer learns it", AT_ONCE_MS, () => !writer.held);

    const readers = [await rw.readLock(), await rw.readLock()];
    await sleep(FOLLOWING_MS);
    expect((await etcd.revokeLock(name, { key: readers[1]!.key }))?.key).toBe(readers[1]!.key);
    await until("that reader learns it", AT_ONCE_MS, () => !readers[1]!.held);
    expect(readers[0]!.held).toBe(true);
    await readers[0]!.unlock();
  });
});

describe.concurrent("operator.requestRelease", () => {
  it("aborts the holder's releaseRequested with the reason, and changes nothing else", async () => {
    const name = fresh();
    const session = await newSession();
    const lock = await session.mutex(name).lock();
    const waiter = await newSession();
    const waiting = waiter.mutex(name).lock({ timeout: 10_000 });
    await sleep(FOLLOWING_MS);
    const line = await keysUnder(etcd, name);
    expect(lock.releaseRequested.aborted).toBe(false);

    const asked = await etcd.requestRelease(name, { reason: "please finish, deploy at 10:00" });
    expect(asked).toMatchObject({ key: lock.key, token: lock.revision });
    await until("the holder is asked", AT_ONCE_MS, () => lock.releaseRequested.aborted);
    expect(lock.releaseRequested.reason).toMatchObject({ code: "RELEASE_REQUESTED" });
    expect((lock.releaseRequested.reason as Error).message).toContain("please finish, deploy at 10:00");
    // Nothing else: still held, its fenced writes land, the line is as it was, the waiter waits.
    expect(lock.held).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    expect(await fencedPut(etcd, lock, `${name}-data`)).toBe(true);
    expect(await keysUnder(etcd, name)).toEqual(line);
    expect(await stillPending(waiting, 200)).toBe(true);

    // Its release takes the request's record with it, right after (never delaying or failing the release).
    expect(await requestsOf(lock.key)).toBeDefined();
    await lock.unlock();
    await until("the record is gone", AT_ONCE_MS, async () => (await requestsOf(lock.key)) === undefined);
    await (await waiting).unlock();
  });

  it("a request made before the holding follows its key is told once it does", async () => {
    const name = fresh();
    const session = await newSession();
    const lock = await session.mutex(name).lock();
    await etcd.requestRelease(name, { reason: "early" });
    expect(lock.releaseRequested.aborted).toBe(false);
    await until("the holder is asked", FOLLOWING_MS + AT_ONCE_MS, () => lock.releaseRequested.aborted);
    await lock.unlock();
  });

  it("a request for an earlier holding of a reused key does not reach the next one", async () => {
    const name = fresh();
    const session = await newSession();
    const mutex = session.mutex(name);
    const first = await mutex.lock();
    // A record for this holding left behind (as a release that could not send its delete would).
    await etcd.put(
      `__etcd-edge/requests/${first.key}`,
      JSON.stringify({ kind: "release", token: first.revision, reason: "old" }),
      {
        lease: session.leaseId,
      },
    );
    await first.unlock();
    await etcd.put(
      `__etcd-edge/requests/${first.key}`,
      JSON.stringify({ kind: "release", token: first.revision, reason: "old" }),
      {
        lease: session.leaseId,
      },
    );
    const second = await mutex.lock();
    await sleep(FOLLOWING_MS + 300);
    expect(second.releaseRequested.aborted).toBe(false);
    await second.unlock();
  });

  it("asks an election's leader, and a permit named by its key", async () => {
    const name = fresh();
    const leader = (await newSession()).election(name);
    await leader.campaign("one");
    await sleep(FOLLOWING_MS);
    await etcd.requestRelease(name, { reason: "step down" });
    await until("the leader is asked", AT_ONCE_MS, () => leader.releaseRequested?.aborted === true);
    expect(leader.isLeader).toBe(true);
    await leader.resign();

    const semaphore = (await newSession()).semaphore(fresh(), { permits: 2 });
    const permits = [await semaphore.acquire(), await semaphore.acquire()];
    await sleep(FOLLOWING_MS);
    await etcd.requestRelease(semaphore.name, { key: permits[1]!.key });
    await until("that permit is asked", AT_ONCE_MS, () => permits[1]!.releaseRequested.aborted);
    expect(permits[0]!.releaseRequested.aborted).toBe(false);
    await Promise.all(permits.map((p) => p.release()));
  });
});
