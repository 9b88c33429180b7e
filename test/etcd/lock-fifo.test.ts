// Fairness: waiters acquire in the order they joined the line (create-revision order), whatever the
// order their sessions were created in, in watch mode and in poll mode.
import { describe, expect, it } from "vitest";
import type { Lock, Session, WaitMode } from "../../src/index.js";
import { sleep, until } from "../support/async.js";
import { client, uniqueName, useSessions } from "../support/etcd.js";

const etcd = client();
const newSession = useSessions(etcd, { ttl: 20 });

describe.each<WaitMode>(["watch", "poll"])("FIFO (%s)", (wait) => {
  it("6 waiters that joined one after another acquire in join order", async () => {
    const WAITERS = 6;
    const name = uniqueName();
    const holder = await (await newSession()).mutex(name).lock();
    // Sessions created in reverse of the join order, so lease IDs (and key names) sort the other way:
    // the order must come from create revisions, not from key names.
    const waiterSessions: Session[] = [];
    for (let i = 0; i < WAITERS; i++) waiterSessions.unshift(await newSession());

    const acquired: number[] = [];
    const locks: Array<Promise<Lock>> = [];
    for (let i = 0; i < WAITERS; i++) {
      const pending = waiterSessions[i]!.mutex(name).lock({ wait, pollInterval: 100, timeout: 30_000 });
      locks.push(
        pending.then(async (lock) => {
          acquired.push(i);
          // Hold briefly so a wrongly ordered waiter would have time to jump in.
          await sleep(30);
          await lock.unlock();
          return lock;
        }),
      );
      // The waiter has joined once its key is in the line; only then does the next one start.
      await until(`waiter ${i} joined`, 5_000, async () => (await etcd.inspectLock(name)).waiters.length === i + 1);
    }

    const info = await etcd.inspectLock(name);
    expect(info.holder?.key).toBe(holder.key);
    expect(info.waiters).toHaveLength(WAITERS);
    expect(acquired).toEqual([]);

    await holder.unlock();
    const done = await Promise.all(locks);

    expect(acquired).toEqual(Array.from({ length: WAITERS }, (_, i) => i));
    const revisions = done.map((l) => l.revision);
    for (let i = 1; i < revisions.length; i++) expect(revisions[i]!).toBeGreaterThan(revisions[i - 1]!);
    expect(revisions[0]!).toBeGreaterThan(holder.revision);
    expect((await etcd.inspectLock(name)).holder).toBeUndefined();
  });
});

it("a waiter that leaves the middle of the line does not reorder the rest", async () => {
  const name = uniqueName();
  const holder = await (await newSession()).mutex(name).lock();
  const [a, b, c] = [await newSession(), await newSession(), await newSession()];
  const order: string[] = [];
  const take = (label: string, s: Session, signal?: AbortSignal) =>
    s
      .mutex(name)
      .lock({ signal })
      .then(async (lock) => {
        order.push(label);
        await lock.unlock();
      });
  const pa = take("a", a);
  await until("a joined", 5_000, async () => (await etcd.inspectLock(name)).waiters.length === 1);
  const leave = new AbortController();
  const pb = take("b", b, leave.signal);
  await until("b joined", 5_000, async () => (await etcd.inspectLock(name)).waiters.length === 2);
  const pc = take("c", c);
  await until("c joined", 5_000, async () => (await etcd.inspectLock(name)).waiters.length === 3);

  leave.abort();
  await expect(pb).rejects.toMatchObject({ code: "ABORTED" });
  expect((await etcd.inspectLock(name)).waiters).toHaveLength(2);
  // c now follows a (its predecessor left); nothing may be acquired while the holder holds.
  await sleep(200);
  expect(order).toEqual([]);

  await holder.unlock();
  await Promise.all([pa, pc]);
  expect(order).toEqual(["a", "c"]);
});
