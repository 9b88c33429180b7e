// Keys an acquisition leaves behind only through faults: a join that lands late, after the acquisition is
// over; a failed acquisition whose cleanup meets an outage. Neither may block the line for the lease's life.
import { getEventListeners } from "node:events";
import { describe, expect, it, vi } from "vitest";
import type { LockOptions } from "../../src/index.js";
import { LATE_JOIN_WINDOW } from "../../src/lock/lease/orphans.js";
import { rejection, sleep, until } from "../support/async.js";
import { connectionReset } from "../support/gateway.js";
import { createMockEtcd } from "../../src/testing/index.js";
import { mockClient, neverAnswered, type Through } from "../support/mock.js";
import { answerLosingFetch } from "../support/outage.js";

/** Whether a request is a join: a transaction that puts (a contender's key). */
const isJoin = (path: string, body: string) => path.endsWith("/v3/kv/txn") && body.includes("request_put");

/**
 * The first join sent once `armed()` says so is held up on its way (a paused leader with the proposal), and its
 * sender sees the connection break, so the SDK resends it. `land()` sends the held copy, when the test chooses.
 */
function holdFirstJoin(armed: () => boolean = () => true) {
  let held: (() => Promise<unknown>) | undefined;
  const through: Through = async (input, init, forward) => {
    if (armed() && held === undefined && isJoin(input, init.body)) {
      held = () => forward(input, { ...init, signal: undefined } as never);
      throw connectionReset();
    }
    return forward(input, init);
  };
  return { through, land: () => held!() };
}

describe("a join that lands after its acquisition is over", () => {
  it("is swept by the session's next renewal: the line is not blocked for the lease's life", async () => {
    // The first join is resent, and its held copy lands after the release.
    const join = holdFirstJoin();
    const { mock, etcd } = mockClient({}, { through: join.through });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    await lock.unlock();
    expect(mock.keys("jobs/")).toEqual([]);
    // The late copy lands now, after the release, and re-creates the key under the live lease.
    await join.land();
    expect(mock.keys("jobs/")).toEqual([lock.key]);
    await session.renew();
    await until("the late key is swept", 2_000, () => mock.keys("jobs/").length === 0);
    // And another contender takes the lock at once.
    const other = await etcd.session({ ttl: 30 });
    expect(await other.mutex("jobs").tryLock()).toBeDefined();
  });

  it("the sweep deletes the late copy alone: a new acquisition of the name has a key of its own", async () => {
    const late = holdFirstJoin();
    let sweepDelete: (() => Promise<unknown>) | undefined;
    const { mock, etcd } = mockClient(
      {},
      {
        through: async (input, init, forward) => {
          // The sweep's delete (guarded: the key as its join made it, on the session's lease with the join's value)
          // is held up on its way, as the join was.
          const sweep = init.body.includes('"LEASE"') && init.body.includes("request_delete_range");
          if (sweepDelete === undefined && input.endsWith("/v3/kv/txn") && sweep) {
            return new Promise<Response>((resolve) => {
              sweepDelete = async () =>
                resolve((await forward(input, { ...init, signal: undefined } as never)) as Response);
            });
          }
          return late.through(input, init, forward);
        },
      },
    );
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const mutex = session.mutex("jobs");
    const first = await mutex.lock();
    await first.unlock();
    await late.land();
    expect(mock.keys("jobs/")).toEqual([first.key]);
    await session.renew();
    await until("the sweep's delete is sent", 2_000, () => sweepDelete !== undefined);
    // The session locks the name again while that delete is on its way: behind the late copy, with its own key.
    const next = mutex.lock({ timeout: 5_000 });
    await sleep(50);
    await sweepDelete!();
    const lock = await next;
    expect(lock.key).not.toBe(first.key);
    await sleep(50);
    expect(mock.keys("jobs/")).toEqual([lock.key]);
    expect((await etcd.get(lock.key))?.createRevision).toBe(lock.revision);
    await lock.unlock();
  });

  it("a key the session still uses is never swept", async () => {
    const mock = createMockEtcd();
    // The first join's answer is lost after it was applied: the resend finds the key.
    const losing = answerLosingFetch((input, init) => mock.fetch(input, init as RequestInit) as never, isJoin);
    const { etcd } = mockClient({}, { mock, through: (input, init) => losing(input, init) });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    expect(losing.lost).toBe(1);
    await session.renew();
    await sleep(100);
    expect(mock.keys("jobs/")).toEqual([lock.key]);
    expect(lock.held).toBe(true);
    await lock.unlock();
  });
});

