// Liveness under faults (issue "a free lock is taken at once"): each case injects one fault on loopback with
// the fault relay and checks that the lock, session or release still does what it promises, within a bound.
// Each of these stalled or lied before the liveness work: the comment on each says how.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Etcd, Fetch, Lock } from "../../src/index.js";
import { createNodeFetch } from "../../src/node/index.js";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import { rejection, sleep, stillPending, until, within } from "../support/async.js";
import { client, keysUnder, leaseAlive, sharedEndpoint, uniqueName } from "../support/etcd.js";
import { startEtcd } from "./harness.js";

const etcd = client();
let proxy: FaultProxy;

beforeAll(async () => {
  proxy = await startFaultProxy(sharedEndpoint());
});

afterAll(async () => {
  await proxy?.close();
});

/** A client that reaches etcd only through the relay. */
function relayed(options: Partial<ConstructorParameters<typeof Etcd>[0]> = {}): Etcd {
  return client({ endpoints: [proxy.url], timeout: 5_000, ...options });
}

describe("a waiter whose watch connection goes silent", () => {
  // Before: the waiter never heard the release and waited until its own timeout (here 20 s).
  it("learns the lock is free within its watchdog's bound and takes it", async () => {
    const name = uniqueName("liveness");
    const holderSession = await etcd.session({ ttl: 30 });
    const holder = await holderSession.mutex(name).lock();
    const waiterSession = await relayed().session({ ttl: 30 });
    const waiting = waiterSession.mutex(name).lock({ timeout: 20_000 });
    // The waiter's watch is open through the relay once its key is second in line and the stream is up.
    await within(
      5_000,
      "waiter's watch opened",
      (async () => {
        while ((await keysUnder(etcd, name)).length < 2 || proxy.connections() === 0) await sleep(20);
        await sleep(200);
      })(),
    );
    // A NAT drops the flow: the open connection stays open but silent for good; new ones work.
    proxy.silence({ drop: true });
    proxy.resume();
    const released = performance.now();
    await holder.unlock();
    const lock = await within(8_000, "the silent waiter takes the free lock", waiting);
    // Bound: 2 s idle + 1 s grace before the watch is called dead, then a reopen and a read.
    expect(performance.now() - released).toBeLessThan(6_000);
    expect(lock.held).toBe(true);
    await lock.unlock();
    await Promise.all([holderSession.close(), waiterSession.close()]);
  });
});

describe("a silent endpoint costs one attempt, not the call", () => {
  // Before: an auto session renewing through a silent member used its whole deadline there and lost its
  // lease although the other member was healthy.
  it("an auto session renews through the healthy member while the first one is silent", async () => {
    const session = await client({ endpoints: [proxy.url, sharedEndpoint()], timeout: 5_000 }).session({ ttl: 3 });
    proxy.silence();
    try {
      await sleep(7_000);
      expect(session.alive).toBe(true);
      expect(await leaseAlive(etcd, session.leaseId)).toBe(true);
    } finally {
      proxy.resume();
      await session.close();
    }
  });
});

