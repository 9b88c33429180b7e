// What a holding's handle says of itself through its own calls (hold/held.ts): one `signal` for its life, a
// disposal after `unlock()` that neither sends nor throws, a release refused with an answer that leaves it held,
// a release gone on in the background that the next `unlock()` reports once, and keys reused only when nothing
// of the holding can still be in flight. On the mock, where a fault can be put on one request.
import { describe, expect, it } from "vitest";
import { type Lock, op } from "../../src/index.js";
import { rejection, sleep, until } from "../support/async.js";
import { logChannels } from "../support/channels.js";
import { requestKey } from "../../src/lock/line/requests.js";
import { createMockEtcd } from "../../src/testing/index.js";
import { connectionReset, permissionDenied } from "../support/gateway.js";
import { failWhere, holdAnswers, mockClient, type Through } from "../support/mock.js";
import { answerLosingFetch } from "../support/outage.js";

/** Whether a request is a release: the guarded delete a holding sends. */
const isRelease = (input: string, body: string) =>
  input.endsWith("/v3/kv/txn") && body.includes("request_delete_range") && !body.includes("request_put");

/** Whether a request is a releasing write: `unlockWith`'s put and guarded delete in one transaction. */
const isWrite = (input: string, body: string) =>
  input.endsWith("/v3/kv/txn") && body.includes("request_delete_range") && body.includes("request_put");

/** Fails the releases sent while `failing()` says so, with `fault` (a thrown error or an answer). */
const failReleases = (failing: () => boolean, fault: () => Response | Error) => failWhere(isRelease, failing, fault);

describe("a holding's signal and releaseRequested", () => {
  it("are one signal each for its life: a listener added before another read of it hears the end", async () => {
    const held: number[] = [];
    const { etcd } = mockClient({
      onEvent: (event) => void (event.type === "lock.released" && held.push(event.heldMs)),
    });
    const start = performance.now();
    const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    const signal = lock.signal;
    const requests = lock.releaseRequested;
    expect(lock.signal).toBe(signal);
    expect(lock.releaseRequested).toBe(requests);
    await lock.unlock();
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toMatchObject({ code: "LOCK_RELEASED", message: expect.stringContaining("it was released") });
    expect(requests.aborted).toBe(false);
    // The event says how long it was held: no longer than the test took.
    expect(held).toHaveLength(1);
    expect(held[0]).toBeLessThanOrEqual(performance.now() - start);
  });
});

describe("disposal (await using) of a holding whose release was asked for", () => {
  it("after unlock() said LOCK_LOST: sends nothing and throws nothing", async () => {
    const { etcd, calls } = mockClient();
    const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    await etcd.delete(lock.key);
    expect((await rejection(lock.unlock())).code).toBe("LOCK_LOST");
    const sent = calls.length;
    await lock[Symbol.asyncDispose]();
    expect(calls.slice(sent)).toEqual([]);
  });

  it("after its session's close released it: sends nothing and throws nothing", async () => {
    const { etcd, calls } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    await session.close();
    await until("the close is known", 2_000, () => !lock.held && lock.signal.aborted);
    const sent = calls.length;
    await lock[Symbol.asyncDispose]();
    expect(calls.slice(sent)).toEqual([]);
  });
});

describe("a release refused with an answer (not lost on the way)", () => {
  it.each([
    ["unlock()", isRelease, (lock: Lock) => lock.unlock()],
    ["unlockWith()", isWrite, (lock: Lock) => lock.unlockWith([op.put("out", "x")])],
  ])("by %s leaves the lock held, its signal quiet, and a later unlock() releases it", async (_, is, release) => {
    let refusing = true;
    const { etcd, mock } = mockClient({}, { through: failWhere(is, () => refusing, permissionDenied) });
    const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    expect((await rejection(release(lock))).code).toBe("PERMISSION_DENIED");
    expect(lock.held).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    expect(mock.keys("jobs/")).toEqual([lock.key]);
    refusing = false;
    await lock.unlock();
    expect(lock.held).toBe(false);
    expect(mock.keys("jobs/")).toEqual([]);
  });
});

