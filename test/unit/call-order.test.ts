// An acquisition reads in call order: from the recipe down to the request, no call goes back into a file of
// src/lock/ that the stack had already left (a callback handed into a frame that calls it back, as the old
// mutex → attempt → mutex → attempt path did). Checked on the mock at every request a lock sends: the stack at
// that moment (innermost first) must show each src/lock file in one run of frames.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Etcd, EtcdClient, LeaseClient, PreparedTxn, TxnBuilder } from "../../src/index.js";
import { mockClient } from "../support/mock.js";

const LOCK_FILE = /\/src\/lock\/([\w/-]+\.ts)/;

/** The stacks of every request the lock layer sent, each as the src/lock files it shows, innermost first. */
let stacks: string[][] = [];
const restore: Array<() => void> = [];

/** Records the stack at each call of `name` on `prototype` (a method every lock request goes through). */
function record(prototype: object, name: string): void {
  const original = Reflect.get(prototype, name) as (...args: unknown[]) => unknown;
  Reflect.set(prototype, name, function (this: unknown, ...args: unknown[]) {
    const files = (new Error().stack ?? "").split("\n").flatMap((line) => line.match(LOCK_FILE)?.[1] ?? []);
    if (files.length > 0) stacks.push(files);
    return original.apply(this, args);
  });
  restore.push(() => Reflect.set(prototype, name, original));
}

/** Files that appear in two separate runs of a stack: places where a call went back into a file it had left. */
function reentered(files: string[]): string[] {
  const runs = files.filter((file, i) => file !== files[i - 1]);
  return runs.filter((file, i) => runs.indexOf(file) !== i);
}

let limit: number;
beforeEach(() => {
  limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 200;
  stacks = [];
  record(PreparedTxn.prototype, "commit");
  record(PreparedTxn.prototype, "commitWithOthers");
  record(TxnBuilder.prototype, "commit");
  record(EtcdClient.prototype, "range");
  record(EtcdClient.prototype, "watch");
  for (const name of ["grant", "keepAliveOnce", "revoke", "timeToLive"]) record(LeaseClient.prototype, name);
});

afterEach(() => {
  for (const undo of restore.splice(0)) undo();
  Error.stackTraceLimit = limit;
});

const onMock = (): Etcd => mockClient().etcd;

/** Every recorded stack, checked; returns them for the caller's own checks. */
function checkedStacks(): string[][] {
  expect(stacks.length).toBeGreaterThan(0);
  for (const files of stacks) expect(reentered(files), files.join(" ← ")).toEqual([]);
  return stacks;
}

describe("a lock's path, in call order", () => {
  it("the check finds a file the stack went back into", () => {
    expect(reentered(["join.ts", "attempt.ts", "mutex.ts", "attempt.ts"])).toEqual(["attempt.ts"]);
    expect(reentered(["join.ts", "join.ts", "acquisition.ts", "mutex.ts"])).toEqual([]);
  });

  it("uncontended: lock() and unlock() of a mutex", async () => {
    const etcd = onMock();
    const session = await etcd.session({ keepAlive: "manual" });
    const lock = await session.mutex("job").lock();
    await lock.unlock();
    const seen = checkedStacks();
    // Not vacuous: the join's stack runs from the recipe through the acquisition to the line's join.
    expect(seen.some((files) => files.includes("mutex/mutex.ts") && files.includes("acquire/acquisition.ts"))).toBe(
      true,
    );
    expect(seen.some((files) => files.includes("line/join.ts"))).toBe(true);
    await session.close();
  });

  it("contended: a waiter joins, watches its predecessor, and takes the lock when it goes", async () => {
    const etcd = onMock();
    const holder = await (await etcd.session({ keepAlive: "manual" })).mutex("job").lock();
    const waiterSession = await etcd.session({ keepAlive: "manual" });
    const waiting = waiterSession.mutex("job").lock({ timeout: 5_000 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await holder.unlock();
    const lock = await waiting;
    await lock.unlock();
    const seen = checkedStacks();
    expect(seen.some((files) => files.includes("line/wait.ts"))).toBe(true);
    await Promise.all([holder.session.close(), waiterSession.close()]);
  });

  it("every other recipe: a permit, a read and a write lock, several locks, leadership", async () => {
    const etcd = onMock();
    const session = await etcd.session({ keepAlive: "manual" });
    await (await session.semaphore("pool", { permits: 2 }).acquire()).release();
    await (await session.rwlock("doc").readLock()).unlock();
    await (await session.rwlock("doc").writeLock()).unlock();
    await (await session.lockAll(["a", "b"])).unlock();
    const election = session.election("leader");
    await election.campaign("me");
    await election.resign();
    const seen = checkedStacks();
    for (const recipe of ["semaphore/", "rwlock/", "lock-all/", "election/"]) {
      expect(
        seen.some((files) => files.some((file) => file.startsWith(recipe))),
        recipe,
      ).toBe(true);
    }
    await session.close();
  });
});