describe("an acquisition outlasts a call's attempts", () => {
  // Before: a join or a read of the line that spent its call's attempts (on silent pooled connections, or on a
  // network that failed for a while) failed the lock with TIMEOUT or UNAVAILABLE, although the caller had
  // asked to wait 15 s and etcd was fine all along.

  /**
   * A fetch that gives the next `count` requests to `path` no answer: "hang" leaves them unanswered until
   * their signal aborts (a silent pooled connection), "break" fails them at once (a broken network).
   */
  function faultyWire() {
    let armed = { path: "", count: 0, how: "hang" as "hang" | "break" };
    let hit = 0;
    const fetch: Fetch = (input, init) => {
      if (armed.count > 0 && String(input).endsWith(armed.path)) {
        armed.count--;
        hit++;
        if (armed.how === "break")
          return Promise.reject(new TypeError("fetch failed", { cause: new Error("socket hang up") }));
        return new Promise((_, reject) => {
          const signal = init?.signal;
          signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
        });
      }
      return globalThis.fetch(input, init);
    };
    const failNext = (path: string, count: number, how: "hang" | "break") => {
      armed = { path, count, how };
    };
    return { fetch, failNext, hit: () => hit };
  }

  it("a join whose call spends every attempt on silent connections is sent again, and the lock is taken", async () => {
    const name = uniqueName("liveness");
    const wire = faultyWire();
    // Three attempts of 300 ms per call.
    const session = await client({ fetch: wire.fetch, timeout: 1_500, attemptTimeout: 300, retries: 2 }).session({
      ttl: 30,
    });
    // Four: the join's first call spends its three attempts, its second call gets through at its second.
    wire.failNext("/v3/kv/txn", 4, "hang");
    const lock = await within(10_000, "the lock is taken", session.mutex(name).lock({ timeout: 15_000 }));
    expect(wire.hit()).toBe(4);
    expect(lock.held).toBe(true);
    expect((await etcd.range({ prefix: `${name}/` })).kvs.map((kv) => kv.createRevision)).toEqual([lock.revision]);
    await lock.unlock();
    // `timeout: 0` tries once, as it says: its join's call fails, and so does the lock, leaving no key.
    wire.failNext("/v3/kv/txn", 3, "hang");
    expect((await rejection(session.mutex(name).lock({ timeout: 0 }))).code).toBe("TIMEOUT");
    await until("no key left", 5_000, async () => (await keysUnder(etcd, name)).length === 0);
    await session.close();
  });

  it.each(["mutex", "semaphore"] as const)(
    "a polling %s whose line reads fail is not failed by them, and takes its turn",
    async (kind) => {
      const name = uniqueName("liveness");
      const wire = faultyWire();
      const waiterSession = await client({ fetch: wire.fetch, retries: 0 }).session({ ttl: 30 });
      const holderSession = await etcd.session({ ttl: 30 });
      const options = { wait: "poll", pollInterval: 50, timeout: 15_000 } as const;
      const take = async (session: typeof holderSession) => {
        if (kind === "mutex") {
          const lock = await session.mutex(name).lock(options);
          return { revision: lock.revision, release: () => lock.unlock() };
        }
        const permit = await session.semaphore(name, { permits: 1 }).acquire(options);
        return { revision: permit.revision, release: () => permit.release() };
      };
      const held = await take(holderSession);
      const waiting = take(waiterSession);
      await until("the waiter is in line", 5_000, async () => (await keysUnder(etcd, name)).length === 2);
      // Each poll is one read; five fail in a row, each at once (no retry left in its call).
      wire.failNext("/v3/kv/range", 5, "break");
      await until("five reads failed", 5_000, () => wire.hit() === 5);
      expect(await stillPending(waiting, 100)).toBe(true);
      await held.release();
      const turn = await within(5_000, "the waiter takes its turn", waiting);
      expect(turn.revision).toBeGreaterThan(held.revision);
      await turn.release();
      await Promise.all([waiterSession.close(), holderSession.close()]);
    },
  );
});

