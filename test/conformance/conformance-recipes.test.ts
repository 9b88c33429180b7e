// Semaphores, read-write locks and multi-locks on the mock and on real etcd: who may hold at once, FIFO order,
// requests per acquisition, try/abort/timeout/lease loss leaving no key, fencing, and the one-call forms.
//
// Sessions here are keepAlive "manual" (no background renewals), as in conformance-locks.test.ts.
import { describe, expect, it } from "vitest";
import { type Etcd, EtcdError, type Fetch, op, type Session } from "../../src/index.js";
import { rejection, sleep, stillPending, until, within } from "../support/async.js";
import { freshNames, keysUnder, lineLength, recordingFetch, untilLineLength, useSessions } from "../support/etcd.js";
import { describeSideBySide, useBackend } from "./backend.js";

const { backend, etcd } = useBackend();
// After useBackend: the sessions close before the backend does.
const open = useSessions(etcd, { keepAlive: "manual" });
const fresh = freshNames("recipe");

const session = (ttl = 30, client: Etcd = etcd): Promise<Session> => open({ ttl }, client);

/**
 * Forwards every request; once armed, the next transaction that puts a key is applied but its answer is lost
 * (the connection "breaks" after the server answered), so the SDK sends it again. `meanwhile` runs after it was
 * applied, before the loss.
 */
function losingOneAnswer(inner: Fetch, meanwhile?: () => Promise<unknown>): Fetch & { arm(): void; lost: number } {
  let armed = false;
  const f = Object.assign(
    async (input: string, init: Parameters<Fetch>[1]) => {
      const response = await inner(input, init);
      if (armed && new URL(input).pathname === "/v3/kv/txn" && init.body.includes("request_put")) {
        armed = false;
        f.lost++;
        await response.text();
        await meanwhile?.();
        throw new TypeError("fetch failed: the answer was lost (test)");
      }
      return response;
    },
    { lost: 0, arm: () => (armed = true) },
  );
  return f;
}

/**
 * Forwards every request; a transaction that puts a key reaches the server only after `ms`, whatever the
 * caller's signal says meanwhile: a join already on the wire when its caller gives up.
 */
function slowJoins(inner: Fetch, ms: number): Fetch {
  return async (input, init) => {
    if (new URL(input).pathname === "/v3/kv/txn" && init.body.includes("request_put")) {
      const rest = { ...init, signal: new AbortController().signal };
      await sleep(ms);
      return inner(input, rest);
    }
    return inner(input, init);
  };
}

/** How long after advance(3_500) a 2 s lease may still take to go on real etcd. */
const EXPIRY_GRACE_MS = 3_000;