describe("a join that guessed an empty line", () => {
  it("whose put was refused (the line was busy) leaves no suspect: the next renewal sweeps nothing", async () => {
    const { mock, etcd, calls: paths } = mockClient();
    const holder = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const start = paths.length;
    const waiting = session.mutex("jobs").lock();
    await until("the waiter in line", 2_000, () => mock.keys("jobs/").length === 2);
    // Two sends of the join: the put alone, answered "the line is busy", then the full join.
    expect(paths.slice(start)).toEqual(["/v3/kv/txn", "/v3/kv/txn", "/v3/watch"]);
    await holder.unlock();
    await (await waiting).unlock();
    // Only a send whose answer was lost can land later: a renewal now renews, and reads no key to sweep.
    const renewal = paths.length;
    await session.renew();
    await sleep(100);
    expect(paths.slice(renewal)).toEqual(["/v3/lease/keepalive"]);
  });
});

describe("a failed acquisition whose cleanup meets an outage", () => {
  it("fails within its timeout plus a short grace, and its key is still removed once the outage ends", async () => {
    const { mock, etcd } = mockClient({ retries: 1 });
    const holder = await (await etcd.session({ ttl: 30 })).mutex("jobs").lock();
    const waiter = await etcd.session({ ttl: 30 });
    const waiting = rejection(waiter.mutex("jobs").lock({ timeout: 300 }));
    await until("the waiter joined", 2_000, () => mock.keys("jobs/").length === 2);
    // No leader for the next few requests: the cleanup's first tries fail.
    setTimeout(() => mock.faults.unavailable(4), 250);
    const started = performance.now();
    const error = await waiting;
    expect(error.code).toBe("TIMEOUT");
    expect(performance.now() - started).toBeLessThan(1_000);
    await until("the waiter's key is gone", 8_000, () => mock.keys("jobs/").length === 1);
    expect(mock.keys("jobs/")).toEqual([holder.key]);
  });
});

describe("a multi-lock whose join was resent", () => {
  it("reads each line afresh under its caller's signal: an abort during a stalled read ends it at once", async () => {
    let lost = false;
    let stalled = false;
    const through: Through = async (input, init, forward) => {
      const join = isJoin(input, init.body);
      // The lines' reads after the resend never answer: only the caller's signal can free them.
      if (lost && !join && input.endsWith("/v3/kv/range")) {
        stalled = true;
        return neverAnswered(init.signal);
      }
      const answer = await forward(input, init);
      if (lost || !join) return answer;
      lost = true;
      throw connectionReset();
    };
    const { mock, etcd } = mockClient({}, { through });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const gaveUp = new AbortController();
    const taking = rejection(session.lockAll(["a", "b"], { signal: gaveUp.signal }));
    await until("a line's read on its way", 2_000, () => stalled);
    const asked = performance.now();
    gaveUp.abort();
    expect((await taking).code).toBe("ABORTED");
    expect(performance.now() - asked).toBeLessThan(1_000);
    await until("its keys deleted", 2_000, () => mock.keys("a/").length + mock.keys("b/").length === 0);
  });
});

