// What a holding's `held` says has a bound whatever its connection does (issue 38): a holding of an auto session
// older than a second says held false within 2 s of another client deleting its key, when the connection its
// follow stream runs on goes half-open (a NAT or a proxy dropped the flow: open, silent, for good) and when every
// connection is reset. Every holding kind: a lock, a permit, a read and a write lock, lockAll, leadership. On
// 4e52409 a half-open follow stream was trusted until the server's own end of it (30 s) and a grace: 29 s.
import { afterAll, describe, expect, it } from "vitest";
import type { Etcd, Session } from "../../src/index.js";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import { sleep, until } from "../support/async.js";
import { client, sharedEndpoint, uniqueName } from "../support/etcd.js";

const BOUND_MS = 2_000;
const etcd = client();
const proxies: FaultProxy[] = [];
const sessions: Session[] = [];

afterAll(async () => {
  await Promise.all(sessions.map((s) => s.close().catch(() => {})));
  await Promise.all(proxies.map((proxy) => proxy.close()));
});

/**
 * A relay of the test's own in front of the member, and a client that reaches etcd only through it: a test's
 * faults touch no other test's connections, so the tests run side by side.
 */
async function relayed(): Promise<{ client: Etcd; proxy: FaultProxy }> {
  const proxy = await startFaultProxy(sharedEndpoint());
  proxies.push(proxy);
  return { client: client({ endpoints: [proxy.url], timeout: 5_000 }), proxy };
}

interface Holding {
  key: string;
  held(): boolean;
}

/** Each kind of holding, taken in an auto session of a client behind the relay. */
const kinds: Array<[string, (session: Session, name: string) => Promise<Holding>]> = [
  [
    "a lock",
    async (s, name) => {
      const lock = await s.mutex(name).lock();
      return { key: lock.key, held: () => lock.held };
    },
  ],
  [
    "a permit",
    async (s, name) => {
      const permit = await s.semaphore(name, { permits: 2 }).acquire();
      return { key: permit.key, held: () => permit.held };
    },
  ],
  [
    "a read lock",
    async (s, name) => {
      const lock = await s.rwlock(name).readLock();
      return { key: lock.key, held: () => lock.held };
    },
  ],
  [
    "a write lock",
    async (s, name) => {
      const lock = await s.rwlock(name).writeLock();
      return { key: lock.key, held: () => lock.held };
    },
  ],
  [
    "lockAll's locks",
    async (s, name) => {
      const locks = await s.lockAll([name, `${name}-b`]);
      return { key: locks.keys[0]!, held: () => locks.held };
    },
  ],
  [
    "leadership",
    async (s, name) => {
      const election = s.election(name);
      await election.campaign("me");
      return { key: election.key!, held: () => election.isLeader };
    },
  ],
];

/** A holding of `kind` that has followed its key for a while through a relay of its own, and that relay. */
async function lasting(
  take: (session: Session, name: string) => Promise<Holding>,
): Promise<{ holding: Holding; proxy: FaultProxy }> {
  const { client: through, proxy } = await relayed();
  const session = await through.session({ ttl: 30, keepAlive: "auto" });
  sessions.push(session);
  const holding = await take(session, uniqueName("bounds"));
  await sleep(1_500);
  expect(holding.held()).toBe(true);
  return { holding, proxy };
}

/** Deletes the holding's key from outside and measures how long `held` takes to turn false. */
async function learns(holding: Holding): Promise<number> {
  await etcd.delete(holding.key);
  const deleted = performance.now();
  await until("held turns false", 10_000, () => !holding.held());
  return performance.now() - deleted;
}

describe.concurrent("a holding whose follow connection goes half-open", () => {
  it.each(kinds)("%s learns that its key was deleted within 2 s", async (_, take) => {
    const { holding, proxy } = await lasting(take);
    // The next stream of its line's watch (each lives a second) reaches etcd, and its answer never comes back:
    // that connection stays open and silent for good (a NAT, a proxy restarted behind it). Others work.
    const cut = proxy.dropNextAnswer({ path: "/v3/watch", then: "silence" });
    expect(await cut).toBeDefined();
    await sleep(1_200);
    expect(await learns(holding)).toBeLessThan(BOUND_MS);
  });

  it("a lock learns it within 2 s when every open connection of its client goes half-open at once", async () => {
    const { holding, proxy } = await lasting(kinds[0]![1]);
    // A NAT forgets every flow: the client's pooled connections are dead too, and a request on one costs it an
    // attempt (the client's timeout here is 5 s: an attempt is 1.7 s).
    proxy.silence({ drop: true });
    proxy.resume();
    expect(await learns(holding)).toBeLessThan(BOUND_MS + 2_000);
  });
});

describe.concurrent("a holding whose connections are reset", () => {
  it.each(kinds)("%s learns that its key was deleted within 2 s", async (_, take) => {
    const { holding, proxy } = await lasting(take);
    proxy.reset();
    expect(await learns(holding)).toBeLessThan(BOUND_MS);
  });
});