describe("semaphore", () => {
  it(
    "admits `permits` holders at once, then one waiter per release, " +
      "in join order, with distinct increasing tokens",
    async () => {
      const name = fresh("sem");
      const [a, b, c, d] = await Promise.all([session(), session(), session(), session()]);
      const first = await a.semaphore(name, { permits: 2 }).acquire();
      const second = await b.semaphore(name, { permits: 2 }).acquire();
      expect(second.revision).toBeGreaterThan(first.revision);
      const order: string[] = [];
      const third = c
        .semaphore(name, { permits: 2 })
        .acquire()
        .then((p) => {
          order.push("c");
          return p;
        });
      await untilLineLength(etcd, name, 3);
      const fourth = d
        .semaphore(name, { permits: 2 })
        .acquire()
        .then((p) => {
          order.push("d");
          return p;
        });
      await untilLineLength(etcd, name, 4);
      expect(await stillPending(Promise.race([third, fourth]), 100)).toBe(true);

      const info = await etcd.inspectSemaphore(name);
      expect(info.permits).toBe(2);
      expect(info.holders.map((h) => h.key)).toEqual([first.key, second.key]);
      expect(info.waiters.map((w) => w.leaseId)).toEqual([c.leaseId, d.leaseId]);

      // The second holder leaves first: the first waiter in line takes its place, not the second.
      await second.release();
      const thirdPermit = await within(5_000, "first waiter admitted", third);
      expect(await stillPending(fourth, 100)).toBe(true);
      await first.release();
      const fourthPermit = await within(5_000, "second waiter admitted", fourth);
      expect(order).toEqual(["c", "d"]);
      expect(fourthPermit.revision).toBeGreaterThan(thirdPermit.revision);
      expect(thirdPermit.revision).toBeGreaterThan(second.revision);
      await Promise.all([thirdPermit.release(), fourthPermit.release()]);
      expect(await lineLength(etcd, name)).toBe(0);
    },
  );

  it(
    "one session holds several permits at once; " +
      "tryAcquire() → undefined and acquire({ timeout: 0 }) → LOCKED when full, leaving no key",
    async () => {
      const name = fresh("sem");
      const s = await session();
      const semaphore = s.semaphore(name, { permits: 2 });
      const [p1, p2] = await Promise.all([semaphore.acquire(), semaphore.acquire()]);
      expect(p1!.key).not.toBe(p2!.key);
      expect(p1!.held && p2!.held).toBe(true);
      expect(await semaphore.tryAcquire()).toBeUndefined();
      expect((await rejection(semaphore.acquire({ timeout: 0 }))).code).toBe("LOCKED");
      expect(await lineLength(etcd, name)).toBe(2);
      await p1!.release();
      const p3 = await semaphore.tryAcquire();
      expect(p3?.revision).toBeGreaterThan(p2!.revision);
      await Promise.all([p2!.release(), p3!.release()]);
      await expect(p3!.release()).rejects.toMatchObject({ code: "LOCK_RELEASED" });
    },
  );

  it("tryAcquire() says undefined only when every permit is taken: any other failure is thrown", async () => {
    const name = fresh("sem");
    const holder = await (await session()).semaphore(name, { permits: 2 }).acquire();
    const other = await session();
    expect((await rejection(other.semaphore(name, { permits: 3 }).tryAcquire())).code).toBe("PERMITS_MISMATCH");
    await other.close();
    expect((await rejection(other.semaphore(name, { permits: 2 }).tryAcquire())).code).toBe("SESSION_CLOSED");
    expect(await lineLength(etcd, name)).toBe(1);
    await holder.release();
  });

  it(
    "a contender with another number of permits gets PERMITS_MISMATCH and leaves no key; " +
      "one on a mutex's line gets LOCK_NAME_CONFLICT, and no error quotes the lock's secret",
    async () => {
      const name = fresh("sem");
      const holder = await (await session()).semaphore(name, { permits: 2 }).acquire();
      const other = await session();
      const error = await rejection(other.semaphore(name, { permits: 3 }).acquire());
      expect(error.code).toBe("PERMITS_MISMATCH");
      expect(error.message).toContain(holder.key);
      expect(await lineLength(etcd, name)).toBe(1);
      await holder.release();
      // Alone in the line, any number is accepted.
      const alone = await other.semaphore(name, { permits: 3 }).acquire();
      await alone.release();

      const mutexName = fresh("mutex");
      const lock = await (await session()).mutex(mutexName).lock();
      const secret = lock.ticket().secret;
      const refused = await rejection(other.semaphore(mutexName, { permits: 2 }).acquire());
      expect(refused.code).toBe("LOCK_NAME_CONFLICT");
      expect(refused.message).toContain(lock.key);
      const inspected = await rejection(etcd.inspectSemaphore(mutexName));
      expect(inspected.code).toBe("LOCK_NAME_CONFLICT");
      for (const error of [refused, inspected])
        expect(JSON.stringify([error.message, String(error)])).not.toContain(secret);
      expect(await lineLength(etcd, mutexName)).toBe(1);
      await lock.unlock();
    },
  );

  it("abort and timeout while waiting leave no key; bad permits are refused before any request", async () => {
    const name = fresh("sem");
    const holder = await (await session()).semaphore(name, { permits: 1 }).acquire();
    const waiter = (await session()).semaphore(name, { permits: 1 });
    const abort = new AbortController();
    const aborted = waiter.acquire({ signal: abort.signal });
    await untilLineLength(etcd, name, 2);
    abort.abort();
    expect((await rejection(aborted)).code).toBe("ABORTED");
    expect(await lineLength(etcd, name)).toBe(1);
    expect((await rejection(waiter.acquire({ timeout: 150 }))).code).toBe("TIMEOUT");
    expect(await lineLength(etcd, name)).toBe(1);
    await holder.release();
    for (const permits of [0, -1, 1.5, Number.NaN, undefined]) {
      expect(() => waiter.session.semaphore(name, { permits: permits as number })).toThrow(
        expect.objectContaining({ code: "INVALID_ARGUMENT" }),
      );
    }
  });

  it("a join whose answer was lost is resent: the waiter keeps one key and its exact place in line", async () => {
    const name = fresh("sem");
    const permits = 2;
    const holders = await Promise.all([session(), session()]);
    const held = await Promise.all(holders.map((s) => s.semaphore(name, { permits }).acquire()));
    const ahead = (await session()).semaphore(name, { permits }).acquire();
    await untilLineLength(etcd, name, 3);
    const fetch = losingOneAnswer(backend.fetch);
    const s = await session(30, backend.client({ fetch }));
    fetch.arm();
    const waiting = s.semaphore(name, { permits }).acquire();
    await untilLineLength(etcd, name, 4);
    await held[0]!.release();
    const first = await within(5_000, "the waiter ahead", ahead);
    expect(await stillPending(waiting, 150)).toBe(true);
    await held[1]!.release();
    const permit = await within(5_000, "the resent waiter", waiting);
    expect(fetch.lost).toBe(1);
    expect((await etcd.inspectSemaphore(name)).holders.map((h) => h.key)).toEqual([first.key, permit.key]);
    await Promise.all([first.release(), permit.release()]);
    expect(await lineLength(etcd, name)).toBe(0);
  });

  it("a waiter behind that gives up moves nobody ahead of it: the next one waits for a holder to release", async () => {
    const name = fresh("sem");
    const holder = await (await session()).semaphore(name, { permits: 1 }).acquire();
    const next = (await session()).semaphore(name, { permits: 1 }).acquire();
    await untilLineLength(etcd, name, 2);
    const abort = new AbortController();
    const behind = (await session()).semaphore(name, { permits: 1 }).acquire({ signal: abort.signal });
    await untilLineLength(etcd, name, 3);
    abort.abort();
    expect((await rejection(behind)).code).toBe("ABORTED");
    expect(await lineLength(etcd, name)).toBe(2);
    // The delete of a key behind it is no permit coming free: the waiter ahead is not admitted by it.
    expect(await stillPending(next, 300)).toBe(true);
    await holder.release();
    const permit = await within(5_000, "the waiter, once the holder released", next);
    await permit.release();
  });

  it.each(["watch", "poll"] as const)(
    "wait: %s: a waiter whose own key another client deletes fails with SESSION_EXPIRED at once, never holds",
    async (wait) => {
      const name = fresh("sem");
      const holder = await (await session()).semaphore(name, { permits: 1 }).acquire();
      const waiting = (await session()).semaphore(name, { permits: 1 }).acquire({ wait, pollInterval: 50 });
      const outcome = waiting.then(
        () => "held",
        (e: unknown) => e,
      );
      await untilLineLength(etcd, name, 2);
      const [, waiterKey] = (await etcd.range({ prefix: `${name}/`, sort: { target: "createRevision" } })).kvs;
      await etcd.delete(waiterKey!.key);
      expect(holder.held).toBe(true);
      // Free the permit at once: a waiter that missed its own key's loss would take it, holding nothing in etcd.
      await holder.release();
      const error = await within(2_000, "the waiter's outcome", outcome);
      expect(error).toMatchObject({ code: "SESSION_EXPIRED" });
      // It says what was not done, and for which name.
      expect((error as Error).message).toContain(`permit of semaphore ${name} was not acquired`);
      expect(await lineLength(etcd, name)).toBe(0);
    },
  );

  it('wait: "poll" counts only the keys ahead, not those behind', async () => {
    const name = fresh("sem");
    const held = await Promise.all(
      [session(), session()].map(async (s) => (await s).semaphore(name, { permits: 2 }).acquire()),
    );
    const waiting = (await session()).semaphore(name, { permits: 2 }).acquire({ wait: "poll", pollInterval: 50 });
    await untilLineLength(etcd, name, 3);
    const behind = (await session()).semaphore(name, { permits: 2 }).acquire({ wait: "poll", pollInterval: 50 });
    await untilLineLength(etcd, name, 4);
    expect(await stillPending(waiting, 100)).toBe(true);
    await held[1]!.release();
    const permit = await within(5_000, "polling waiter", waiting);
    expect(await stillPending(behind, 100)).toBe(true);
    await held[0]!.release();
    const last = await within(5_000, "polling waiter behind", behind);
    await Promise.all([permit.release(), last.release()]);
  });
});

