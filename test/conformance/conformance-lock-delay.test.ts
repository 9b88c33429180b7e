// Lock-delay after an unclean loss (issue 40), as Chubby's: with `lockDelay`, a waiter whose predecessor left
// uncleanly (its lease ended, or an operator revoked it) holds only `lockDelay` later, while a stale holder may
// still be writing to a store that cannot check a fence; after a clean release it holds at once, and with no
// lockDelay nothing is asked. For a mutex, `withLock`, an election's campaign, a read-write lock and a
// semaphore, and as a client default. The figures (delays after clean and unclean handoffs on real etcd) come
// from `npm run bench`.
// Tests run side by side (describe.concurrent) to overlap their delays: each has its own clients and names.
import { describe, expect, it } from "vitest";
import type { EtcdEvent } from "../../src/index.js";
import { sleep, stillPending, until, within } from "../support/async.js";
import { freshNames, keysUnder, recordingFetch, useSessions } from "../support/etcd.js";
import { useBackend } from "./backend.js";
import { REQUESTS } from "../../src/lock/line/requests.js";

const { backend, etcd } = useBackend();
const newSession = useSessions(etcd, { ttl: 60 });
const fresh = freshNames("delay");

/** Long enough to tell "delayed" from "at once" whatever the machine's load; short enough for a test. */
const DELAY_MS = 1_500;

/** A holder, and a waiter behind it in another session with `lockDelay`, and what the waiter's client told. */
async function holderAndWaiter(lockDelay: number | undefined, clientDelay?: number, wait?: "watch" | "poll") {
  const name = fresh();
  const holderSession = await newSession();
  const lock = await holderSession.mutex(name).lock();
  const events: EtcdEvent[] = [];
  const fetch = recordingFetch(backend.fetch);
  const client = backend.client({ fetch, onEvent: (e) => events.push(e), lockDelay: clientDelay });
  const waiterSession = await newSession({}, client);
  const waiting = waiterSession.mutex(name).lock({ lockDelay, timeout: 20_000, wait });
  await until("the waiter is in line", 5_000, async () => (await keysUnder(etcd, name)).length === 2);
  return { name, lock, holderSession, waiting, events, fetch };
}