describe("release is idempotent and honest", () => {
  // Before: after a failed unlock(), a second unlock() threw LOCK_RELEASED without sending anything, and the
  // key stayed, blocking every contender for as long as the session lived.
  it("unlock() after a TIMEOUT can be called again and removes the key", async () => {
    const name = uniqueName("liveness");
    const session = await relayed().session({ ttl: 30 });
    const lock = await session.mutex(name).lock();
    proxy.silence({ drop: true });
    const first = await rejection(lock.unlock({ timeout: 600 }));
    expect(first.code).toBe("TIMEOUT");
    expect(first.indeterminate).toBe(true);
    proxy.resume();
    await lock.unlock();
    expect(lock.held).toBe(false);
    expect(await keysUnder(etcd, name)).toEqual([]);
    await expect(lock.unlock()).rejects.toMatchObject({ code: "LOCK_RELEASED" });
    await session.close();
  });

  // Before: a caller that moved on after a failed unlock() left its key, and with it the lock, to the lease:
  // every contender waited for the session to end, and the session's own next lock() of the name waited for
  // the old holding's local turn (seen in the chaos run: a lock blocked for 27 s).
  it(
    "a failed unlock() goes on in the background: " + "once etcd answers the key goes and a waiter takes the lock",
    async () => {
      const name = uniqueName("liveness");
      // A relay and a pool of its own: the connections silenced here stay silent, and must not serve other tests.
      const own = await startFaultProxy(sharedEndpoint());
      const fetch = createNodeFetch();
      const session = await client({ endpoints: [own.url], timeout: 5_000, fetch }).session({ ttl: 30 });
      const lock = await session.mutex(name).lock();
      const contender = await etcd.session({ ttl: 30 });
      const waiting = contender.mutex(name).lock({ timeout: 15_000 });
      await within(
        5_000,
        "the contender is in line",
        (async () => {
          while ((await keysUnder(etcd, name)).length < 2) await sleep(20);
        })(),
      );
      own.silence({ drop: true });
      const failure = await rejection(lock.unlock({ timeout: 600 }));
      expect(failure.code).toBe("TIMEOUT");
      // Given up by its caller, and perhaps deleted already: no longer held, so no two handles are at once.
      expect(lock.held).toBe(false);
      expect(lock.signal.aborted).toBe(true);
      expect(lock.signal.reason).toMatchObject({ code: "LOCK_RELEASED" });
      own.resume();
      // No second unlock(): the background resend removes the key.
      const taken = await within(8_000, "the waiter takes the lock without a second unlock()", waiting);
      expect(taken.held).toBe(true);
      // The next unlock() tells how the release ended; after that the holding is released like any other.
      await lock.unlock();
      await expect(lock.unlock()).rejects.toMatchObject({ code: "LOCK_RELEASED" });
      await taken.unlock();
      // The session's own next lock() of the name is not held up by the old holding's local turn.
      const again = await within(5_000, "the session locks the name again", session.mutex(name).lock());
      expect(again.revision).toBeGreaterThan(lock.revision);
      await again.unlock();
      await Promise.all([session.close(), contender.close()]);
      await fetch.close();
      await own.close();
    },
  );

  // Before: the resend found the key gone and threw LOCK_LOST ("the work was not protected"), which is false.
  it("a delete that was applied but whose answer was lost is a successful unlock", async () => {
    const name = uniqueName("liveness");
    const session = await relayed().session({ ttl: 30 });
    const lock = await session.mutex(name).lock();
    const dropped = proxy.dropNextAnswer({ path: "/v3/kv/txn" });
    await lock.unlock();
    expect(await dropped).toBeDefined();
    expect(lock.held).toBe(false);
    expect(await keysUnder(etcd, name)).toEqual([]);
    await session.close();
  });

  // Before: the revoke was never resent: close() failed with UNAVAILABLE, and a withLock whose fn had
  // completed under the lock reported the error instead of fn's value.
  it("a revocation whose answer was lost is resent: close() reports the lease revoked", async () => {
    const session = await relayed().session({ ttl: 30 });
    const dropped = proxy.dropNextAnswer({ path: "/v3/lease/revoke" });
    expect(await session.close()).toBe(true);
    expect(await dropped).toBeDefined();
    expect(await leaseAlive(etcd, session.leaseId)).toBe(false);
  });

  it("a per-call withLock whose revoke answer was lost returns fn's value", async () => {
    const name = uniqueName("liveness");
    const dropped = proxy.dropNextAnswer({ path: "/v3/lease/revoke" });
    const value = await relayed().withLock(name, () => "done", { ttl: 10, lease: "per-call" });
    expect(value).toBe("done");
    expect(await dropped).toBeDefined();
    expect(await keysUnder(etcd, name)).toEqual([]);
  });

  // Before: a revoke that never arrived left the lock blocked for a whole TTL.
  it("a revocation swallowed on its way is resent, so the lock is free at once", async () => {
    const name = uniqueName("liveness");
    const session = await relayed().session({ ttl: 30 });
    await session.mutex(name).lock();
    const swallowed = proxy.swallowNext({ path: "/v3/lease/revoke" });
    expect(await session.close({ attemptTimeout: 300 })).toBe(true);
    expect(await swallowed).toBeDefined();
    expect(await keysUnder(etcd, name)).toEqual([]);
  });
});

