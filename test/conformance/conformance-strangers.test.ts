// Strangers in a line (issue 37, finding 4): a key under a lock's name that no contender of its kind can have
// made, or one of the right form bound to no lease (a put over a holder's key after the holder died, a tool's
// stray key), never leaves by itself. Every recipe that meets one, at its join or at any read of its line,
// refuses with LOCK_NAME_CONFLICT at once, on every version: never waiting out its timeout (or, for a campaign,
// forever) behind it, never counting it as a holder. etcd 3.7 leaves `lease` out of `keys_only` answers
// (etcd-io/etcd#22209), so no recipe judges leases on such an answer alone. Each case failed on 4e52409 on 3.7
// (and the reader's, the semaphore's and the resent join's on every version).
import { describe, expect, it } from "vitest";
import type { Session } from "../../src/index.js";
import { rejection, until } from "../support/async.js";
import { freshNames, keysUnder, leaseHex, useSessions } from "../support/etcd.js";
import { answerLosingFetch } from "../support/outage.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();
const newSession = useSessions(etcd, { ttl: 30, keepAlive: "manual" });
const fresh = freshNames("stranger");

/** Well past "at once" (a join and a read), well below the waits' timeouts. */
const AT_ONCE_MS = 2_000;
const WAIT = { timeout: 6_000 };

const HEX16 = "0123456789abcdef";
/** A key of each contender form under `name`, as a contender of a lease `hex` would make it. */
const form = {
  mutex: (name: string, hex = "7a1") => `${name}/${hex}_${HEX16}`,
  permit: (name: string, hex = "7a1") => `${name}/${hex}-${HEX16}`,
  writer: (name: string, hex = "7a1") => `${name}/write/${hex}-${HEX16}`,
  reader: (name: string, hex = "7a1") => `${name}/read/${hex}-${HEX16}`,
};

/** Runs `attempt` and asserts it refused with LOCK_NAME_CONFLICT at once, leaving none of its own keys. */
async function refusedAtOnce(name: string, attempt: () => Promise<unknown>, strangers: string[]): Promise<void> {
  const started = performance.now();
  const error = await rejection(attempt());
  expect(error.code).toBe("LOCK_NAME_CONFLICT");
  expect(performance.now() - started).toBeLessThan(AT_ONCE_MS);
  expect((await keysUnder(etcd, name)).sort()).toEqual([...strangers].sort());
}

/** The recipes that wait in a line each key of which waits for the next older one, as callers take them. */
const takers: Array<[string, (s: Session, name: string) => Promise<unknown>]> = [
  ["lock", (s, name) => s.mutex(name).lock(WAIT)],
  ["campaign", (s, name) => s.election(name).campaign("me", WAIT)],
  ["lockAll", (s, name) => s.lockAll([name, `${name}-other`], WAIT)],
];

describe("a lease-less key of the mutex's form at the head of the line", () => {
  it.each(takers)("%s refuses it at once", async (_, take) => {
    const name = fresh();
    const stranger = form.mutex(name);
    await etcd.put(stranger, "left by a put");
    const session = await newSession();
    await refusedAtOnce(name, () => take(session, name), [stranger]);
    expect(await keysUnder(etcd, `${name}-other`)).toEqual([]);
  });

  it("behind a holder that leases its key: a waiter refuses it as its predecessor, at once", async () => {
    const name = fresh();
    const holder = await (await newSession()).mutex(name).lock();
    const stranger = form.mutex(name, "7b2");
    await etcd.put(stranger, "left by a put");
    const session = await newSession();
    await refusedAtOnce(name, () => session.mutex(name).lock(WAIT), [holder.key, stranger]);
    await holder.unlock();
  });

  it("a try refuses it rather than calling the line busy, at the head or behind a holder", async () => {
    const atHead = fresh();
    const first = form.mutex(atHead);
    await etcd.put(first, "left by a put");
    const session = await newSession();
    await refusedAtOnce(atHead, () => session.mutex(atHead).tryLock(), [first]);
    const behind = fresh();
    const holder = await (await newSession()).mutex(behind).lock();
    const stranger = form.mutex(behind, "7b2");
    await etcd.put(stranger, "left by a put");
    await refusedAtOnce(behind, () => session.mutex(behind).tryLock(), [holder.key, stranger]);
    await holder.unlock();
  });

  it("a resent join (its first answer lost) checks the line as a first join does", async () => {
    const name = fresh();
    const stranger = form.mutex(name);
    await etcd.put(stranger, "left by a put");
    const fetch = answerLosingFetch(
      backend.fetch,
      (path, body) => path === "/v3/kv/txn" && body.includes("request_put"),
    );
    const client = backend.client({ fetch });
    const session = await newSession({}, client);
    await refusedAtOnce(name, () => session.mutex(name).lock(WAIT), [stranger]);
    expect(fetch.lost).toBe(1);
  });

  it("a resent full join behind a longer line refuses a stranger at its head, which reads never reach", async () => {
    const name = fresh();
    const stranger = form.mutex(name);
    await etcd.put(stranger, "left by a put");
    // Two contenders behind it that never leave: a waiter reads only the three newest keys up to its own.
    const lease = await etcd.lease.grant(30);
    const behind = [form.mutex(name, "7b2"), form.mutex(name, "7c3")];
    for (const key of behind) await etcd.put(key, "", { lease: lease.id });
    // The full join (a nested transaction) lands, its answer is lost; the resend finds the key its own.
    const fetch = answerLosingFetch(
      backend.fetch,
      (path, body) => path === "/v3/kv/txn" && body.includes("request_txn"),
    );
    const session = await newSession({}, backend.client({ fetch }));
    await refusedAtOnce(name, () => session.mutex(name).lock(WAIT), [stranger, ...behind]);
    expect(fetch.lost).toBe(1);
    await etcd.lease.revoke(lease.id);
  });
});