describe.concurrent("lockDelay", () => {
  it("after a clean release: held at once, and nothing more is asked", async () => {
    const { lock, waiting, events, fetch } = await holderAndWaiter(DELAY_MS);
    const before = fetch.calls.length;
    await lock.unlock();
    const next = await within(DELAY_MS / 2, "the waiter's lock, at once", waiting);
    // Clean: two reads told it (the lease lives, no revocation), no delay.
    expect(events.some((e) => e.type === "lock.delayed")).toBe(false);
    expect(fetch.calls.slice(before).map((c) => c.path)).toEqual(
      expect.arrayContaining(["/v3/lease/timetolive", "/v3/kv/range"]),
    );
    await next.unlock();
  });

  it.for(["its lease", "the operators' record"] as const)(
    "after a clean release, when %s cannot be read: held lockDelay later, told why",
    async (unread) => {
      const name = fresh();
      const lock = await (await newSession()).mutex(name).lock();
      // The waiter's client cannot reach one of the two things it reads (a connection refused each time): how the
      // holder left is unknown, and unknown is delayed as unclean is.
      const fetch: typeof backend.fetch = (input, init) => {
        const path = new URL(input).pathname;
        const key = path === "/v3/kv/range" ? atob((JSON.parse(init.body as string) as { key: string }).key) : "";
        const refused = unread === "its lease" ? path === "/v3/lease/timetolive" : key.includes(REQUESTS);
        if (refused) throw new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED") });
        return backend.fetch(input, init);
      };
      const events: EtcdEvent[] = [];
      const client = backend.client({ fetch, onEvent: (e) => events.push(e), retries: 0 });
      const waiting = (await newSession({}, client)).mutex(name).lock({ lockDelay: DELAY_MS, timeout: 20_000 });
      await until("the waiter is in line", 5_000, async () => (await keysUnder(etcd, name)).length === 2);
      await lock.unlock();
      expect(await stillPending(waiting, DELAY_MS / 2)).toBe(true);
      const next = await within(DELAY_MS * 3, "the waiter's lock, delayed", waiting);
      const delayed = events.find((e) => e.type === "lock.delayed");
      expect((delayed as { why: string } | undefined)?.why).toBe("how it left could not be read");
      await next.unlock();
    },
  );

  it("without lockDelay, an unclean loss asks nothing and hands over at once", async () => {
    const { lock, holderSession, waiting, events, fetch } = await holderAndWaiter(undefined);
    const before = fetch.calls.length;
    await etcd.lease.revoke(holderSession.leaseId);
    const next = await within(DELAY_MS / 2, "the waiter's lock, at once", waiting);
    expect(fetch.calls.slice(before).filter((c) => c.path === "/v3/lease/timetolive")).toEqual([]);
    expect(events.some((e) => e.type === "lock.delayed")).toBe(false);
    expect(next.revision).toBeGreaterThan(lock.revision);
    await next.unlock();
  });

  // A watching waiter right behind the holder learns from the delete itself; a polling one from a read.
  it.for(["watch", "poll"] as const)(
    "after the holder's lease ended (wait: %s): held lockDelay later, told",
    async (wait) => {
      const { name, holderSession, waiting, events } = await holderAndWaiter(DELAY_MS, undefined, wait);
      const start = performance.now();
      await etcd.lease.revoke(holderSession.leaseId);
      // Delayed: its key is first in line meanwhile, so nobody else holds either.
      expect(await stillPending(waiting, DELAY_MS / 2)).toBe(true);
      expect((await etcd.inspectLock(name)).waiters).toEqual([]);
      const next = await within(DELAY_MS * 3, "the waiter's lock, delayed", waiting);
      expect(performance.now() - start).toBeGreaterThanOrEqual(DELAY_MS);
      const delayed = events.find((e) => e.type === "lock.delayed");
      expect(delayed).toMatchObject({ kind: "lock", name, delayMs: DELAY_MS });
      expect((delayed as { why: string }).why).toMatch(/ended \(it expired or was revoked\)/);
      await next.unlock();
    },
  );

  it("after a revocation by an operator, from the client's default", async () => {
    const { name, waiting, events } = await holderAndWaiter(undefined, DELAY_MS);
    const start = performance.now();
    await etcd.revokeLock(name, { reason: "drill" });
    const next = await within(DELAY_MS * 3, "the waiter's lock, delayed", waiting);
    expect(performance.now() - start).toBeGreaterThanOrEqual(DELAY_MS);
    expect(events.find((e) => e.type === "lock.delayed")).toMatchObject({ why: "it was revoked" });
    await next.unlock();
  });

  it("a wait given up during the delay throws ABORTED and leaves no key", async () => {
    const name = fresh();
    const holder = await newSession();
    await holder.mutex(name).lock();
    const waiter = await newSession();
    const abort = new AbortController();
    const waiting = waiter.mutex(name).lock({ lockDelay: 30_000, signal: abort.signal, timeout: 60_000 });
    await until("in line", 5_000, async () => (await keysUnder(etcd, name)).length === 2);
    await etcd.lease.revoke(holder.leaseId);
    await sleep(500);
    abort.abort();
    await expect(waiting).rejects.toMatchObject({ code: "ABORTED" });
    await until("no key is left", 5_000, async () => (await keysUnder(etcd, name)).length === 0);
  });

  it("a wait given up while it reads how its predecessor left ends at once: the reads take its signal", async () => {
    const name = fresh();
    const holder = await newSession();
    await holder.mutex(name).lock();
    // Once the holder is revoked, the waiter's reads of how it left go unanswered, as a member gone silent.
    let silent = false;
    const unanswered = new Set<string>();
    const fetch: typeof backend.fetch = (input, init) => {
      const path = new URL(input).pathname;
      if (!silent || (path !== "/v3/lease/timetolive" && path !== "/v3/kv/range")) return backend.fetch(input, init);
      unanswered.add(path);
      return new Promise((_, reject) => init.signal?.addEventListener("abort", () => reject(init.signal!.reason)));
    };
    const waiter = await newSession({}, backend.client({ fetch, timeout: 30_000 }));
    const abort = new AbortController();
    const waiting = waiter.mutex(name).lock({ lockDelay: 30_000, signal: abort.signal, timeout: 60_000 });
    await until("in line", 5_000, async () => (await keysUnder(etcd, name)).length === 2);
    silent = true;
    await etcd.lease.revoke(holder.leaseId);
    await until("both reads are on their way", 5_000, () => unanswered.size === 2);
    abort.abort();
    // Within the failed acquisition's grace for its cleanup (500 ms), not the client's 30 s timeout.
    await expect(within(2_000, "the given-up wait", waiting)).rejects.toMatchObject({ code: "ABORTED" });
    silent = false;
    await until("no key is left", 5_000, async () => (await keysUnder(etcd, name)).length === 0);
  });

  it("applies to an election's campaign and to a write lock", async () => {
    const name = fresh();
    const leaderSession = await newSession();
    await leaderSession.election(name).campaign("one");
    const campaigning = (await newSession()).election(name);
    const elected = campaigning.campaign("two", { lockDelay: DELAY_MS });
    await until("in line", 5_000, async () => (await keysUnder(etcd, name)).length === 2);
    const start = performance.now();
    await etcd.lease.revoke(leaderSession.leaseId);
    await within(DELAY_MS * 3, "the next leader", elected);
    expect(performance.now() - start).toBeGreaterThanOrEqual(DELAY_MS);
    await campaigning.resign();

    const rwName = fresh();
    const readerSession = await newSession();
    await readerSession.rwlock(rwName).readLock();
    const writing = (await newSession()).rwlock(rwName).writeLock({ lockDelay: DELAY_MS, timeout: 20_000 });
    await until("in line", 5_000, async () => (await keysUnder(etcd, rwName)).length === 2);
    const rwStart = performance.now();
    await etcd.lease.revoke(readerSession.leaseId);
    const writer = await within(DELAY_MS * 3, "the writer", writing);
    expect(performance.now() - rwStart).toBeGreaterThanOrEqual(DELAY_MS);
    await writer.unlock();
  });

  it("withLock takes it too: clean handoffs between two callers are never delayed", async () => {
    const name = fresh();
    const events: EtcdEvent[] = [];
    const a = backend.client({ onEvent: (e) => events.push(e), lockDelay: 60_000 });
    const b = backend.client({ onEvent: (e) => events.push(e), lockDelay: 60_000 });
    const rounds = backend.name === "mock" ? 1_000 : 200;
    let inside = 0;
    const run = (client: typeof a) =>
      client.withLock(name, async () => {
        inside++;
        expect(inside).toBe(1);
        await Promise.resolve();
        inside--;
      });
    for (let i = 0; i < rounds / 2; i++) await Promise.all([run(a), run(b)]);
    expect(events.filter((e) => e.type === "lock.delayed")).toEqual([]);
    expect(events.filter((e) => e.type === "lock.acquired")).toHaveLength(rounds);
    await Promise.all([a.close(), b.close()]);
  });

  it("applies to a semaphore: a permit left uncleanly is taken lockDelay later, a released one at once", async () => {
    const name = fresh();
    const holderSession = await newSession();
    await holderSession.semaphore(name, { permits: 1 }).acquire();
    const waiting = (await newSession()).semaphore(name, { permits: 1 }).acquire({ lockDelay: DELAY_MS });
    await until("in line", 5_000, async () => (await keysUnder(etcd, name)).length === 2);
    const start = performance.now();
    await etcd.lease.revoke(holderSession.leaseId);
    expect(await stillPending(waiting, DELAY_MS / 2)).toBe(true);
    const permit = await within(DELAY_MS * 3, "the waiter's permit, delayed", waiting);
    expect(performance.now() - start).toBeGreaterThanOrEqual(DELAY_MS);

    const next = (await newSession()).semaphore(name, { permits: 1 }).acquire({ lockDelay: DELAY_MS });
    await until("in line", 5_000, async () => (await keysUnder(etcd, name)).length === 2);
    await permit.release();
    await (await within(DELAY_MS / 2, "the next permit, at once", next)).release();
  });

  it("refuses a bad lockDelay", async () => {
    const session = await newSession();
    for (const bad of [-1, 60_001, Number.NaN, "5" as never]) {
      await expect(session.mutex(fresh()).lock({ lockDelay: bad })).rejects.toMatchObject({
        code: "INVALID_ARGUMENT",
      });
      await expect(session.semaphore(fresh(), { permits: 2 }).acquire({ lockDelay: bad })).rejects.toMatchObject({
        code: "INVALID_ARGUMENT",
      });
    }
    expect(() => backend.client({ lockDelay: 61_000 })).toThrow(/lockDelay must be a number of milliseconds/);
  });
});