describe("read-write lock", () => {
  it(
    "readers share, a writer waits for them, " +
      "readers after a waiting writer wait for it (FIFO), a write lock excludes all",
    async () => {
      const name = fresh("rw");
      const [r1s, r2s, ws, r3s] = await Promise.all([session(), session(), session(), session()]);
      const r1 = await r1s.rwlock(name).readLock();
      const r2 = await r2s.rwlock(name).readLock({ timeout: 0 });
      expect(r2.revision).toBeGreaterThan(r1.revision);
      const events: string[] = [];
      const writing = ws
        .rwlock(name)
        .writeLock()
        .then((w) => {
          events.push("writer");
          return w;
        });
      await untilLineLength(etcd, name, 3);
      const reading = r3s
        .rwlock(name)
        .readLock()
        .then((r) => {
          events.push("reader after writer");
          return r;
        });
      await untilLineLength(etcd, name, 4);
      expect(await stillPending(Promise.race([writing, reading]), 100)).toBe(true);
      await expect(r3s.rwlock(name).readLock({ timeout: 0 })).rejects.toMatchObject({ code: "LOCKED" });

      await r2.unlock();
      expect(await stillPending(writing, 100)).toBe(true);
      await r1.unlock();
      const w = await within(5_000, "writer", writing);
      expect(await stillPending(reading, 100)).toBe(true);
      await expect(r1s.rwlock(name).writeLock({ timeout: 0 })).rejects.toMatchObject({ code: "LOCKED" });
      await w.unlock();
      const r3 = await within(5_000, "reader after writer", reading);
      expect(events).toEqual(["writer", "reader after writer"]);
      expect(r3.revision).toBeGreaterThan(w.revision);
      await r3.unlock();
      expect(await lineLength(etcd, name)).toBe(0);
    },
  );

  it("a reader behind a writer, a writer right behind it: it holds once the first leaves, then that one", async () => {
    const name = fresh("rw");
    const first = await (await session()).rwlock(name).writeLock();
    const reader = (await session()).rwlock(name).readLock();
    await untilLineLength(etcd, name, 2);
    // Nothing else is written meanwhile (on the mock): the writer's key is created right after the reader's.
    // Were the reader to count it ahead, each would wait for the other.
    const writer = (await session()).rwlock(name).writeLock();
    await untilLineLength(etcd, name, 3);
    await first.unlock();
    const read = await within(5_000, "reader", reader);
    expect(read.revision).toBeGreaterThan(first.revision);
    expect(await stillPending(writer, 100)).toBe(true);
    await read.unlock();
    const written = await within(5_000, "writer", writer);
    expect(written.revision).toBeGreaterThan(read.revision);
    await written.unlock();
    expect(await lineLength(etcd, name)).toBe(0);
  });

  it("a waiting reader whose key another client deleted never holds: SESSION_EXPIRED, not acquired", async () => {
    const name = fresh("rw");
    const first = await (await session()).rwlock(name).writeLock();
    const reader = rejection((await session()).rwlock(name).readLock());
    await untilLineLength(etcd, name, 2);
    const [key] = (await keysUnder(etcd, name)).filter((key) => key.includes("/read/"));
    await etcd.delete(key!);
    await first.unlock();
    const error = await reader;
    expect(error.code).toBe("SESSION_EXPIRED");
    expect(error.message).toContain(`read lock ${name} was not acquired`);
    expect(await lineLength(etcd, name)).toBe(0);
  });

  it(
    "a reader's and a writer's join whose answer was lost are resent: " + "one key each, and they wait their turn",
    async () => {
      const name = fresh("rw");
      const writer = await (await session()).rwlock(name).writeLock();
      const fetch = losingOneAnswer(backend.fetch);
      const s = await session(30, backend.client({ fetch }));
      fetch.arm();
      const reading = s.rwlock(name).readLock();
      await untilLineLength(etcd, name, 2);
      expect(await stillPending(reading, 100)).toBe(true);
      await writer.unlock();
      const reader = await within(5_000, "resent reader", reading);
      fetch.arm();
      const writing = s.rwlock(name).writeLock();
      await untilLineLength(etcd, name, 2);
      expect(await stillPending(writing, 100)).toBe(true);
      await reader.unlock();
      const next = await within(5_000, "resent writer", writing);
      expect(fetch.lost).toBe(2);
      expect(await lineLength(etcd, name)).toBe(1);
      await next.unlock();
    },
  );
});

