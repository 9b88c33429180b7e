// Waiting that ends badly (session expiry, abort, timeout, try-lock), holders whose lease runs out,
// renewal, release semantics, tickets, inspection, and one session's concurrent callers.
import { describe, it } from "vitest";
import { EtcdError, type Lock, op, type Session } from "../../src/index.js";
import { rejection, sleep, stillPending, until, within } from "../support/async.js";
import { acquisitionKey, client, fencedPut, keysUnder, leaseAlive, uniqueName, useSessions } from "../support/etcd.js";

const etcd = client();
const newSession = useSessions(etcd, { ttl: 10 });

/** A lock held by a fresh session (ttl 20) on a fresh name. */
async function heldLock(): Promise<{ name: string; lock: Lock; session: Session }> {
  const name = uniqueName();
  const session = await newSession({ ttl: 20 });
  return { name, session, lock: await session.mutex(name).lock() };
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}

describe.concurrent("a waiter that gives up", () => {
  it(
    "(a) a waiter whose own manual ttl-2 session is " +
      "never renewed fails with SESSION_EXPIRED well before its 30 s timeout",
    async ({ expect }) => {
      const { name, lock } = await heldLock();
      const waiter = await newSession({ ttl: 2, keepAlive: "manual" });
      const started = performance.now();
      // Bounded at 12 s so a regression fails fast instead of waiting out the 30 s timeout.
      const error = await within(
        12_000,
        "waiter of an expired session",
        rejection(waiter.mutex(name).lock({ timeout: 30_000 })),
      );
      const elapsed = performance.now() - started;
      expect(error.code).toBe("SESSION_EXPIRED");
      expect(elapsed).toBeLessThan(10_000);
      expect(elapsed).toBeGreaterThan(1_000);
      expect(waiter.alive).toBe(false);
      // Its key goes (deleted on the way out, or with the lease); the holder is untouched.
      await until("waiter key gone", 10_000, async () => (await keysUnder(etcd, name)).length === 1);
      expect(await keysUnder(etcd, name)).toEqual([lock.key]);
      expect(lock.held).toBe(true);
    },
  );

  it("(b) an aborted waiter fails with ABORTED and leaves only the holder's key", async ({ expect }) => {
    const { name, lock } = await heldLock();
    const waiter = await newSession();
    const controller = new AbortController();
    const pending = waiter.mutex(name).lock({ signal: controller.signal });
    await until("waiter joined", 5_000, async () => (await keysUnder(etcd, name)).length === 2);
    expect((await keysUnder(etcd, name)).some((key) => acquisitionKey(name, waiter.leaseId).test(key))).toBe(true);
    const abortedAt = performance.now();
    controller.abort();
    const error = await rejection(pending);
    expect(error.code).toBe("ABORTED");
    expect(performance.now() - abortedAt).toBeLessThan(3_000);
    expect(await keysUnder(etcd, name)).toEqual([lock.key]);
    // The session is still usable for this lock afterwards.
    await lock.unlock();
    const again = await waiter.mutex(name).lock({ timeout: 5_000 });
    expect(again.held).toBe(true);
    await again.unlock();
  });

  it("(b') a signal aborted before the call fails with ABORTED and writes nothing", async ({ expect }) => {
    const { name, lock } = await heldLock();
    const waiter = await newSession();
    const error = await rejection(waiter.mutex(name).lock({ signal: AbortSignal.abort() }));
    expect(error.code).toBe("ABORTED");
    expect(await keysUnder(etcd, name)).toEqual([lock.key]);
  });

  it("(c) a timed-out waiter (timeout 500) fails with TIMEOUT and leaves no key", async ({ expect }) => {
    const { name, lock } = await heldLock();
    const waiter = await newSession();
    const started = performance.now();
    const error = await rejection(waiter.mutex(name).lock({ timeout: 500 }));
    const elapsed = performance.now() - started;
    expect(error.code).toBe("TIMEOUT");
    expect(elapsed).toBeGreaterThanOrEqual(450);
    expect(elapsed).toBeLessThan(5_000);
    expect(await keysUnder(etcd, name)).toEqual([lock.key]);
  });

  it("(d) tryLock: undefined on a held lock (no key left), a Lock on a free one; timeout 0 throws LOCKED", async ({
    expect,
  }) => {
    const { name, lock } = await heldLock();
    const other = await newSession();
    const mutex = other.mutex(name);
    expect(await mutex.tryLock()).toBeUndefined();
    expect(await keysUnder(etcd, name)).toEqual([lock.key]);
    expect((await rejection(mutex.lock({ timeout: 0 }))).code).toBe("LOCKED");
    expect(await keysUnder(etcd, name)).toEqual([lock.key]);

    await lock.unlock();
    const got = await mutex.tryLock();
    expect(got).toBeDefined();
    expect(got!.held).toBe(true);
    expect(got!.key).toMatch(acquisitionKey(name, other.leaseId));
    expect(await keysUnder(etcd, name)).toEqual([got!.key]);
    await got!.unlock();
    expect(await keysUnder(etcd, name)).toEqual([]);
  });

  it("a lock() on a closed session fails with SESSION_CLOSED and writes nothing", async ({ expect }) => {
    const name = uniqueName();
    const session = await newSession();
    await session.close();
    expect((await rejection(session.mutex(name).lock())).code).toBe("SESSION_CLOSED");
    expect(await keysUnder(etcd, name)).toEqual([]);
  });
});