describe("a release whose send went unanswered goes on in the background", () => {
  it("the next unlock() reports its success once; the one after says LOCK_RELEASED", async () => {
    let failing = true;
    const events: string[] = [];
    const through = failReleases(() => failing, connectionReset);
    const { etcd, mock } = mockClient({ onEvent: (event) => void events.push(event.type) }, { through });
    const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    expect((await rejection(lock.unlock({ timeout: 1 }))).code).not.toBe("LOCK_RELEASED");
    const pending = (lock.signal.reason as Error).message;
    expect(pending).toContain("its release was sent; it goes on in the background");
    // Its first resends fail too: it goes on resending after a pause.
    await sleep(300);
    failing = false;
    await until("the background release is over", 5_000, () => events.includes("lock.released"));
    expect(mock.keys("jobs/")).toEqual([]);
    await lock.unlock();
    expect((await rejection(lock.unlock())).code).toBe("LOCK_RELEASED");
  });

  it("while every send still fails, a second unlock() fails too: no success before the key is gone", async () => {
    const { etcd, mock } = mockClient({}, { through: failReleases(() => true, connectionReset) });
    const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    await rejection(lock.unlock({ timeout: 1 }));
    for (let i = 0; i < 5; i++) {
      await sleep(30);
      const again = await rejection(lock.unlock({ timeout: 1 }));
      expect(again.code).not.toBe("LOCK_RELEASED");
    }
    expect(mock.keys("jobs/")).toEqual([lock.key]);
    expect(lock.held).toBe(false);
  });

  it("a background resend refused with an answer leaves it released, not held again", async () => {
    let fault: () => Response | Error = connectionReset;
    const { etcd } = mockClient(
      {},
      {
        through: failReleases(
          () => true,
          () => fault(),
        ),
      },
    );
    const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    await rejection(lock.unlock({ timeout: 1 }));
    fault = permissionDenied;
    await sleep(300);
    expect(lock.held).toBe(false);
    expect(lock.signal.aborted).toBe(true);
  });

  it("its key is not reused: the session's next lock of the name has a key of its own", async () => {
    let failing = true;
    const { etcd, mock } = mockClient({}, { through: failReleases(() => failing, connectionReset) });
    const mutex = (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs");
    const first = await mutex.lock();
    await rejection(first.unlock({ timeout: 1 }));
    failing = false;
    await until("the background release deleted the key", 5_000, () => mock.keys("jobs/").length === 0);
    const next = await mutex.lock();
    expect(next.key).not.toBe(first.key);
  });
});

describe("a mutex's key reuse", () => {
  it("not after a release whose answer was lost: its resend found the key gone, unconfirmed", async () => {
    const mock = createMockEtcd();
    // The first release's answer is lost after etcd applied it.
    const losing = answerLosingFetch((input, init) => mock.fetch(input, init as RequestInit) as never, isRelease);
    const { etcd } = mockClient({}, { mock, through: (input, init) => losing(input, init) });
    const mutex = (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs");
    const first = await mutex.lock();
    await first.unlock();
    expect(losing.lost).toBe(1);
    expect(mock.keys("jobs/")).toEqual([]);
    expect((await mutex.lock()).key).not.toBe(first.key);
  });

  it("takes a key back once its own release deleted it", async () => {
    const { etcd } = mockClient();
    const mutex = (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs");
    const first = await mutex.lock();
    await first.unlock();
    expect((await mutex.lock()).key).toBe(first.key);
  });

  it("never takes back the key of a lock whose ticket went out", async () => {
    const { etcd } = mockClient();
    const mutex = (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs");
    const first = await mutex.lock();
    first.ticket();
    await first.unlock();
    expect((await mutex.lock()).key).not.toBe(first.key);
  });
});

describe("unlockWith() while unlock() is on its way", () => {
  it("is LOCK_RELEASED, saying its release was already sent; nothing is written", async () => {
    let hold: (() => void) | undefined;
    const { etcd } = mockClient(
      {},
      {
        through: async (input, init, forward) => {
          if (isRelease(input, init.body)) await new Promise<void>((resolve) => (hold = resolve));
          return forward(input, init);
        },
      },
    );
    const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    const unlocking = lock.unlock();
    await until("the release is on its way", 2_000, () => hold !== undefined);
    const error = await rejection(lock.unlockWith([op.put("out", "x")]));
    expect(error.code).toBe("LOCK_RELEASED");
    expect(error.message).toContain("its release was already sent");
    hold!();
    await unlocking;
    expect(await etcd.get("out")).toBeUndefined();
  });
});

describe("a leader's proclamation", () => {
  it("keeps its key bound to the session's lease", async () => {
    const { etcd, mock } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const election = session.election("leader");
    await election.campaign("one");
    await election.proclaim("two");
    const [key] = mock.keys("leader/");
    const kv = await etcd.get(key!);
    expect(kv?.value).toBe("two");
    expect(kv?.lease).toBe(session.leaseId);
  });

  it("refused as another client wrote its key: NOT_LEADER, and the leadership ends lost", async () => {
    const events: string[] = [];
    const { etcd, mock } = mockClient({ onEvent: (event) => void events.push(event.type) });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const election = session.election("leader");
    await election.campaign("one");
    const [key] = mock.keys("leader/");
    await etcd.put(key!, "theirs", { lease: session.leaseId });
    expect((await rejection(election.proclaim("two"))).code).toBe("NOT_LEADER");
    // Its key, on the session's lease but no longer the version it held, goes with its end (conformance-handles).
    await until("the leadership ended", 2_000, () => events.includes("lock.lost"));
    expect(events).not.toContain("lock.released");
  });
});

describe("unlock() before it sends", () => {
  it.each([
    [{ timeout: -1 }, "timeout"],
    [{ attemptTimeout: -1 }, "attemptTimeout"],
    [{ signal: "stop" as never }, "signal"],
  ])("with bad options (%o): INVALID_ARGUMENT naming %s; nothing sent, still held", async (options, named) => {
    const { etcd, calls } = mockClient();
    const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    const sent = calls.length;
    const error = await rejection(lock.unlock(options));
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toContain(named);
    expect(calls.slice(sent)).toEqual([]);
    expect(lock.held).toBe(true);
    // Bad options are not a release asked for: disposal still releases it.
    await lock[Symbol.asyncDispose]();
    expect(lock.held).toBe(false);
  });

  it("of a frozen process past its lease's deadline: LOCK_LOST, and nothing is sent", async () => {
    let skew = 0;
    const clock = { now: () => performance.now() + skew, setTimer: () => () => {} };
    const { etcd, calls } = mockClient({ clock });
    const lock = await (await etcd.session({ ttl: 2, keepAlive: "manual" })).mutex("jobs").lock();
    skew = 5_000;
    const sent = calls.length;
    expect((await rejection(lock.unlock())).code).toBe("LOCK_LOST");
    expect(calls.slice(sent)).toEqual([]);
  });

  it("while its session's close is on its way: LOCK_RELEASED by the close, and no delete of its own", async () => {
    const { etcd, calls } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    const sent = calls.length;
    const closing = session.close();
    const error = await rejection(lock.unlock());
    expect(error.code).toBe("LOCK_RELEASED");
    expect(error.message).toContain("its session was closed");
    await closing;
    expect(calls.slice(sent)).toEqual(["/v3/lease/revoke"]);
  });
});

describe("a holding whose session's lease ended", () => {
  it("is LOCK_LOST saying its session's lease ended, and unlock() says the same without a request", async () => {
    const { etcd, calls } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    await etcd.lease.revoke(session.leaseId);
    expect((await rejection(session.renew())).code).toBe("SESSION_EXPIRED");
    expect(lock.held).toBe(false);
    const lost = lock.signal.reason as { code: string; message: string };
    expect(lost.code).toBe("LOCK_LOST");
    expect(lost.message).toContain("its session's lease ended");
    expect((lost as { cause?: { code?: string } }).cause?.code).toBe("SESSION_EXPIRED");
    const sent = calls.length;
    const error = await rejection(lock.unlock());
    expect(error.code).toBe("LOCK_LOST");
    expect(error.message).toBe("lock jobs was lost: its session's lease ended");
    expect(calls.slice(sent)).toEqual([]);
  });
});

describe("a release refused whose cause cannot be read", () => {
  it("is LOCK_LOST saying its keys were gone when it was released", async () => {
    let reads = false;
    const { etcd } = mockClient(
      {},
      {
        through: async (input, init, forward) => {
          if (reads && !isRelease(input, init.body)) throw connectionReset();
          return forward(input, init);
        },
      },
    );
    const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    await etcd.delete(lock.key);
    reads = true;
    const error = await rejection(lock.unlock({ timeout: 300 }));
    expect(error.code).toBe("LOCK_LOST");
    expect(error.message).toBe("lock jobs was lost: its keys were gone when it was released");
  });
});

describe("a holding whose session ended while its release went on in the background", () => {
  it("is released, not lost: its release left within the lease's deadline, and unlock() says so once", async () => {
    const events: string[] = [];
    const through = failReleases(() => true, connectionReset);
    const { etcd } = mockClient({ onEvent: (event) => void events.push(event.type) }, { through });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    await rejection(lock.unlock({ timeout: 1 }));
    await etcd.lease.revoke(session.leaseId);
    expect((await rejection(session.renew())).code).toBe("SESSION_EXPIRED");
    await until("the holding ended", 5_000, () => events.includes("lock.released") || events.includes("lock.lost"));
    expect(events).not.toContain("lock.lost");
    await lock.unlock();
    const again = await rejection(lock.unlock());
    expect(again.code).toBe("LOCK_RELEASED");
    expect(again.message).toContain("it was released");
  });
  it("that ended while a send was on its way, then unanswered: released once it failed, said once", async () => {
    const events: string[] = [];
    // Each release is held up before it reaches etcd; once let go, the connection drops, for every send after.
    let go: (() => void) | undefined;
    const through: Through = async (input, init, forward) => {
      if (!isRelease(input, init.body)) return forward(input, init);
      if (go === undefined) await new Promise<void>((resolve) => (go = resolve));
      throw connectionReset();
    };
    const { etcd } = mockClient({ onEvent: (event) => void events.push(event.type) }, { through });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    const unlocking = rejection(lock.unlock());
    await until("the release on its way", 2_000, () => go !== undefined);
    await etcd.lease.revoke(session.leaseId);
    expect((await rejection(session.renew())).code).toBe("SESSION_EXPIRED");
    // The session's end leaves the outcome to the send on its way.
    await sleep(50);
    expect(events).not.toContain("lock.released");
    go!();
    expect((await unlocking).code).toBe("UNAVAILABLE");
    await until("the holding ended", 2_000, () => events.includes("lock.released") || events.includes("lock.lost"));
    expect(events).not.toContain("lock.lost");
    await lock.unlock();
    expect((await rejection(lock.unlock())).code).toBe("LOCK_RELEASED");
  });
});

describe("unlock() on its way while its own session is closed", () => {
  /**
   * A client whose release is held up (before it reaches etcd, or on its answer's way back) until `go()`; with
   * `revokeLate`, the close's revocation lands at once but its answer waits for `answerRevoke()`.
   */
  function heldUpRelease(landed: boolean, revokeLate = false, fault?: () => Response) {
    const release = holdAnswers(isRelease, { before: !landed });
    const revoke = holdAnswers((input) => revokeLate && input.endsWith("/v3/lease/revoke"));
    const events: string[] = [];
    // Once let go, a release meets `fault` (an answer that refuses it) instead of etcd, when one is given.
    const onward: Through = (input, init, forward) =>
      fault && isRelease(input, init.body) ? Promise.resolve(fault() as never) : revoke.through(input, init, forward);
    const { etcd, mock, calls } = mockClient(
      { onEvent: (event) => void events.push(event.type) },
      { through: (input, init, forward) => release.through(input, init, (...sent) => onward(...sent, forward)) },
    );
    return {
      etcd,
      mock,
      calls,
      events,
      go: release.go,
      sent: release.caught,
      revoked: revoke.caught,
      answerRevoke: revoke.go,
    };
  }

  it.each([
    ["before it reached etcd", false],
    ["landed, its answer on the way", true],
  ])("%s: released by the close, never lost; unlock() resolves", async (_, landed) => {
    const { etcd, events, go, sent } = heldUpRelease(landed);
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    const unlocking = lock.unlock();
    await until("the release sent", 2_000, sent);
    expect(await session.close()).toBe(true);
    go();
    await unlocking;
    expect(events).toContain("lock.released");
    expect(events).not.toContain("lock.lost");
    expect((await rejection(lock.unlock())).code).toBe("LOCK_RELEASED");
  });

  it("refused before the close's own answer came: released all the same, once the revocation is known", async () => {
    const { etcd, events, go, sent, revoked, answerRevoke } = heldUpRelease(false, true);
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    const unlocking = lock.unlock();
    await until("the release sent", 2_000, sent);
    const closing = session.close();
    await until("the revocation landed", 2_000, revoked);
    // The release reaches etcd after the revocation took the key: refused, and answered before the close is.
    go();
    await sleep(100);
    answerRevoke();
    expect(await closing).toBe(true);
    await unlocking;
    expect(events).toContain("lock.released");
    expect(events).not.toContain("lock.lost");
  });

  it.each([
    ["landed before another client revoked the lease, then the close: released", true, "lock.released"],
    ["sent after its lease had ended (revoked by another client): lost", false, "lock.lost"],
  ])("%s, as its release's answer shows", async (_, landed, told) => {
    const { etcd, mock, events, go, sent } = heldUpRelease(landed);
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    const unlocking = lock.unlock().then(
      () => "released",
      (error: { code: string }) => error.code,
    );
    await until("the release sent", 2_000, sent);
    await mockClient({}, { mock }).etcd.lease.revoke(session.leaseId);
    expect(await session.close()).toBe(false);
    go();
    expect(await unlocking).toBe(landed ? "released" : "LOCK_LOST");
    expect(events).toContain(told);
    expect(events).not.toContain(landed ? "lock.lost" : "lock.released");
  });
  it("refused with an error answer after the close released it: released, and unlock() never sends again", async () => {
    const { etcd, events, go, sent, calls } = heldUpRelease(false, false, permissionDenied);
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    const unlocking = lock.unlock().catch(() => {});
    await until("the release sent", 2_000, sent);
    expect(await session.close()).toBe(true);
    go();
    await unlocking;
    expect(events).toContain("lock.released");
    const releases = calls.length;
    expect((await rejection(lock.unlock())).code).toBe("LOCK_RELEASED");
    expect(calls.length).toBe(releases);
  });
});

describe("a holding whose session was closed after its lease had ended", () => {
  it("is LOCK_LOST saying so: the close revoked nothing, the lease was gone before", async () => {
    const { etcd } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    await etcd.lease.revoke(session.leaseId);
    await session.close();
    await until("the holding ended", 2_000, () => lock.signal.aborted);
    const error = await rejection(lock.unlock());
    expect(error.code).toBe("LOCK_LOST");
    expect(error.message).toContain("its session's lease had ended before the session was closed");
  });
});

describe("unlockWith() answered after its session's close ended the holding", () => {
  it("ends it once: one lock.released, and the write's results", async () => {
    const events: string[] = [];
    // The releasing write lands; its answer is held up on its way back.
    const held = holdAnswers(isWrite);
    const { etcd } = mockClient({ onEvent: (event) => void events.push(event.type) }, { through: held.through });
    const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
    const lock = await session.mutex("jobs").lock();
    const writing = lock.unlockWith([op.put("out", "x")]);
    await until("the write landed", 2_000, held.caught);
    await session.close();
    held.go();
    expect(await writing).toHaveLength(1);
    expect(await etcd.get("out")).toMatchObject({ value: "x" });
    expect(events.filter((type) => type === "lock.released")).toHaveLength(1);
  });
});

describe("an operator's request to release a holding nobody asked releaseRequested of", () => {
  it("is told when it is read, and breaks nothing: the holding still follows its key", async () => {
    const { etcd } = mockClient();
    const session = await etcd.session({ ttl: 30, keepAlive: "auto" });
    try {
      const lock = await session.mutex("jobs").lock();
      await sleep(1_300);
      await etcd.requestRelease("jobs", { reason: "deploy" });
      await sleep(300);
      expect(lock.releaseRequested.reason).toMatchObject({ code: "RELEASE_REQUESTED" });
      // Following still works: another client's delete ends it at once.
      await etcd.delete(lock.key);
      await until("the holding learns its key went", 2_000, () => !lock.held);
    } finally {
      await session.close();
    }
  });
});

describe("a holding that follows its keys (an auto session, after FOLLOW_AFTER)", () => {
  it("only in an auto session: a manual session's holding opens no stream, however long it lasts", async () => {
    const { etcd, calls } = mockClient();
    const lock = await (await etcd.session({ ttl: 30, keepAlive: "manual" })).mutex("jobs").lock();
    await sleep(1_300);
    expect(calls.filter((path) => path === "/v3/watch")).toEqual([]);
    await lock.unlock();
  });

  it("leaves no stream open once released: its line's and the operators' records' watches close", async () => {
    const { etcd, mock } = mockClient();
    const lock = await (await etcd.session({ ttl: 30 })).mutex("jobs").lock();
    await until("following", 2_000, () => mock.openWatchStreams === 2);
    await lock.unlock();
    await until("no stream open", 1_000, () => mock.openWatchStreams === 0);
  });

  it("a request whose record another client deleted breaks nothing: it still learns its key went", async () => {
    const { etcd, mock } = mockClient();
    const lock = await (await etcd.session({ ttl: 30 })).mutex("jobs").lock();
    await until("following", 2_000, () => mock.openWatchStreams === 2);
    await etcd.requestRelease("jobs", { reason: "deploy" });
    await until("the request told", 1_000, () => lock.releaseRequested.aborted);
    await etcd.delete({ prefix: requestKey("jobs/") });
    await sleep(100);
    expect(lock.held).toBe(true);
    await etcd.delete(lock.key);
    await until("the loss told", 1_000, () => !lock.held);
    expect((await rejection(lock.unlock())).message).toContain("deleted by another client");
  });
});

describe("a holding's end on diagnostics_channel", () => {
  it("a release is published as lock.released, a loss as lock.lost, each once, with its name and token", async () => {
    const log = logChannels();
    try {
      const { etcd } = mockClient();
      const session = await etcd.session({ ttl: 30, keepAlive: "manual" });
      const kept = await session.mutex("kept").lock();
      const taken = await session.mutex("taken").lock();
      await kept.unlock();
      await etcd.delete(taken.key);
      expect((await rejection(taken.unlock())).code).toBe("LOCK_LOST");
      const ends = log.seen
        .filter((seen) => seen.event === "lock.lost" || seen.event === "lock.released")
        .map((seen) => [seen.event, seen.message.name, seen.message.token]);
      expect(ends).toEqual([
        ["lock.released", "kept", kept.revision],
        ["lock.lost", "taken", taken.revision],
      ]);
    } finally {
      log.stop();
    }
  });
});