describe("lockAll", () => {
  it(
    "takes every lock in one request when free; " + "one revision fences all; unlock releases all in one request",
    async () => {
      const [a, b] = [fresh("acct"), fresh("acct")];
      const fetch = recordingFetch(backend.fetch);
      const s = await session(30, backend.client({ fetch }));
      const mark = fetch.mark();
      const both = await s.lockAll([a, b]);
      expect(fetch.since(mark)).toEqual(["/v3/kv/txn"]);
      // A mutex's key in each line, of its own: `<name>/<leaseHex>_<16 hex>`.
      const own = (name: string) => new RegExp(`^${name}/${BigInt(s.leaseId).toString(16)}_[0-9a-f]{16}$`);
      expect(both.keys).toHaveLength(2);
      expect(both.keys[0]).toMatch(own(a));
      expect(both.keys[1]).toMatch(own(b));
      const holders = await Promise.all([etcd.inspectLock(a), etcd.inspectLock(b)]);
      expect(holders.map((h) => h.holder?.revision)).toEqual([both.revision, both.revision]);
      const write = await etcd
        .txn()
        .if(...both.ifHeld())
        .then(op.put(`${a}-balance`, "1"), op.put(`${b}-balance`, "2"))
        .commit();
      expect(write.succeeded).toBe(true);
      const unlockMark = fetch.mark();
      await both.unlock();
      expect(fetch.since(unlockMark)).toEqual(["/v3/kv/txn"]);
      expect(
        (
          await etcd
            .txn()
            .if(...both.ifHeld())
            .then(op.put(`${a}-balance`, "stale"))
            .commit()
        ).succeeded,
      ).toBe(false);
      expect((await lineLength(etcd, a)) + (await lineLength(etcd, b))).toBe(0);
      await expect(both.unlock()).rejects.toMatchObject({ code: "LOCK_RELEASED" });
    },
  );

  it("excludes and is excluded by plain mutex users of each name", async () => {
    const [a, b] = [fresh("acct"), fresh("acct")];
    const [ms, ls, ms2] = await Promise.all([session(), session(), session()]);
    const mutexB = await ms.mutex(b).lock();
    const taking = ls.lockAll([a, b]);
    await untilLineLength(etcd, b, 2);
    // lockAll holds its place in a's line: a mutex on a now waits for it.
    const mutexA = ms2.mutex(a).lock();
    await untilLineLength(etcd, a, 2);
    expect(await stillPending(Promise.race([taking, mutexA]), 100)).toBe(true);
    await expect((await session()).mutex(a).tryLock()).resolves.toBeUndefined();
    await mutexB.unlock();
    const both = await within(5_000, "lockAll after the mutex on b", taking);
    expect(await stillPending(mutexA, 100)).toBe(true);
    await both.unlock();
    const lockA = await within(5_000, "mutex on a after lockAll", mutexA);
    expect(lockA.revision).toBeGreaterThan(both.revision);
    await lockA.unlock();
  });

  it(
    "overlapping lockAll calls (a,b), (b,c), " + "(c,a) from many sessions all complete, never two holders of a name",
    async () => {
      const names = [fresh("ring"), fresh("ring"), fresh("ring")];
      const sets = [
        [names[0]!, names[1]!],
        [names[1]!, names[2]!],
        [names[2]!, names[0]!],
      ];
      const holding = new Map<string, number>();
      let overlaps = 0;
      let acquisitions = 0;
      const contenders = await Promise.all(Array.from({ length: 6 }, () => session()));
      await within(
        30_000,
        "every lockAll",
        Promise.all(
          contenders.map(async (s, i) => {
            for (let round = 0; round < 4; round++) {
              const set = sets[(i + round) % sets.length]!;
              const locks = await s.lockAll(set, { timeout: 20_000 });
              for (const name of set) {
                holding.set(name, (holding.get(name) ?? 0) + 1);
                if (holding.get(name)! > 1) overlaps++;
              }
              await sleep(2);
              for (const name of set) holding.set(name, holding.get(name)! - 1);
              acquisitions++;
              await locks.unlock();
            }
          }),
        ),
      );
      expect(overlaps).toBe(0);
      expect(acquisitions).toBe(24);
      for (const name of names) expect(await lineLength(etcd, name)).toBe(0);
    },
  );

  it(
    "timeout: 0 → LOCKED, abort and timeout leave no key in any line; " + "bad names are refused before any request",
    async () => {
      const [a, b] = [fresh("acct"), fresh("acct")];
      const holder = await (await session()).mutex(b).lock();
      const s = await session();
      expect((await rejection(s.lockAll([a, b], { timeout: 0 }))).code).toBe("LOCKED");
      expect(await lineLength(etcd, a)).toBe(0);
      const abort = new AbortController();
      const aborted = s.lockAll([a, b], { signal: abort.signal });
      await untilLineLength(etcd, b, 2);
      abort.abort();
      expect((await rejection(aborted)).code).toBe("ABORTED");
      expect((await rejection(s.lockAll([b, a], { timeout: 150 }))).code).toBe("TIMEOUT");
      expect([await lineLength(etcd, a), await lineLength(etcd, b)]).toEqual([0, 1]);
      await holder.unlock();

      const fetch = recordingFetch(backend.fetch);
      const counted = await session(30, backend.client({ fetch }));
      const mark = fetch.mark();
      for (const bad of [[], [a, a], [a, `${a}/x`], [a, ""], "a", Array.from({ length: 65 }, (_, i) => `n${i}`)]) {
        expect((await rejection(counted.lockAll(bad as string[]))).code).toBe("INVALID_ARGUMENT");
      }
      expect(fetch.since(mark)).toEqual([]);
    },
  );

  it("a join whose answer was lost is resent: one key per line, one revision, and it waits its turn", async () => {
    const [a, b] = [fresh("acct"), fresh("acct")];
    const holder = await (await session()).mutex(b).lock();
    const fetch = losingOneAnswer(backend.fetch);
    const s = await session(30, backend.client({ fetch }));
    fetch.arm();
    const taking = s.lockAll([a, b]);
    await untilLineLength(etcd, b, 2);
    expect(await stillPending(taking, 100)).toBe(true);
    await holder.unlock();
    const both = await within(5_000, "resent lockAll", taking);
    expect(fetch.lost).toBe(1);
    expect((await etcd.inspectLock(a)).holder?.revision).toBe(both.revision);
    expect((await etcd.inspectLock(b)).holder?.revision).toBe(both.revision);
    expect([await lineLength(etcd, a), await lineLength(etcd, b)]).toEqual([1, 1]);
    await both.unlock();
  });
  it("a join answered after another client deleted one of its keys (answer lost): SESSION_EXPIRED", async () => {
    const [a, b] = [fresh("acct"), fresh("acct")];
    // Landed; before its answer comes back, another client deletes the key it made in b's line.
    const fetch = losingOneAnswer(backend.fetch, async () => etcd.delete((await keysUnder(etcd, b))[0]!));
    const s = await session(30, backend.client({ fetch }));
    fetch.arm();
    const error = await rejection(s.lockAll([a, b]));
    expect(fetch.lost).toBe(1);
    expect(error.code).toBe("SESSION_EXPIRED");
    expect(error.message).toContain(`locks ${a}, ${b} was not acquired`);
    expect([await lineLength(etcd, a), await lineLength(etcd, b)]).toEqual([0, 0]);
  });
});