describe.concurrent("a holder whose lease runs out", () => {
  it(
    "(e) manual ttl 2, never renewed: loses the lock, " +
      "its fenced write fails, the next waiter acquires, unlock is LOCK_LOST",
    async ({ expect }) => {
      const name = uniqueName();
      const fenced = `${name}-data`;
      const session = await newSession({ ttl: 2, keepAlive: "manual" });
      const acquiredAt = performance.now();
      const lock = await session.mutex(name).lock();
      expect(lock.held).toBe(true);
      const ok = await etcd.txn().if(lock.ifHeld()).then(op.put(fenced, "first")).commit();
      expect(ok.succeeded).toBe(true);

      const next = await newSession({ ttl: 20 });
      const pending = next.mutex(name).lock({ timeout: 30_000 });

      // Locally: the lock's signal aborts with LOCK_LOST once the lease's deadline passes.
      await within(6_000, "lock.signal abort", aborted(lock.signal));
      const lostAfter = performance.now() - acquiredAt;
      expect(lostAfter).toBeLessThan(4_000);
      expect(lock.held).toBe(false);
      expect(lock.signal.reason).toBeInstanceOf(EtcdError);
      expect((lock.signal.reason as EtcdError).code).toBe("LOCK_LOST");
      expect(session.alive).toBe(false);

      // On the server: once the lease has expired, the fence refuses the stale holder.
      await until("server expired the lease", 10_000, async () => !(await leaseAlive(etcd, lock.leaseId)), 100);
      const stale = await etcd.txn().if(lock.ifHeld()).then(op.put(fenced, "stale")).commit();
      expect(stale.succeeded).toBe(false);
      expect((await etcd.get(fenced))?.value).toBe("first");

      const successor = await within(5_000, "successor acquisition", pending);
      expect(successor.revision).toBeGreaterThan(lock.revision);
      expect((await etcd.txn().if(successor.ifHeld()).then(op.put(fenced, "second")).commit()).succeeded).toBe(true);

      expect((await rejection(lock.unlock())).code).toBe("LOCK_LOST");
      // The stale unlock did not touch the successor's key.
      expect((await etcd.inspectLock(name)).holder?.key).toBe(successor.key);
      await successor.unlock();
    },
  );

  it("(e') the lease deadline alone aborts every lock's signal: nobody has to read `held` or `alive`", async ({
    expect,
  }) => {
    // Eight independent manual ttl-2 holders, acquired one after another. Only the session's own deadline
    // timer can abort their signals here: the test reads nothing that would check the deadline.
    const locks: Lock[] = [];
    for (let i = 0; i < 8; i++) {
      const session = await newSession({ ttl: 2, keepAlive: "manual" });
      locks.push(await session.mutex(uniqueName()).lock());
      await etcd.get(uniqueName()); // some unrelated traffic, as a real holder would do
    }
    await within(8_000, "every lock.signal aborted", Promise.all(locks.map((l) => aborted(l.signal)))).catch(
      (error: Error) => {
        const stuck = locks.filter((l) => !l.signal.aborted).length;
        throw new Error(
          `${stuck} of ${locks.length} lock signals never aborted after their lease deadline passed (${error.message})`,
        );
      },
    );
    for (const lock of locks) expect((lock.signal.reason as EtcdError).code).toBe("LOCK_LOST");
  });

  it("(f) manual ttl 2 renewed every ~700 ms keeps the lock for 5 s", async ({ expect }) => {
    const name = uniqueName();
    const session = await newSession({ ttl: 2, keepAlive: "manual" });
    const lock = await session.mutex(name).lock();
    const started = performance.now();
    for (let i = 0; i < 20 && performance.now() - started < 5_000; i++) {
      await sleep(700);
      const ttl = await lock.renew();
      expect(ttl).toBeGreaterThan(0);
      expect(lock.held).toBe(true);
    }
    expect(performance.now() - started).toBeGreaterThanOrEqual(5_000);
    expect(lock.held).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    const info = await etcd.inspectLock(name);
    expect(info.holder?.key).toBe(lock.key);
    expect(info.holder?.revision).toBe(lock.revision);
    expect(await fencedPut(etcd, lock, `${name}-data`)).toBe(true);
    await lock.unlock();
  });

  it("(g) auto mode keeps a ttl-2 session and its lock alive for 6 s", async ({ expect }) => {
    const name = uniqueName();
    const session = await newSession({ ttl: 2, keepAlive: "auto" });
    const lock = await session.mutex(name).lock();
    await sleep(6_000);
    expect(session.alive).toBe(true);
    expect(session.remaining()).toBeGreaterThan(0);
    expect(lock.held).toBe(true);
    expect(await leaseAlive(etcd, session.leaseId)).toBe(true);
    expect((await etcd.inspectLock(name)).holder?.key).toBe(lock.key);
    expect(await fencedPut(etcd, lock, `${name}-data`)).toBe(true);
    await lock.unlock();
  });
});