// Side by side: both wait out leases of their own on the member directly, not through the relay.
describe.concurrent("manual leases wait as long as the caller allows", () => {
  // Before: renewWhile waited ttl/3 before its first renewal even when less than that was left, so a
  // session alive when renewWhile started expired inside it.
  it("renewWhile renews at once when less than two thirds of the TTL is left", async () => {
    const session = await etcd.session({ ttl: 3, keepAlive: "manual" });
    await sleep(2_200);
    expect(session.alive).toBe(true);
    await session.renewWhile(() => sleep(1_800));
    expect(session.alive).toBe(true);
    expect(await leaseAlive(etcd, session.leaseId)).toBe(true);
    await session.close();
  });

  // Before: a manual withLock could not wait longer than its TTL: SESSION_EXPIRED at 3 s whatever `timeout` said.
  it("a manual withLock waits longer than its TTL within its timeout", async () => {
    const name = uniqueName("liveness");
    const holderSession = await etcd.session({ ttl: 30 });
    const holder = await holderSession.mutex(name).lock();
    const waiting = etcd.withLock(name, (lock) => lock.revision, { ttl: 3, keepAlive: "manual", timeout: 15_000 });
    await sleep(5_000);
    await holder.unlock();
    const revision = await within(5_000, "the manual waiter takes the lock", waiting);
    expect(revision).toBeGreaterThan(holder.revision);
    await holderSession.close();
  });
});

describe("streams never starve requests", () => {
  // Before: each waiter's watch held one of createNodeFetch()'s 16 pooled connections: with 20 waiters in one
  // process one acquired and the rest timed out, and the holder's unlock queued behind the watches.
  it("40 waiters in one process drain through createNodeFetch() at its defaults", async () => {
    const fetch = createNodeFetch();
    const shared = client({ timeout: 5_000, fetch });
    const name = uniqueName("liveness");
    try {
      const sessions = await Promise.all(Array.from({ length: 40 }, () => shared.session({ ttl: 30 })));
      let inside = 0;
      let acquired = 0;
      await within(
        30_000,
        "40 waiters drain",
        Promise.all(
          sessions.map(async (session) => {
            const lock = await session.mutex(name).lock({ timeout: 25_000 });
            inside++;
            expect(inside).toBe(1);
            acquired++;
            await sleep(5);
            inside--;
            await lock.unlock({ timeout: 2_000 });
          }),
        ),
      );
      expect(acquired).toBe(40);
      await Promise.all(sessions.map((session) => session.close()));
    } finally {
      await fetch.close();
    }
  });

  // Before: a request queued inside the fetch implementation ignored its signal and the transport did not
  // enforce its own deadline, so a call outlived its timeout (a 2 s unlock settled after 10 s).
  it("a call whose fetch never settles and ignores its signal ends at its own timeout", async () => {
    const stuck: Fetch = () => new Promise(() => {});
    const hung = client({ fetch: stuck });
    const started = performance.now();
    const error = await within(3_000, "a call on a stuck fetch", rejection(hung.get("k", { timeout: 500 })));
    expect(error.code).toBe("TIMEOUT");
    expect(performance.now() - started).toBeLessThan(1_500);
  });
});