describe("a join still on the wire when the caller gives up", () => {
  it("lands, then is deleted before the call fails: no key is left to block the line", async () => {
    const [sem, rw, a, b] = [fresh("sem"), fresh("rw"), fresh("acct"), fresh("acct")];
    const s = await session(30, backend.client({ fetch: slowJoins(backend.fetch, 200) }));
    const calls = [
      () => s.semaphore(sem, { permits: 1 }).acquire({ timeout: 50 }),
      () => s.rwlock(rw).readLock({ timeout: 50 }),
      () => s.rwlock(rw).writeLock({ timeout: 50 }),
      () => s.lockAll([a, b], { timeout: 50 }),
    ];
    for (const call of calls) expect((await rejection(call())).code).toBe("TIMEOUT");
    const abort = new AbortController();
    const aborted = s.semaphore(sem, { permits: 1 }).acquire({ signal: abort.signal });
    abort.abort();
    expect((await rejection(aborted)).code).toBe("ABORTED");
    await sleep(300);
    for (const prefix of [sem, rw, a, b]) expect(await lineLength(etcd, prefix)).toBe(0);
  });
});

describe("withSemaphore, withLocks", () => {
  it("run fn under a permit / every lock, return its result, and leave nothing behind", async () => {
    const name = fresh("sem");
    const [a, b] = [fresh("acct"), fresh("acct")];
    const value = await etcd.withSemaphore(
      name,
      3,
      async (permit) => {
        expect(permit.held).toBe(true);
        expect((await etcd.inspectSemaphore(name)).holders.map((h) => h.key)).toEqual([permit.key]);
        return "done";
      },
      { ttl: 10, keepAlive: "manual" },
    );
    expect(value).toBe("done");
    const sum = await etcd.withLocks(
      [a, b],
      async (locks) => {
        const write = await etcd
          .txn()
          .if(...locks.ifHeld())
          .then(op.put(`${a}-w`, "1"))
          .commit();
        return write.succeeded ? locks.names.length : 0;
      },
      { ttl: 10 },
    );
    expect(sum).toBe(2);
    expect([await lineLength(etcd, name), await lineLength(etcd, a), await lineLength(etcd, b)]).toEqual([0, 0, 0]);
    await expect(etcd.withSemaphore(name, 0, () => 1)).rejects.toBeInstanceOf(EtcdError);
    await expect(etcd.withLocks([a, a], () => 1)).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
  });
});