describe("a failed acquisition whose join may still land", () => {
  /**
   * A waiter whose first join is resent, and whose held copy can land (`join.land()`) after the acquisition failed
   * and deleted its key; the holder it waited behind has let go.
   */
  async function failedWaiter() {
    let armed = false;
    const join = holdFirstJoin(() => armed);
    const { mock, etcd } = mockClient({}, { through: join.through });
    const holder = await (await etcd.session({ ttl: 30 })).mutex("jobs").lock();
    const waiter = await etcd.session({ ttl: 30, keepAlive: "manual" });
    armed = true;
    expect((await rejection(waiter.mutex("jobs").lock({ timeout: 300 }))).code).toBe("TIMEOUT");
    await until("the waiter's key is gone", 2_000, () => mock.keys("jobs/").length === 1);
    await holder.unlock();
    return { mock, waiter, join };
  }

  it("has the late copy swept by its next renewal: the line is not blocked for the lease's life", async () => {
    const { mock, waiter, join } = await failedWaiter();
    await join.land();
    // The late copy: a key under the waiter's live lease, heading a line nobody waits in.
    expect(mock.keys("jobs/")).toHaveLength(1);
    await waiter.renew();
    await until("the late copy is swept", 2_000, () => mock.keys("jobs/").length === 0);
  });

  it("has a copy that lands after a renewal swept by a later one: each renewal within the window sweeps", async () => {
    const { mock, waiter, join } = await failedWaiter();
    // A renewal sweeps before the copy lands, finding nothing; the copy lands; the next renewal sweeps it.
    await waiter.renew();
    await sleep(50);
    await join.land();
    expect(mock.keys("jobs/")).toHaveLength(1);
    await waiter.renew();
    await until("the late copy is swept", 2_000, () => mock.keys("jobs/").length === 0);
  });

  it("is swept for LATE_JOIN_WINDOW, then forgotten: a renewal after the window sends no sweep", async () => {
    const join = holdFirstJoin();
    const { etcd, calls } = mockClient({}, { through: join.through });
    const session = await etcd.session({ ttl: 120, keepAlive: "manual" });
    await (await session.mutex("jobs").lock()).unlock();
    await session.renew();
    const real = performance.now.bind(performance);
    vi.spyOn(performance, "now").mockImplementation(() => real() + LATE_JOIN_WINDOW + 1_000);
    try {
      // Past the window: this renewal sweeps one last time and forgets the key; the next sweeps nothing.
      await session.renew();
      await sleep(50);
      const sent = calls.length;
      await session.renew();
      await sleep(50);
      expect(calls.slice(sent)).toEqual(["/v3/lease/keepalive"]);
    } finally {
      vi.restoreAllMocks();
    }
  });

  it("whose every send was answered leaves nothing to sweep: the next renewal renews, and that is all", async () => {
    const { mock, etcd, calls: paths } = mockClient();
    const holder = await (await etcd.session({ ttl: 30 })).mutex("jobs").lock();
    const waiter = await etcd.session({ ttl: 30, keepAlive: "manual" });
    expect((await rejection(waiter.mutex("jobs").lock({ timeout: 200 }))).code).toBe("TIMEOUT");
    await until("the waiter's key is gone", 2_000, () => mock.keys("jobs/").length === 1);
    await sleep(50);
    const renewal = paths.length;
    await waiter.renew();
    await sleep(100);
    expect(paths.slice(renewal)).toEqual(["/v3/lease/keepalive"]);
    await holder.unlock();
  });

  it("a busy try, its one send answered 'not applied', sends nothing more: nothing of it is in etcd", async () => {
    const { etcd, calls: paths } = mockClient();
    const holder = await (await etcd.session({ ttl: 30 })).mutex("jobs").lock();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const start = paths.length;
    expect(await session.mutex("jobs").tryLock()).toBeUndefined();
    await sleep(100);
    expect(paths.slice(start)).toEqual(["/v3/kv/txn"]);
    await holder.unlock();
  });

  it("one given up while its join waits for a place on the wire deletes the key that join makes", async () => {
    let release: (() => void) | undefined;
    // One request at a time, and the one in flight is held: the join waits for its place, past the caller's abort.
    const { mock, etcd } = mockClient(
      { maxConcurrentRequests: 1 },
      {
        through: async (input, init, forward) => {
          if (input.endsWith("/v3/kv/range") && init.body.includes(btoa("blocker"))) {
            await new Promise<void>((resolve) => {
              release = resolve;
            });
          }
          return forward(input, init);
        },
      },
    );
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const blocking = etcd.get("blocker");
    await until("a request holds the only place", 2_000, () => release !== undefined);
    const abort = new AbortController();
    const locking = rejection(session.mutex("jobs").lock({ signal: abort.signal }));
    await sleep(20);
    abort.abort();
    expect((await locking).code).toBe("ABORTED");
    // The join goes out once the place is free, lands, and is deleted: nothing is left to block the line.
    release!();
    await blocking;
    await sleep(100);
    await until("the key its join made is gone", 2_000, () => mock.keys("jobs/").length === 0);
    expect(await (await etcd.session({ ttl: 30 })).mutex("jobs").tryLock()).toBeDefined();
  });

  it("one given up before it starts sends nothing", async () => {
    const { mock, etcd, calls: paths } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const start = paths.length;
    const error = await rejection(session.mutex("jobs").lock({ signal: AbortSignal.abort() }));
    expect(error.code).toBe("ABORTED");
    await sleep(100);
    expect(paths.slice(start)).toEqual([]);
    expect(mock.keys("jobs/")).toEqual([]);
  });
});