describe.concurrent("release", () => {
  it("(h) a second unlock is LOCK_RELEASED; held and signal reflect the release", async ({ expect }) => {
    const { name, lock } = await heldLock();
    await lock.unlock();
    expect(lock.held).toBe(false);
    expect(lock.signal.aborted).toBe(true);
    expect((lock.signal.reason as EtcdError).code).toBe("LOCK_RELEASED");
    expect((await rejection(lock.unlock())).code).toBe("LOCK_RELEASED");
    expect(await keysUnder(etcd, name)).toEqual([]);
  });

  it("(h) `await using` releases at the end of the block, also when it throws", async ({ expect }) => {
    const name = uniqueName();
    const session = await newSession();
    {
      await using lock = await session.mutex(name).lock();
      expect((await etcd.inspectLock(name)).holder?.key).toBe(lock.key);
    }
    expect((await etcd.inspectLock(name)).holder).toBeUndefined();

    const boom = new Error("boom");
    await expect(
      (async () => {
        await using lock = await session.mutex(name).lock();
        expect(lock.held).toBe(true);
        throw boom;
      })(),
    ).rejects.toBe(boom);
    expect((await etcd.inspectLock(name)).holder).toBeUndefined();

    // Unlocked by hand inside the block: disposal does not throw LOCK_RELEASED.
    {
      await using lock = await session.mutex(name).lock();
      await lock.unlock();
    }
    expect((await etcd.inspectLock(name)).holder).toBeUndefined();
  });

  it("a lock whose session is closed is released: held false, unlock LOCK_RELEASED", async ({ expect }) => {
    const { name, lock, session } = await heldLock();
    await session.close();
    expect(lock.held).toBe(false);
    expect((lock.signal.reason as EtcdError).code).toBe("LOCK_RELEASED");
    expect((await rejection(lock.unlock())).code).toBe("LOCK_RELEASED");
    expect(await keysUnder(etcd, name)).toEqual([]);
  });
});