// A member of its own: when other writes move the store on between a waiter's join and its watch's creation,
// the waiter rightly reads its line once more, so exact request counts need a quiet member.
describe("requests per acquisition", () => {
  const quiet = useBackend({ dedicated: true });
  // After the quiet backend: its sessions close before it does.
  const openQuiet = useSessions(quiet.etcd, { keepAlive: "manual" });
  const quietSession = (client: Etcd = quiet.etcd): Promise<Session> => openQuiet({ ttl: 30 }, client);

  it(
    "costs one request uncontended and two for a waiter, " + "however long the line and whoever ahead gives up",
    async () => {
      const name = fresh("sem");
      const permits = 2;
      const holders = await Promise.all([quietSession(), quietSession()]);
      const held = await Promise.all(holders.map((s) => s.semaphore(name, { permits }).acquire()));
      // Four waiters ahead of ours.
      const ahead: Array<{ promise: Promise<unknown>; abort: AbortController }> = [];
      for (let i = 0; i < 4; i++) {
        const abort = new AbortController();
        const s = await quietSession();
        const promise = s
          .semaphore(name, { permits })
          .acquire({ signal: abort.signal })
          .catch((e: unknown) => e);
        ahead.push({ promise, abort });
        await untilLineLength(quiet.etcd, name, permits + i + 1);
      }
      const fetch = recordingFetch(quiet.backend.fetch);
      const waiterSession = await quietSession(quiet.backend.client({ fetch }));
      const mark = fetch.mark();
      const waiting = waiterSession.semaphore(name, { permits }).acquire();
      await untilLineLength(quiet.etcd, name, permits + 5);
      // Three waiters ahead give up, one holder leaves and takes the last one ahead in: ours is not admitted.
      for (const { abort } of ahead.slice(0, 3)) abort.abort();
      await Promise.all(ahead.slice(0, 3).map((w) => w.promise));
      await held[0]!.release();
      const lastAhead = (await within(5_000, "last waiter ahead admitted", ahead[3]!.promise)) as {
        release(): Promise<void>;
      };
      expect(await stillPending(waiting, 100)).toBe(true);
      // The other holder leaves: ours is admitted from the events alone.
      await held[1]!.release();
      const permit = await within(5_000, "our waiter admitted", waiting);
      expect(fetch.since(mark)).toEqual(["/v3/kv/txn", "/v3/watch"]);

      await permit.release();
      const again = fetch.mark();
      const uncontended = await waiterSession.semaphore(name, { permits }).acquire();
      expect(fetch.since(again)).toEqual(["/v3/kv/txn"]);
      await Promise.all([uncontended.release(), lastAhead.release()]);
      expect(await lineLength(quiet.etcd, name)).toBe(0);
    },
  );

  it(
    "a reader waits for the newest older writer only: " +
      "one watch and one read when it goes, whatever readers are ahead",
    async () => {
      const name = fresh("rw");
      const [ws, r1s] = await Promise.all([quietSession(), quietSession()]);
      const w = await ws.rwlock(name).writeLock();
      const r1 = r1s.rwlock(name).readLock();
      await untilLineLength(quiet.etcd, name, 2);
      const fetch = recordingFetch(quiet.backend.fetch);
      const readerSession = await quietSession(quiet.backend.client({ fetch }));
      const mark = fetch.mark();
      const r2 = readerSession.rwlock(name).readLock();
      await untilLineLength(quiet.etcd, name, 3);
      await w.unlock();
      const [first, second] = await within(5_000, "both readers", Promise.all([r1, r2]));
      expect(fetch.since(mark)).toEqual(["/v3/kv/txn", "/v3/watch", "/v3/kv/txn"]);
      await Promise.all([first.unlock(), second.unlock()]);
    },
  );
});