describe("a holder's key cut loose by a put while waiters wait", () => {
  it("the waiter that reads it after its predecessor gave up refuses it at once", async () => {
    const name = fresh();
    const holder = await (await newSession()).mutex(name).lock();
    const giveUp = new AbortController();
    const ahead = (await newSession()).mutex(name).lock({ signal: giveUp.signal, timeout: 10_000 });
    await until("the waiter ahead is in line", 5_000, async () => (await keysUnder(etcd, name)).length === 2);
    const session = await newSession();
    const waiting = session.mutex(name).lock(WAIT);
    await until("the waiter is in line", 5_000, async () => (await keysUnder(etcd, name)).length === 3);
    // A plain put over the holder's key: no lease ends it now (its holder's session is manual: it follows nothing).
    await etcd.put(holder.key, "left by a put");
    giveUp.abort();
    expect((await rejection(ahead)).code).toBe("ABORTED");
    await refusedAtOnce(name, () => waiting, [holder.key]);
  });
});

describe("a key of another form in the line", () => {
  it.each([
    ["data", (name: string) => `${name}/data`],
    ["a permit", (name: string) => form.permit(name)],
    ["a writer", (name: string) => form.writer(name)],
  ])("%s, even bound to a lease, is refused at once by a mutex, a campaign and lockAll", async (_, key) => {
    const lease = await etcd.lease.grant(30);
    for (const [, take] of takers) {
      const name = fresh();
      const stranger = key(name);
      await etcd.put(stranger, "x", { lease: lease.id });
      await refusedAtOnce(name, async () => take(await newSession(), name), [stranger]);
    }
    await etcd.lease.revoke(lease.id);
  });
});

describe("a read-write lock", () => {
  it("a reader refuses a lease-less writer-form key ahead of it, at once", async () => {
    const name = fresh();
    const stranger = form.writer(name);
    await etcd.put(stranger, "");
    await refusedAtOnce(name, async () => (await newSession()).rwlock(name).readLock(WAIT), [stranger]);
  });

  it("a writer refuses a lease-less reader-form key ahead of it, at once", async () => {
    const name = fresh();
    const stranger = form.reader(name);
    await etcd.put(stranger, "");
    await refusedAtOnce(name, async () => (await newSession()).rwlock(name).writeLock(WAIT), [stranger]);
  });

  it("a reader behind a writer that holds: refuses a lease-less writer-form key between them", async () => {
    const name = fresh();
    const writer = await (await newSession()).rwlock(name).writeLock();
    const stranger = form.writer(name, "7b2");
    await etcd.put(stranger, "");
    await refusedAtOnce(name, async () => (await newSession()).rwlock(name).readLock(WAIT), [writer.key, stranger]);
    await writer.unlock();
  });
});

describe("a semaphore", () => {
  it("refuses a lease-less permit at the head: never counts it as a holder", async () => {
    const name = fresh();
    const stranger = form.permit(name);
    await etcd.put(stranger, "2");
    await refusedAtOnce(name, async () => (await newSession()).semaphore(name, { permits: 2 }).acquire(WAIT), [
      stranger,
    ]);
  });

  it("refuses a lease-less permit behind a holder, which would take a permit for good", async () => {
    const name = fresh();
    const holder = await (await newSession()).semaphore(name, { permits: 2 }).acquire();
    const stranger = form.permit(name, "7b2");
    await etcd.put(stranger, "2");
    const session = await newSession();
    await refusedAtOnce(name, () => session.semaphore(name, { permits: 2 }).acquire(WAIT), [holder.key, stranger]);
    await holder.release();
  });

  it("refuses data and another recipe's key anywhere ahead of it", async () => {
    const lease = await etcd.lease.grant(30);
    for (const key of [(n: string) => `${n}/data`, (n: string) => form.mutex(n), (n: string) => form.writer(n)]) {
      const name = fresh();
      const holder = await (await newSession()).semaphore(name, { permits: 3 }).acquire();
      const stranger = key(name);
      await etcd.put(stranger, "3", { lease: lease.id });
      const session = await newSession();
      await refusedAtOnce(name, () => session.semaphore(name, { permits: 3 }).acquire(WAIT), [holder.key, stranger]);
      await holder.release();
    }
    await etcd.lease.revoke(lease.id);
  });
});

describe("a key of the right form bound to a live lease", () => {
  it("is a contender like any other: waited for, and the wait ends when its lease ends", async () => {
    const name = fresh();
    const lease = await etcd.lease.grant(30);
    const other = form.mutex(name, leaseHex(lease.id));
    await etcd.put(other, "a Go client, say", { lease: lease.id });
    const session = await newSession();
    const waiting = session.mutex(name).lock(WAIT);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await etcd.lease.revoke(lease.id);
    const lock = await waiting;
    expect(lock.held).toBe(true);
    await lock.unlock();
    expect(await keysUnder(etcd, name)).toEqual([]);
  });
});