describe.concurrent("tickets", () => {
  it("(i) a ticket resumed by another client can do a fenced write and unlock", async ({ expect }) => {
    const { name, lock } = await heldLock();
    const ticket = JSON.parse(JSON.stringify(lock.ticket()));
    expect(ticket).toEqual({
      name,
      key: lock.key,
      leaseId: lock.leaseId,
      revision: lock.revision,
      secret: expect.any(String),
      ttl: lock.session.ttl,
    });

    const other = client();
    const resumed = await other.resumeLock(ticket);
    expect(resumed.key).toBe(lock.key);
    expect(resumed.revision).toBe(lock.revision);
    expect(resumed.held).toBe(true);
    const write = await other
      .txn()
      .if(resumed.ifHeld())
      .then(op.put(`${name}-data`, "from the resumed lock"))
      .commit();
    expect(write.succeeded).toBe(true);
    // The sender's handle is superseded: its fenced writes are refused and its unlock deletes nothing.
    const stale = await etcd
      .txn()
      .if(lock.ifHeld())
      .then(op.put(`${name}-data`, "from the sender"))
      .commit();
    expect(stale.succeeded).toBe(false);
    expect((await rejection(lock.unlock())).code).toBe("LOCK_LOST");
    expect(await keysUnder(etcd, name)).toEqual([lock.key]);
    expect(await resumed.renew()).toBeGreaterThan(0);
    await resumed.unlock();
    expect(await keysUnder(etcd, name)).toEqual([]);
    expect((await etcd.get(`${name}-data`))?.value).toBe("from the resumed lock");
  });

  it("(i) a ticket resumes once: a second resume of the same ticket is LOCK_LOST", async ({ expect }) => {
    const { lock } = await heldLock();
    const ticket = lock.ticket();
    const first = await client().resumeLock(ticket);
    expect((await rejection(client().resumeLock(ticket))).code).toBe("LOCK_LOST");
    expect(first.held).toBe(true);
    await first.unlock();
  });

  it("(i) a ticket forged from inspectLock's output (no secret, or a guessed one) takes nothing over", async ({
    expect,
  }) => {
    const { name, lock } = await heldLock();
    const { holder } = await etcd.inspectLock(name);
    expect(holder).not.toHaveProperty("secret");
    const forged = { name, key: holder!.key, leaseId: holder!.leaseId, revision: holder!.revision };
    expect((await rejection(client().resumeLock(forged as never))).code).toBe("INVALID_ARGUMENT");
    expect((await rejection(client().resumeLock({ ...forged, secret: "0".repeat(32) }))).code).toBe("LOCK_LOST");
    // The holder is untouched.
    const write = await etcd
      .txn()
      .if(lock.ifHeld())
      .then(op.put(`${name}-data`, "still mine"))
      .commit();
    expect(write.succeeded).toBe(true);
    await lock.unlock();
  });

  it("(i) a stale ticket (lock released, lease alive) is LOCK_LOST", async ({ expect }) => {
    const { lock } = await heldLock();
    const ticket = lock.ticket();
    await lock.unlock();
    expect((await rejection(client().resumeLock(ticket))).code).toBe("LOCK_LOST");
  });

  it("(i) a stale ticket whose lease has ended is LOCK_LOST", async ({ expect }) => {
    const { lock, session } = await heldLock();
    const ticket = lock.ticket();
    await etcd.lease.revoke(session.leaseId);
    expect((await rejection(client().resumeLock(ticket))).code).toBe("LOCK_LOST");
  });

  it("(i) a stale ticket whose key was re-created (new revision) is LOCK_LOST", async ({ expect }) => {
    const { name, lock, session } = await heldLock();
    const ticket = lock.ticket();
    await lock.unlock();
    const again = await session.mutex(name).lock();
    expect(again.revision).toBeGreaterThan(ticket.revision);
    expect((await rejection(client().resumeLock(ticket))).code).toBe("LOCK_LOST");
    await again.unlock();
  });

  it("a failed resume with keepAlive auto does not keep renewing the ticket's lease", async ({ expect }) => {
    // The ticket's owner unlocked and then vanished without revoking (a crashed process): its ttl-2
    // lease must be left to expire, not kept alive forever by the failed resume's session.
    const name = uniqueName();
    const owner = await newSession({ ttl: 2, keepAlive: "manual" });
    const lock = await owner.mutex(name).lock();
    const ticket = lock.ticket();
    await lock.unlock();
    expect((await rejection(client().resumeLock(ticket, { keepAlive: "auto" }))).code).toBe("LOCK_LOST");
    await until("the abandoned lease expired", 8_000, async () => !(await leaseAlive(etcd, owner.leaseId)), 200);
  });
});