describe("acquisitions in a long session", () => {
  type Session = Awaited<ReturnType<ReturnType<typeof mockClient>["etcd"]["session"]>>;
  type Take = (session: Session, name: string, options: LockOptions) => Promise<() => Promise<void>>;
  const mutex: Take = (s, name, o) =>
    s
      .mutex(name)
      .lock(o)
      .then((held) => () => held.unlock());
  const writeLock: Take = (s, name, o) =>
    s
      .rwlock(name)
      .writeLock(o)
      .then((held) => () => held.unlock());
  const readLock: Take = (s, name, o) =>
    s
      .rwlock(name)
      .readLock(o)
      .then((held) => () => held.unlock());
  const permit: Take = (s, name, o) =>
    s
      .semaphore(name, { permits: 1 })
      .acquire(o)
      .then((held) => () => held.release());
  const locks: Take = (s, name, o) => s.lockAll([name, `${name}-b`], o).then((held) => () => held.unlock());
  const leadership: Take = async (s, name, o) => {
    const election = s.election(name);
    await election.campaign("v", o);
    return () => election.resign();
  };

  // Each recipe, and what keeps it waiting (readers share: a writer keeps a read lock waiting).
  it.each([
    ["a mutex", mutex, mutex],
    ["a read lock", readLock, writeLock],
    ["a write lock", writeLock, writeLock],
    ["a permit", permit, permit],
    ["locks", locks, locks],
    ["leadership", leadership, leadership],
  ])(
    "of %s leave no listener on the session's signal nor a timer once each is over, however it ended",
    async (_, take, block) => {
      const { etcd } = mockClient();
      const release = await block(await etcd.session({ ttl: 30 }), "busy", {});
      const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
      const before = getEventListeners(session.signal, "abort").length;
      const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;
      const timersBefore = timers();
      for (let i = 0; i < 20; i++) {
        // Held and released, each with a timeout and a signal of its own; and a wait that times out.
        await (await take(session, "jobs", { timeout: 5_000, signal: new AbortController().signal }))();
        await rejection(take(session, "busy", { timeout: 20 }));
      }
      expect(getEventListeners(session.signal, "abort").length).toBe(before);
      // Nor a timer of their timeouts, which would keep a process alive for as long.
      expect(timers()).toBeLessThanOrEqual(timersBefore);
      await release();
    },
  );
});

describe("a process frozen while its join is on its way", () => {
  it("finds its lease's deadline past when the answer comes: SESSION_EXPIRED, never an empty handle", async () => {
    // A frozen process's timers do not run; when it thaws, its clock has moved on past the lease's deadline.
    let skew = 0;
    const clock = { now: () => performance.now() + skew, setTimer: () => () => {} };
    let thaw: (() => void) | undefined;
    const { mock, etcd } = mockClient(
      { clock },
      {
        through: async (input, init, forward) => {
          if (input.endsWith("/v3/kv/txn") && init.body.includes("request_put")) {
            const answer = await forward(input, init);
            await new Promise<void>((resolve) => {
              thaw = resolve;
            });
            return answer;
          }
          return forward(input, init);
        },
      },
    );
    const session = await etcd.session({ ttl: 2, keepAlive: "manual" });
    const trying = rejection(session.mutex("jobs").tryLock());
    await until("the join was applied", 2_000, () => thaw !== undefined);
    skew = 3_000;
    thaw!();
    const error = await trying;
    expect(error.code).toBe("SESSION_EXPIRED");
    // Thawed within a TTL of its deadline, the lease may still be there: it is revoked, and the key goes with it.
    await until("the key is gone with its lease", 2_000, () => mock.keys("jobs/").length === 0);
  });
});