describe("a session that lost its lease to an outage", () => {
  // Before: the lease lived on in etcd. A member that comes back (like a newly elected leader) extends every
  // lease by its TTL, so the lost session's lock kept blocking its line for a whole TTL after the outage.
  it("revokes the lease as soon as etcd answers again, so its lock is free at once", async () => {
    const member = await startEtcd();
    try {
      const etcd = client({ endpoints: [member.clientUrl], timeout: 2_000 });
      const session = await etcd.session({ ttl: 6 });
      const name = uniqueName("liveness");
      const lock = await session.mutex(name).lock();
      await member.kill();
      await until("the session gives its lease up", 10_000, () => !session.alive);
      expect(lock.held).toBe(false);
      await member.restart();
      const back = performance.now();
      const observer = client({ endpoints: [member.clientUrl], timeout: 2_000 });
      // etcd recovered the lease with a fresh TTL (6 s): only the revocation can remove the key sooner.
      await until(
        "the lost session's key is gone",
        5_000,
        async () => (await keysUnder(observer, name).catch(() => [name])).length === 0,
      );
      expect(performance.now() - back).toBeLessThan(4_000);
      expect(await rejection(observer.lease.timeToLive(session.leaseId))).toMatchObject({ code: "LEASE_NOT_FOUND" });
      expect(await session.close()).toBe(false);
    } finally {
      await member.stop();
    }
  });
});

describe("waiters of one client that share a line's watch, under resets and silent connections", () => {
  // The shared watch lets a waiter take the lock on its predecessor's delete alone when a waiter of its
  // client found that key first. Here its connection is reset and silenced again and again, waiters of the
  // same client give up in the middle of the line (a delete that must not let the one behind in), and a
  // waiter of another client takes turns in the same line: every acquisition must still be exclusive and
  // in line order, and every steady waiter must get through.
  it("hands the lock on exclusively and in order", async () => {
    const name = uniqueName("liveness");
    const shared = relayed({ timeout: 5_000 });
    const open = (count: number) => Promise.all(Array.from({ length: count }, () => shared.session({ ttl: 30 })));
    const steady = [...(await open(4)), await etcd.session({ ttl: 30 })];
    const quitters = await open(2);
    let holders = 0;
    let most = 0;
    let failed = 0;
    let gaveUp = 0;
    const order: number[] = [];
    const hold = async (lock: Lock) => {
      most = Math.max(most, ++holders);
      order.push(lock.revision);
      await sleep(2);
      holders--;
      // A release cut off by a reset goes on in the background; this session's next lock() waits for it.
      await lock.unlock({ timeout: 5_000 }).catch(() => {});
    };
    let running = true;
    const faults = (async () => {
      for (let i = 0; running; i++) {
        await sleep(250);
        if (i % 2 === 0) proxy.reset();
        else {
          proxy.silence({ drop: true });
          proxy.resume();
        }
      }
    })();
    const quitting = quitters.map(async (session, q) => {
      for (let i = 0; running; i++) {
        const lock = await session
          .mutex(name)
          .lock({ timeout: 20 + ((i * 7 + q * 13) % 40) })
          .catch(() => undefined);
        if (lock === undefined) gaveUp++;
        else await hold(lock);
      }
    });
    await Promise.all(
      steady.map(async (session) => {
        // 12 turns each, and more (bounded) until the quitters have given up in the middle of the line often
        // enough: a faster lock gets through the 12 before they do.
        for (let i = 0; i < 12 || (gaveUp <= 10 && i < 60); i++) {
          const lock = await session
            .mutex(name)
            .lock({ timeout: 20_000 })
            .catch(() => undefined);
          if (lock === undefined) failed++;
          else await hold(lock);
        }
      }),
    );
    running = false;
    await Promise.all([faults, ...quitting]);
    expect(most).toBe(1);
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(failed).toBe(0);
    expect(gaveUp).toBeGreaterThan(10);
    await Promise.all([...steady, ...quitters].map((session) => session.close().catch(() => false)));
  }, 60_000);
});