describe.concurrent("inspection and one session's own callers", () => {
  it("(j) inspectLock: holder key, revision, lease and ttl > 0, and the waiters in order", async ({ expect }) => {
    const name = uniqueName();
    expect(await etcd.inspectLock(name)).toMatchObject({ holder: undefined, waiters: [] });
    const session = await newSession({ ttl: 15 });
    const lock = await session.mutex(name).lock();
    const waiters = [await newSession(), await newSession()];
    const pending = waiters.map((s) => s.mutex(name).lock());
    await until("two waiters", 5_000, async () => (await etcd.inspectLock(name)).waiters.length === 2);

    const info = await etcd.inspectLock(name);
    expect(info.holder).toEqual({
      key: lock.key,
      revision: lock.revision,
      leaseId: lock.leaseId,
      ttl: expect.any(Number),
    });
    expect(info.holder!.ttl).toBeGreaterThan(0);
    expect(info.holder!.ttl).toBeLessThanOrEqual(15);
    // Both joined at once: either order, but listed in the order of their places in line.
    expect(info.waiters.map((w) => w.leaseId).sort()).toEqual(waiters.map((s) => s.leaseId).sort());
    expect(info.waiters[0]!.revision).toBeLessThan(info.waiters[1]!.revision);

    await lock.unlock();
    const next = await Promise.race(pending);
    expect((await etcd.inspectLock(name)).holder?.key).toBe(next.key);
    expect((await etcd.inspectLock(name)).waiters).toHaveLength(1);
    await next.unlock();
    const last = await Promise.all(pending);
    await last.find((l) => l !== next)!.unlock();
    expect(await etcd.inspectLock(name)).toMatchObject({ holder: undefined, waiters: [] });
  });

  it("(k) two concurrent lock() calls on one session and name never both hold", async ({ expect }) => {
    const name = uniqueName();
    const session = await newSession();
    const mutex = session.mutex(name);
    // Two contenders of their own: etcd orders them by their keys' revisions, whichever was sent first.
    const calls = [mutex.lock({ timeout: 20_000 }), session.mutex(name).lock({ timeout: 20_000 })];
    const firstIndex = await Promise.race(calls.map((call, i) => call.then(() => i)));
    const lock1 = await calls[firstIndex]!;
    const second = calls[1 - firstIndex]!;
    expect(await stillPending(second, 500)).toBe(true);
    expect(lock1.held).toBe(true);
    expect(await mutex.tryLock()).toBeUndefined();

    await lock1.unlock();
    const lock2 = await within(5_000, "second caller", second);
    expect(lock1.held).toBe(false);
    expect(lock2.held).toBe(true);
    expect(lock2.revision).toBeGreaterThan(lock1.revision);
    expect((await etcd.inspectLock(name)).holder?.revision).toBe(lock2.revision);
    await lock2.unlock();
    expect(await keysUnder(etcd, name)).toEqual([]);
  });

  it("(k) a same-session caller queued behind the holder can give up without releasing the holder", async ({
    expect,
  }) => {
    const name = uniqueName();
    const session = await newSession();
    const lock1 = await session.mutex(name).lock();
    const error = await rejection(session.mutex(name).lock({ timeout: 300 }));
    expect(error.code).toBe("TIMEOUT");
    // The holder's key (the caller that gave up had one of its own, now deleted) must survive.
    expect(lock1.held).toBe(true);
    expect(await keysUnder(etcd, name)).toEqual([lock1.key]);
    expect(
      (
        await etcd
          .txn()
          .if(lock1.ifHeld())
          .then(op.put(`${name}-data`, "x"))
          .commit()
      ).succeeded,
    ).toBe(true);
    await lock1.unlock();
  });
});