// Each waits out a short lease: side by side on etcd, where each wait is a sleep of its own, one at a time on the
// mock, whose clock advance() moves for all.
describeSideBySide("a lease that expires", () => {
  it(
    "semaphore: a holder whose lease expires loses its permit: signal aborts, " +
      "fenced write refused, the waiter is admitted, release → LOCK_LOST",
    async () => {
      const name = fresh("sem");
      const resource = `${fresh("res")}/data`;
      const short = await session(2);
      const lost = await short.semaphore(name, { permits: 1 }).acquire();
      const signal = lost.signal;
      const next = (await session(60)).semaphore(name, { permits: 1 }).acquire();
      await untilLineLength(etcd, name, 2);
      await backend.advance(3_500);
      const nextPermit = await within(
        EXPIRY_GRACE_MS + 1_000,
        "waiter admitted after the holder's lease expired",
        next,
      );
      await until("the lost permit's signal aborts", 3_000, () => signal.aborted);
      expect(lost.held).toBe(false);
      const stale = await etcd.txn().if(lost.ifHeld()).then(op.put(resource, "stale")).commit();
      expect(stale.succeeded).toBe(false);
      expect((await etcd.txn().if(nextPermit.ifHeld()).then(op.put(resource, "fresh")).commit()).succeeded).toBe(true);
      await expect(lost.release()).rejects.toMatchObject({ code: "LOCK_LOST" });
      await nextPermit.release();
      expect(await lineLength(etcd, name)).toBe(0);
    },
  );

  it("semaphore: a waiter whose lease expires fails with SESSION_EXPIRED and leaves the line", async () => {
    const name = fresh("sem");
    const holder = await (await session(60)).semaphore(name, { permits: 1 }).acquire();
    const waiting = (await session(2)).semaphore(name, { permits: 1 }).acquire();
    const outcome = waiting.then(
      () => undefined,
      (e: unknown) => e,
    );
    await untilLineLength(etcd, name, 2);
    await backend.advance(3_500);
    expect(await within(EXPIRY_GRACE_MS + 2_000, "waiter fails", outcome)).toMatchObject({ code: "SESSION_EXPIRED" });
    expect(await lineLength(etcd, name)).toBe(1);
    await holder.release();
  });

  it("read-write lock: fencing refuses a lost writer and a lost reader; abort and timeout leave no key", async () => {
    const name = fresh("rw");
    const resource = `${fresh("res")}/data`;
    const short = await session(2);
    const reader = await short.rwlock(name).readLock();
    const writerSession = await session(60);
    const writing = writerSession.rwlock(name).writeLock();
    await untilLineLength(etcd, name, 2);
    await backend.advance(3_500);
    const writer = await within(EXPIRY_GRACE_MS + 1_000, "writer after the reader's lease expired", writing);
    expect((await etcd.txn().if(reader.ifHeld()).then(op.put(resource, "stale read")).commit()).succeeded).toBe(false);
    expect((await etcd.txn().if(writer.ifHeld()).then(op.put(resource, "written")).commit()).succeeded).toBe(true);
    await expect(reader.unlock()).rejects.toMatchObject({ code: "LOCK_LOST" });

    const other = (await session()).rwlock(name);
    const abort = new AbortController();
    const aborted = other.readLock({ signal: abort.signal });
    await untilLineLength(etcd, name, 2);
    abort.abort();
    expect((await rejection(aborted)).code).toBe("ABORTED");
    expect((await rejection(other.writeLock({ timeout: 150 }))).code).toBe("TIMEOUT");
    expect(await lineLength(etcd, name)).toBe(1);

    // The writer's lease is revoked: its fenced write is refused from then on.
    await etcd.lease.revoke(writerSession.leaseId);
    expect((await etcd.txn().if(writer.ifHeld()).then(op.put(resource, "late")).commit()).succeeded).toBe(false);
    expect((await etcd.get(resource))?.value).toBe("written");
  });

  it("lockAll: a multi-lock whose lease expires is lost: fenced write refused, unlock → LOCK_LOST", async () => {
    const [a, b] = [fresh("acct"), fresh("acct")];
    const short = await session(2);
    const both = await short.lockAll([a, b]);
    const next = (await session(60)).mutex(a).lock();
    await untilLineLength(etcd, a, 2);
    await backend.advance(3_500);
    const lock = await within(EXPIRY_GRACE_MS + 1_000, "mutex after the multi-lock's lease expired", next);
    expect(
      (
        await etcd
          .txn()
          .if(...both.ifHeld())
          .then(op.put(`${a}-x`, "stale"))
          .commit()
      ).succeeded,
    ).toBe(false);
    // `held` is the client's view: false once the session's own deadline (real clock) has passed.
    await until("held turns false", 3_000, () => !both.held);
    await expect(both.unlock()).rejects.toMatchObject({ code: "LOCK_LOST" });
    await lock.unlock();
  });
});
