// Whose key a join found (src/lock/line/join.ts, `KeyTaken`) and whose keys a cleanup deletes (lease/orphans.ts),
// on the in-memory gateway. A join that finds its key there already is its own only when an earlier send of it may
// have landed and the key has its value; anything else is another acquisition's (a sandbox restored from the same
// snapshot, drawing what this one drew), and the mutex takes a new key. A cleanup deletes a key only as its join
// made it: on its session's lease, with its join's value.
import { afterEach, describe, expect, it, vi } from "vitest";
import { rejection, sleep, until } from "../support/async.js";
import { sameDraws } from "../support/draws.js";
import { connectionReset } from "../support/gateway.js";
import { mockClient } from "../support/mock.js";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("a join that finds its key there", () => {
  it("at its first send, with its own value: another's (drawn alike), so it takes a new key", async () => {
    const { etcd, mock } = mockClient();
    const first = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const twin = await etcd.session({ leaseId: first.leaseId, keepAlive: "manual" });
    sameDraws(2);
    const held = await first.mutex("jobs").lock();
    // The same key and secret: only the join's sends can tell the twin it did not make the key.
    expect(await twin.mutex("jobs").tryLock()).toBeUndefined();
    expect(mock.keys("jobs/")).toEqual([held.key]);
    const waiting = twin.mutex("jobs").lock({ timeout: 2_000 });
    await until("the twin waits with a key of its own", 1_000, () => mock.keys("jobs/").length === 2);
    expect(mock.keys("jobs/").filter((k) => k !== held.key)).toHaveLength(1);
    await held.unlock();
    const next = await waiting;
    expect(next.key).not.toBe(held.key);
    await next.unlock();
    await first.close();
  });

  it("after a send whose answer was lost, with its value: its own, held at its first place", async () => {
    let lose = 1;
    const { etcd, mock } = mockClient(
      {},
      {
        through: async (input, init, forward) => {
          const response = await forward(input, init);
          if (lose > 0 && input.endsWith("/v3/kv/txn") && init.body.includes("request_put")) {
            lose--;
            throw connectionReset();
          }
          return response;
        },
      },
    );
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    expect(lose).toBe(0);
    expect(mock.keys("jobs/")).toEqual([lock.key]);
    expect((await etcd.get(lock.key))?.createRevision).toBe(lock.revision);
    await lock.unlock();
    await session.close();
  });

  it("a reused key found under another value: a new key, and the other's left as it was", async () => {
    const { etcd, mock } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const mutex = session.mutex("jobs");
    const first = await mutex.lock();
    await first.unlock();
    // Another sandbox of the same image made the key the mutex would reuse, with a secret of its own.
    await etcd.put(first.key, "another sandbox's secret", { lease: session.leaseId });
    expect((await rejection(mutex.lock({ timeout: 200 }))).code).toBe("TIMEOUT");
    expect(mock.keys("jobs/")).toEqual([first.key]);
    expect((await etcd.get(first.key))?.value).toBe("another sandbox's secret");
    await etcd.delete(first.key);
    const next = await mutex.lock();
    expect(next.held).toBe(true);
    await next.unlock();
    await session.close();
  });
});

describe("a failed acquisition's cleanup", () => {
  it("deletes its key only as its join made it: not one rewritten since, on its lease or another", async () => {
    const { etcd, mock } = mockClient();
    const holder = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const held = await holder.mutex("jobs").lock();
    const waiter = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const giveUp = new AbortController();
    const waiting = waiter.mutex("jobs").lock({ signal: giveUp.signal, timeout: 5_000 });
    await until("the waiter's key", 1_000, () => mock.keys("jobs/").length === 2);
    const key = mock.keys("jobs/").find((k) => k !== held.key)!;
    // Rewritten before the cleanup: keeping the waiter's lease, and on another lease.
    await etcd.put(key, "rewritten", { lease: waiter.leaseId });
    giveUp.abort();
    expect((await rejection(waiting)).code).toBe("ABORTED");
    await sleep(50);
    expect((await etcd.get(key))?.value).toBe("rewritten");
    await etcd.delete(key);
    await held.unlock();
    await Promise.all([holder.close(), waiter.close()]);
  });
});
