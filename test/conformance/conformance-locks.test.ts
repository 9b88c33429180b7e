// Locks and elections on the mock and on real etcd: FIFO order, handoff cost, tryLock, fencing, expiry, election.
//
// Sessions here are keepAlive "manual": no background renewals. Their client-side deadline runs on the REAL
// monotonic clock, while the mock's leases run on virtual time; see the expiry tests for what that means.
import { describe, expect, inject, it } from "vitest";
import { type Etcd, EtcdError, type Fetch, type Lock, op, type Session } from "../../src/index.js";
import { SECOND_WATCH_AFTER } from "../../src/lock/line/wait.js";
import { rejection, sleep, stillPending, until, within } from "../support/async.js";
import { freshNames, keysUnder, recordingFetch, untilLineLength, useSessions } from "../support/etcd.js";
import { heldWatches, switchableFetch } from "../support/outage.js";
import { holdsStreamsBack } from "../support/proxies.js";
import { describeSideBySide, useBackend } from "./backend.js";

const { backend, etcd } = useBackend();

// After useBackend: the sessions close before the backend does.
const open = useSessions(etcd, { keepAlive: "manual" });
const fresh = freshNames("lock");

const session = (ttl = 30, client: Etcd = etcd): Promise<Session> => open({ ttl }, client);

/** How long after advance(3_500) a 2 s lease may still take to go on real etcd. */
const EXPIRY_GRACE_MS = 3_000;

/**
 * A holder, then `count` waiters in line behind it that can each give up, on sessions of `client` (one client:
 * its second waiter on shares the line's stream; by default each waiter's client is the test's own).
 */
async function holderAndWaiters(name: string, count: number, client: Etcd = etcd) {
  const holder = await (await session()).mutex(name).lock();
  const giveUp = Array.from({ length: count }, () => new AbortController());
  const waiting: Promise<Lock>[] = [];
  for (const [i, controller] of giveUp.entries()) {
    waiting.push((await session(30, client)).mutex(name).lock({ signal: controller.signal, timeout: 10_000 }));
    await untilLineLength(etcd, name, i + 2);
  }
  return { holder, waiting, giveUp };
}

/** Gives up `which` of the waiters; their calls say ABORTED. */
async function giveUpOn(line: { waiting: Promise<Lock>[]; giveUp: AbortController[] }, which: number) {
  line.giveUp[which]!.abort();
  expect((await rejection(line.waiting[which]!)).code).toBe("ABORTED");
}

/** `last` waits while the holder holds, and holds once it released. */
async function holdsAfter(holder: Lock, last: Promise<Lock>) {
  expect(await stillPending(last, 500)).toBe(true);
  expect(holder.held).toBe(true);
  await holder.unlock();
  const lock = await within(5_000, "the last waiter's lock", last);
  expect(lock.revision).toBeGreaterThan(holder.revision);
  await lock.unlock();
}

describe("mutex", () => {
  it("a waiter given up during an outage ends at once, not after its read's resend pause", async () => {
    const name = fresh();
    const fetch = switchableFetch(backend.fetch);
    // A short per-call timeout: each read of the line fails within it, and the resend loop pauses between them.
    const client = backend.client({ fetch, timeout: 300 });
    const holder = await (await session()).mutex(name).lock();
    const giveUp = new AbortController();
    const waiter = (await session(30, client)).mutex(name);
    const waiting = rejection(waiter.lock({ wait: "poll", pollInterval: 50, timeout: 10_000, signal: giveUp.signal }));
    await untilLineLength(etcd, name, 2);
    fetch.down = true;
    // Reads unanswered for a while: the pause before each resend grows, up to 2 s.
    await sleep(2_500);
    const abortedAt = performance.now();
    giveUp.abort();
    const error = await within(3_000, "the waiter's rejection", waiting);
    // Within the failed acquisition's grace for its cleanup (500 ms, which the outage uses up), not a pause later.
    expect(performance.now() - abortedAt).toBeLessThan(800);
    expect(error.code).toBe("ABORTED");
    fetch.down = false;
    await holder.unlock();
  });

  it("a lock given up as its join's answer arrives is ABORTED at once; the holder keeps the line", async () => {
    const name = fresh();
    const holder = await (await session()).mutex(name).lock();
    const giveUp = new AbortController();
    // The caller gives up between the join's answer and the wait: the wait begins with its signal aborted.
    const fetch: Fetch = async (input, init) => {
      const response = await backend.fetch(input, init);
      if (input.endsWith("/v3/kv/txn") && String(init?.body).includes("request_put")) giveUp.abort();
      return response;
    };
    const contender = (await session(30, backend.client({ fetch }))).mutex(name);
    const error = await within(2_000, "the given-up lock", rejection(contender.lock({ signal: giveUp.signal })));
    expect(error.code).toBe("ABORTED");
    expect(holder.held).toBe(true);
    await until("the line back to its holder", 2_000, async () => (await keysUnder(etcd, name)).length === 1);
    await holder.unlock();
  });

  it("a waiter whose whole line is deleted at once (a delete of the prefix) fails with SESSION_EXPIRED", async () => {
    const name = fresh();
    await (await session()).mutex(name).lock();
    const second = (await session()).mutex(name).lock({ timeout: 10_000 });
    await untilLineLength(etcd, name, 2);
    // On a client of its own, the last waiter watches its predecessor's key alone, and reads the line when it goes.
    const last = (await session(30, backend.client())).mutex(name).lock({ timeout: 10_000 });
    await untilLineLength(etcd, name, 3);
    await sleep(100);
    await etcd.delete({ prefix: `${name}/` });
    // Its read finds no key up to its own: not there, and nothing ahead to wait for.
    expect((await within(2_000, "the last waiter", rejection(last))).code).toBe("SESSION_EXPIRED");
    // The second saw only the holder's key go: it may hold for the bound a holding learns its key went in.
    await second.then(
      (lock) => lock.unlock().catch(() => {}),
      () => {},
    );
  });

  it("a wait leaves nothing running once it holds: no watch opens later, every one it opened is closed", async () => {
    const name = fresh();
    const fetch = recordingFetch(backend.fetch);
    const waiters = backend.client({ fetch });
    const holder = await (await session()).mutex(name).lock();
    // Two waiters of one client: the first on a watch of its own, the second on the line's shared stream.
    const first = (await session(30, waiters)).mutex(name).lock({ timeout: 10_000 });
    await untilLineLength(etcd, name, 2);
    const second = (await session(30, waiters)).mutex(name).lock({ timeout: 10_000 });
    await untilLineLength(etcd, name, 3);
    await holder.unlock();
    await (await within(5_000, "the first waiter's lock", first)).unlock();
    await (await within(5_000, "the second waiter's lock", second)).unlock();
    const ended = performance.now();
    const watches = () => fetch.calls.filter((call) => call.path === "/v3/watch");
    const shown = () =>
      JSON.stringify(watches().map((call) => ({ at: Math.round(call.at - ended), cut: call.cut, error: call.error })));
    // The line's stream lingers a moment for the next waiter, and may reopen in that time (a connection reset
    // through a proxy): that is its own doing. Once it closed, nothing the waits started may open another.
    await until("every watch closed", 2_000, async () => watches().every((call) => call.cut));
    const opened = watches().length;
    // Past the second watch's timer (armed when each wait began).
    await sleep(SECOND_WATCH_AFTER + 500 - (performance.now() - ended));
    expect(watches().length, `watches opened after the waits ended: ${shown()}`).toBe(opened);
    expect(watches().filter((call) => !call.cut).length, `watches still open: ${shown()}`).toBe(0);
  });

  it("FIFO: 5 waiters acquire in the order they joined the line", async () => {
    const name = fresh();
    const holder = await (await session()).mutex(name).lock();
    const order: number[] = [];
    const waiters: Promise<void>[] = [];
    for (let i = 0; i < 5; i++) {
      const mutex = (await session()).mutex(name);
      waiters.push(
        mutex.lock().then(async (lock) => {
          order.push(i);
          // The previous holder must be gone: exactly one holder at a time.
          const line = await etcd.inspectLock(name);
          expect(line.holder?.key).toBe(lock.key);
          expect(line.holder?.revision).toBe(lock.revision);
          await lock.unlock();
        }),
      );
      await untilLineLength(etcd, name, i + 2);
    }
    expect(order).toEqual([]);
    await holder.unlock();
    await within(10_000, "all waiters", Promise.all(waiters));
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect((await etcd.range({ prefix: `${name}/` })).count).toBe(0);
  });

  it(
    "joins an empty line with the put alone, answered by its revision; " +
      "behind a holder, the full join reads the holder and the newest keys whole, leases included",
    async () => {
      const name = fresh();
      interface WireKv {
        key: string;
        value?: string;
        lease?: string;
      }
      interface WireTxn {
        header: { revision: string };
        succeeded?: boolean;
        responses?: Array<{ response_put?: unknown; response_range?: { kvs?: WireKv[] }; response_txn?: WireTxn }>;
      }
      // Each join as sent (the put alone, or the full join with its branch for a busy line) and as answered.
      const joins: Array<{ sent: "put alone" | "full"; answer: WireTxn }> = [];
      const fetch: Fetch = async (input, init) => {
        const response = await backend.fetch(input, init);
        if (!input.endsWith("/v3/kv/txn")) return response;
        const request = JSON.parse(init.body) as { compare?: unknown[]; failure?: unknown[] };
        // A join compares its whole line (a range); a release guards its one key.
        if (!JSON.stringify(request.compare ?? []).includes("range_end")) return response;
        const text = await response.text();
        joins.push({
          sent: (request.failure ?? []).length === 0 ? "put alone" : "full",
          answer: JSON.parse(text) as WireTxn,
        });
        return { status: response.status, body: null, text: () => Promise.resolve(text) };
      };
      const client = backend.client({ fetch });
      const held = await (await session(30, client)).mutex(name).lock();
      expect(joins.map((j) => j.sent)).toEqual(["put alone"]);
      const empty = joins[0]!.answer;
      expect(empty.succeeded).toBe(true);
      expect(empty.responses).toEqual([{ response_put: { header: { revision: empty.header.revision } } }]);
      expect(held.revision).toBe(Number(empty.header.revision));

      // A new mutex guesses an empty line too: refused (nothing written, nothing read), then the full join.
      const waiterSession = await session(30, client);
      const waiter = waiterSession.mutex(name);
      const waiting = waiter.lock();
      await untilLineLength(etcd, name, 2);
      // Its answer is recorded once read, which may be after the key shows in the line.
      await until("the full join's answer", 5_000, () => joins.length === 3);
      expect(joins.map((j) => j.sent)).toEqual(["put alone", "put alone", "full"]);
      const refused = joins[1]!.answer;
      expect(refused.succeeded ?? false).toBe(false);
      expect(refused.responses ?? []).toEqual([]);
      // The compare (an empty line) failed, so the full join ran its nested transaction: put, holder, two newest.
      const behind = joins[2]!.answer;
      expect(behind.succeeded ?? false).toBe(false);
      const line = behind.responses![0]!.response_txn!;
      expect(line.succeeded).toBe(true);
      const [, owner, newest] = line.responses!;
      const keys = (r: { response_range?: { kvs?: WireKv[] } } | undefined) =>
        (r?.response_range?.kvs ?? []).map((kv) => atob(kv.key));
      expect(keys(owner)).toEqual([`${backend.namespace}${held.key}`]);
      // The waiter's key, its own (`<name>/<leaseHex>_<16 hex>`), is the newest.
      expect(keys(newest)).toHaveLength(2);
      expect(keys(newest)[0]).toMatch(
        new RegExp(`^${backend.namespace}${name}/${waiterSession.leaseHex}_[0-9a-f]{16}$`),
      );
      expect(keys(newest)[1]).toBe(`${backend.namespace}${held.key}`);
      // Whole: each key's lease says it is a contender (etcd 3.7 leaves leases out of keys-only answers).
      expect(
        [...(owner!.response_range!.kvs ?? []), ...(newest!.response_range!.kvs ?? [])].map((kv) => kv.lease),
      ).toEqual([held.leaseId, waiterSession.leaseId, held.leaseId]);
      await held.unlock();
      await (await within(5_000, "the waiter", waiting)).unlock();

      // That mutex found its line busy: its joins go full, answered by the put alone while the line is empty,
      // until two in a row found it empty; then the put alone again.
      for (let i = 0; i < 3; i++) await (await waiter.lock()).unlock();
      expect(joins.slice(3).map((j) => j.sent)).toEqual(["full", "full", "put alone"]);
      for (const { answer } of joins.slice(3)) {
        expect(answer.succeeded).toBe(true);
        expect(answer.responses).toEqual([{ response_put: { header: { revision: answer.header.revision } } }]);
      }
    },
  );

  it(
    "tryLock: undefined while held, in one request that leaves no key; lock({ timeout: 0 }) → LOCKED; " +
      "a Lock once free",
    async () => {
      const name = fresh();
      const holder = await (await session()).mutex(name).lock();
      const fetch = recordingFetch(backend.fetch);
      const other = (await session(30, backend.client({ fetch }))).mutex(name);
      const mark = fetch.mark();
      expect(await other.tryLock()).toBeUndefined();
      // The put only into an empty line, else the holder read: nothing written, nothing to delete.
      expect(fetch.since(mark)).toEqual(["/v3/kv/txn"]);
      expect((await etcd.range({ prefix: `${name}/` })).count).toBe(1);
      const error = await rejection(other.lock({ timeout: 0 }));
      expect(error.code).toBe("LOCKED");
      expect((await etcd.range({ prefix: `${name}/` })).count).toBe(1);
      await holder.unlock();
      const lock = await other.tryLock();
      expect(lock).toBeDefined();
      expect(lock!.revision).toBeGreaterThan(holder.revision);
      await lock!.unlock();
      // Unlocking twice: LOCK_RELEASED.
      await expect(lock!.unlock()).rejects.toMatchObject({ code: "LOCK_RELEASED" });
    },
  );

  it(
    "a fenced write succeeds while held and is refused once the lock is lost (lease revoked); " +
      "the next holder's succeeds",
    async () => {
      const name = fresh();
      const resource = `${fresh("res")}/data`;
      const s1 = await session();
      const first = await s1.mutex(name).lock();
      const fenced = (lock: Lock, value: string) => etcd.txn().if(lock.ifHeld()).then(op.put(resource, value)).commit();
      expect((await fenced(first, "from first")).succeeded).toBe(true);
      const s2 = await session();
      const second = s2.mutex(name).lock();
      await untilLineLength(etcd, name, 2);
      await etcd.lease.revoke(s1.leaseId);
      const secondLock = await within(5_000, "second acquires", second);
      expect((await fenced(first, "stale")).succeeded).toBe(false);
      expect((await fenced(secondLock, "from second")).succeeded).toBe(true);
      expect((await etcd.get(resource))?.value).toBe("from second");
      // The stale holder's unlock tells it the lock was lost.
      await expect(first.unlock()).rejects.toMatchObject({ code: "LOCK_LOST" });
      expect(secondLock.held).toBe(true);
      await secondLock.unlock();
    },
  );
});

// A member of its own: when other writes move the store on between a waiter's join and its watch's creation,
// the waiter rightly reads the line once more, so exact request counts need a quiet member.
/** A new mutex joining a busy line: the put alone (it guesses an empty line), refused, then the full join. */
const JOIN_OF_NEW_MUTEX_BEHIND_HOLDER = ["/v3/kv/txn", "/v3/kv/txn"];

describe("a join's requests are built for its own name (issue 37, finding 8)", () => {
  // 4e52409 built a mutex's join once per key with a stand-in value and swapped the value in as text: a name whose
  // line's end (`<name>0`, the prefix's range end) encodes as the stand-in's base64 had its range rewritten, and the
  // lock met an unrelated key as a stranger (LOCK_NAME_CONFLICT). Here: zeros aligned so that the line's end,
  // namespace included, ends in the 32 zeros of that base64.
  it("a name of zeros whose line ends where a stand-in value would: locked, unrelated keys untouched", async () => {
    const ns = backend.namespace.length;
    let zeros = 31;
    while ((ns + zeros + 1 - 32) % 3 !== 0) zeros++;
    const name = "0".repeat(zeros);
    await etcd.put(`${name}1`, "unrelated");
    const s = await session();
    for (let i = 0; i < 3; i++) {
      const lock = await s.mutex(name).lock({ timeout: 2_000 });
      expect(lock.key.startsWith(`${name}/`)).toBe(true);
      const { kvs } = await etcd.range({ prefix: `${name}/` });
      expect(kvs.map((kv) => kv.key)).toEqual([lock.key]);
      await lock.unlock();
    }
    expect((await etcd.get(`${name}1`))?.value).toBe("unrelated");
    await etcd.delete(`${name}1`);
  });
});

describe("waiters whose predecessors give up, each on a watch of its own (issue 37)", () => {
  // The line: the holder, then three waiters of three clients. When the second gives up, the last reads that two
  // keys are still ahead of it: its predecessor is not the head, so that predecessor's giving up in turn must
  // make it read again, not hold. Read as the head, it held beside the holder (a surviving mutant of read.ts).
  it("the last reads again when its new predecessor gives up, and holds only after the holder", async () => {
    const line = await holderAndWaiters(fresh(), 3);
    await giveUpOn(line, 1);
    expect(await stillPending(line.waiting[2]!, 300)).toBe(true);
    await giveUpOn(line, 0);
    await holdsAfter(line.holder, line.waiting[2]!);
  });
});

describe("one client's waiters on the line's shared stream (issue 37, finding 1)", () => {
  // Two waiters of one client share the line's stream; each still waits for its own predecessor. On 4e52409 a
  // mutant that took any predecessor's delete seen there for "I am first" (the `wasFirst` condition dropped), or
  // that made a release's own wake-up a no-op (`releasedHere`), passed every mock-backed suite.
  it("a waiter whose predecessor was a waiter that gave up reads the line, waits on behind the holder", async () => {
    const name = fresh();
    const client = backend.client();
    const holder = await (await session(30, client)).mutex(name).lock();
    const giveUp = new AbortController();
    const middle = (await session(30, client)).mutex(name).lock({ signal: giveUp.signal, timeout: 10_000 });
    await untilLineLength(etcd, name, 2);
    const last = (await session(30, client)).mutex(name).lock({ timeout: 10_000 });
    await untilLineLength(etcd, name, 3);
    giveUp.abort();
    expect((await rejection(middle)).code).toBe("ABORTED");
    await holdsAfter(holder, last);
  });

  it("a waiter that read it is not first, then gave up, wakes the one behind it to read, not to hold", async () => {
    // The line: the holder (another client), then three waiters of one client; the first watches on its own, the
    // others on the line's stream. When the first gives up, the second reads that the holder is still ahead: it
    // must not mark its key the head, or its own giving up would let the third hold beside the holder.
    const line = await holderAndWaiters(fresh(), 3, backend.client());
    await giveUpOn(line, 0);
    expect(await stillPending(line.waiting[1]!, 300)).toBe(true);
    await giveUpOn(line, 1);
    await holdsAfter(line.holder, line.waiting[2]!);
  });

  it("a release wakes the client's waiter behind it on its own answer, with every watch stream held back", async () => {
    const watches = heldWatches(backend.fetch);
    const client = backend.client({ fetch: watches.fetch });
    const name = fresh();
    const [a, b, c] = await Promise.all([0, 1, 2].map(() => session(30, client)));
    const first = await a!.mutex(name).lock();
    // b waits alone on a watch of its own; c, the client's second waiter, opens the line's shared watch.
    const second = b!.mutex(name).lock({ timeout: 10_000 });
    await untilLineLength(etcd, name, 2);
    let third: Lock | undefined;
    const thirdCall = c!
      .mutex(name)
      .lock({ timeout: 10_000 })
      .then((lock) => (third = lock));
    await untilLineLength(etcd, name, 3);
    await first.unlock();
    const bLock = await second;
    // From here no watch delivers anything: c can learn that b is gone only from b's release.
    watches.hold();
    await bLock.unlock();
    try {
      await until("c holds with every watch held", 5_000, () => third !== undefined);
    } finally {
      watches.resume();
    }
    await thirdCall;
    expect(third!.held).toBe(true);
    expect((await etcd.range({ prefix: `${name}/` })).kvs.map((kv) => kv.key)).toEqual([third!.key]);
    expect(third!.revision).toBeGreaterThan(bLock.revision);
    await third!.unlock();
  });
});

describe("handoff cost", () => {
  const quiet = useBackend({ dedicated: true });
  const acquiresOnDelete = "the waiter right behind the holder acquires on the delete event, with no read";

  for (const release of ["unlock", "lease revoke"] as const) {
    it(`handoff on ${release}: ${acquiresOnDelete}`, async () => {
      const name = fresh();
      const holderSession = await session(30, quiet.etcd);
      const holder = await holderSession.mutex(name).lock();
      const fetch = recordingFetch(quiet.backend.fetch);
      const waiterSession = await session(30, quiet.backend.client({ fetch }));
      const mark = fetch.mark();
      const acquiring = waiterSession.mutex(name).lock();
      await untilLineLength(quiet.etcd, name, 2);
      expect(await stillPending(acquiring, 100)).toBe(true);
      // Waiting costs the join (a new mutex guesses an empty line: the put alone, refused, then the full join)
      // and one watch on the predecessor; no polling.
      expect(fetch.since(mark)).toEqual(JOIN_OF_NEW_MUTEX_BEHIND_HOLDER.concat("/v3/watch"));
      if (release === "unlock") await holder.unlock();
      else await quiet.etcd.lease.revoke(holderSession.leaseId);
      const lock = await within(5_000, "handoff", acquiring);
      // The holder was the only key ahead: its delete alone makes the waiter first.
      expect(fetch.since(mark)).toEqual(JOIN_OF_NEW_MUTEX_BEHIND_HOLDER.concat("/v3/watch"));
      // The fencing token strictly increases across holders.
      expect(lock.revision).toBeGreaterThan(holder.revision);
      expect((await quiet.etcd.inspectLock(name)).holder).toMatchObject({
        key: lock.key,
        revision: lock.revision,
        leaseId: waiterSession.leaseId,
      });
      await lock.unlock();
      // Before this block's member stops.
      await Promise.all([waiterSession.close(), holderSession.close()]);
    });
  }

  it("a client's waiter that held on the line's stream marks its key the head: the next holds, no read", async () => {
    const name = fresh();
    const holderSession = await session(30, quiet.etcd);
    const holder = await holderSession.mutex(name).lock();
    const fetch = recordingFetch(quiet.backend.fetch);
    const client = quiet.backend.client({ fetch });
    // Three waiters of one client: the first watches on its own, the second and third on the line's stream.
    const sessions = [await session(30, client), await session(30, client), await session(30, client)];
    const waiting: Promise<Lock>[] = [];
    for (const [i, s] of sessions.entries()) {
      waiting.push(s.mutex(name).lock({ timeout: 10_000 }));
      await untilLineLength(quiet.etcd, name, i + 2);
    }
    await holder.unlock();
    await (await within(5_000, "the first waiter", waiting[0]!)).unlock();
    // The second read the line once its predecessor went (that one never marked its key) and, first, marked its own.
    const second = await within(5_000, "the second waiter", waiting[1]!);
    const mark = fetch.mark();
    await second.unlock();
    const third = await within(5_000, "the third waiter", waiting[2]!);
    // Its predecessor was the head: its delete alone (the release's answer) makes the third first.
    expect(fetch.since(mark)).toEqual(["/v3/kv/txn"]);
    expect(third.revision).toBeGreaterThan(second.revision);
    await third.unlock();
    await Promise.all([...sessions, holderSession].map((s) => s.close()));
  });

  it("a waiter further back reads the line once when its predecessor goes, and waits on for the holder", async () => {
    const name = fresh();
    const holderSession = await session(30, quiet.etcd);
    const holder = await holderSession.mutex(name).lock();
    const middleSession = await session(30, quiet.etcd);
    const middle = middleSession.mutex(name).lock({ timeout: 10_000 });
    await untilLineLength(quiet.etcd, name, 2);
    const fetch = recordingFetch(quiet.backend.fetch);
    const lastSession = await session(30, quiet.backend.client({ fetch }));
    const mark = fetch.mark();
    const acquiring = lastSession.mutex(name).lock({ timeout: 10_000 });
    await untilLineLength(quiet.etcd, name, 3);
    expect(await stillPending(acquiring, 100)).toBe(true);
    expect(fetch.since(mark)).toEqual(JOIN_OF_NEW_MUTEX_BEHIND_HOLDER.concat("/v3/watch"));
    // The middle waiter gives up: its predecessor was not the holder, so the last one reads the line once,
    // finds the holder ahead, and watches it.
    const middleFailed = rejection(middle);
    await middleSession.close();
    expect((await middleFailed).code).toBe("SESSION_CLOSED");
    await until("the last waiter watches the holder", 5_000, () => fetch.since(mark).length === 5);
    expect(fetch.since(mark)).toEqual(JOIN_OF_NEW_MUTEX_BEHIND_HOLDER.concat("/v3/watch", "/v3/kv/range", "/v3/watch"));
    expect(await stillPending(acquiring, 100)).toBe(true);
    await holder.unlock();
    const lock = await within(5_000, "handoff", acquiring);
    // Its last read showed the holder as the only key ahead: the holder's delete makes it first, no read.
    expect(fetch.since(mark)).toEqual(JOIN_OF_NEW_MUTEX_BEHIND_HOLDER.concat("/v3/watch", "/v3/kv/range", "/v3/watch"));
    expect(lock.revision).toBeGreaterThan(holder.revision);
    await lock.unlock();
    await Promise.all([lastSession.close(), holderSession.close()]);
  });
});

describe.concurrent("a waiter through an outage that breaks its streams (issue 38)", () => {
  // Its watch gives up after its reconnections and the wait reads its line after a pause instead (wait.ts,
  // afterStreamFailure): it waits out its own timeout, as Go's does, and holds once etcd is back and the holder
  // has gone. On 2b58f09 each failed UNAVAILABLE within the outage, as its streams gave up.
  const waits: Array<[string, (s: Session, name: string) => Promise<{ key: string }>]> = [
    ["a mutex", (s, name) => s.mutex(name).lock({ timeout: 30_000 })],
    ["a semaphore", (s, name) => s.semaphore(name, { permits: 1 }).acquire({ timeout: 30_000 })],
    [
      "a campaign",
      async (s, name) => {
        const election = s.election(name);
        await election.campaign("w", { timeout: 30_000 });
        return { key: election.key! };
      },
    ],
  ];
  const holders: Array<(s: Session, name: string) => Promise<{ key: string; release(): Promise<void> }>> = [
    async (s, name) => {
      const lock = await s.mutex(name).lock();
      return { key: lock.key, release: () => lock.unlock() };
    },
    async (s, name) => {
      const permit = await s.semaphore(name, { permits: 1 }).acquire();
      return { key: permit.key, release: () => permit.release() };
    },
    async (s, name) => {
      const election = s.election(name);
      await election.campaign("h");
      return { key: election.key!, release: () => election.resign() };
    },
  ];

  it.each(waits.map((wait, i) => [...wait, holders[i]!] as const))(
    "%s waits on, reading its line without a loop, and holds once etcd is back",
    // Its streams' reconnections alone take up to about 15 s (pauses drawn up to 2 s, ten of them).
    { timeout: 60_000 },
    async (_, wait, hold) => {
      const name = fresh();
      const holder = await hold(await session(), name);
      const cut = switchableFetch(backend.fetch, { breakStreams: true });
      const fetch = recordingFetch(cut);
      const waiting = wait(await session(30, backend.client({ fetch })), name);
      let settled = false;
      waiting.then(
        () => (settled = true),
        () => (settled = true),
      );
      await untilLineLength(etcd, name, 2);
      expect(await stillPending(waiting, 200)).toBe(true);
      const mark = fetch.mark();
      cut.down = true;
      try {
        // Its streams give up after their reconnections (seconds: each pause drawn up to 2 s); then it reads.
        const reads = () => fetch.since(mark).filter((path) => path === "/v3/kv/range").length;
        await until("the wait reads its line instead", 30_000, () => reads() > 0 || settled, 50);
        expect(await stillPending(waiting, 1_000)).toBe(true);
        // Its read (four attempts a call) is resent while unanswered after growing pauses: about twenty fetches in
        // that second, where a loop would make thousands.
        expect(reads()).toBeLessThan(50);
      } finally {
        cut.down = false;
      }
      expect(await stillPending(waiting, 300)).toBe(true);
      await holder.release();
      const held = await within(5_000, "the waiter, after the outage", waiting);
      expect(await keysUnder(etcd, name)).toEqual([held.key]);
    },
  );
});

// Each waits out a short lease: side by side on etcd, where each wait is a sleep of its own, one at a time on the
// mock, whose clock advance() moves for all.
describeSideBySide("expiry", () => {
  it("a waiter whose lease expires fails with SESSION_EXPIRED, and its key leaves the line", async () => {
    const name = fresh();
    const holder = await (await session(60)).mutex(name).lock();
    const waiterSession = await session(2);
    const createdAt = performance.now();
    const waiting = waiterSession.mutex(name).lock();
    const outcome = waiting.then(
      () => undefined,
      (e: unknown) => ({ error: e, at: performance.now() }),
    );
    await untilLineLength(etcd, name, 2);
    const advancedAt = performance.now();
    await backend.advance(3_500);
    // The server side: the waiter's key goes with its lease.
    await until(
      "waiter key gone",
      EXPIRY_GRACE_MS,
      async () => (await etcd.range({ prefix: `${name}/`, countOnly: true })).count === 1,
    );
    const result = await within(EXPIRY_GRACE_MS + 2_000, "waiter fails", outcome);
    expect(result?.error).toBeInstanceOf(EtcdError);
    expect(result?.error).toMatchObject({ code: "SESSION_EXPIRED" });
    // How promptly: the waiter watches only its predecessor (still there), so it learns of its own key's deletion
    // from its session's deadline, which runs on the real clock (ttl 2 s after the grant was sent), or sooner
    // when a read of the line happens to find its key gone (a watch created after the expiry reads once).
    const sinceCreated = result!.at - createdAt;
    const sinceAdvance = result!.at - advancedAt;
    console.info(
      `[${backend.name}] waiter SESSION_EXPIRED ${Math.round(sinceAdvance)} ms ` +
        `after advance(), ${Math.round(sinceCreated)} ms after its session`,
    );
    expect(sinceCreated).toBeLessThan(2_000 + EXPIRY_GRACE_MS);
    // Renewing an expired session: SESSION_EXPIRED.
    await expect(waiterSession.renew()).rejects.toMatchObject({ code: "SESSION_EXPIRED" });
    expect(holder.held).toBe(true);
    await holder.unlock();
  });

  it(
    "session.renew() after the lease expired on the server → SESSION_EXPIRED, " +
      "and a waiting lock() fails at once with it",
    async () => {
      const name = fresh();
      const holder = await (await session(60)).mutex(name).lock();
      const waiterSession = await session(2);
      const waiting = waiterSession.mutex(name).lock();
      const outcome = waiting.then(
        () => undefined,
        (e: unknown) => e,
      );
      await untilLineLength(etcd, name, 2);
      await backend.advance(3_500);
      await until(
        "waiter key gone",
        EXPIRY_GRACE_MS,
        async () => (await etcd.range({ prefix: `${name}/`, countOnly: true })).count === 1,
      );
      const renewError = await rejection(waiterSession.renew());
      expect(renewError.code).toBe("SESSION_EXPIRED");
      expect(waiterSession.alive).toBe(false);
      // The renewal's verdict reaches the waiter through the session's signal: no further wait.
      expect(await within(500, "waiter after renew", outcome)).toMatchObject({ code: "SESSION_EXPIRED" });
      await holder.unlock();
    },
  );

  it(
    "a holder whose lease expires loses the lock: " + "fenced write refused, the waiter acquires, unlock → LOCK_LOST",
    async () => {
      const name = fresh();
      const resource = `${fresh("res")}/data`;
      const holderSession = await session(2);
      const lost = await holderSession.mutex(name).lock();
      const waiterSession = await session(60);
      const next = waiterSession.mutex(name).lock();
      await untilLineLength(etcd, name, 2);
      await backend.advance(3_500);
      const nextLock = await within(EXPIRY_GRACE_MS + 1_000, "waiter acquires after the holder's lease expired", next);
      expect(nextLock.revision).toBeGreaterThan(lost.revision);
      const stale = await etcd.txn().if(lost.ifHeld()).then(op.put(resource, "stale")).commit();
      expect(stale.succeeded).toBe(false);
      expect(await etcd.get(resource)).toBeUndefined();
      await expect(lost.unlock()).rejects.toMatchObject({ code: "LOCK_LOST" });
      expect((await etcd.inspectLock(name)).holder).toMatchObject({
        key: nextLock.key,
        leaseId: waiterSession.leaseId,
      });
      await nextLock.unlock();
    },
  );
});

describe("election", () => {
  it("campaign order, proclaim/observe, resign hands over, leader()", async () => {
    const name = fresh("election");
    const [s1, s2, s3, watcher] = await Promise.all([session(), session(), session(), session()]);
    const e1 = s1.election(name);
    const e2 = s2.election(name);
    const e3 = s3.election(name);
    expect(await watcher.election(name).leader()).toBeUndefined();

    await e1.campaign("one");
    expect(e1.isLeader).toBe(true);
    const c2 = e2.campaign("two");
    await untilLineLength(etcd, name, 2);
    const c3 = e3.campaign("three");
    await untilLineLength(etcd, name, 3);
    expect(await stillPending(Promise.race([c2, c3]), 100)).toBe(true);

    const leader = await watcher.election(name).leader();
    expect(leader).toMatchObject({ value: "one", leaseId: s1.leaseId, revision: e1.revision, key: e1.key });

    const controller = new AbortController();
    const observed = watcher.election(name).observe({ signal: controller.signal })[Symbol.asyncIterator]();
    const nextLeader = async () => {
      const r = await within(5_000, "observe", observed.next());
      if (r.done) throw new Error("observe ended");
      return r.value;
    };
    /** Through a proxy that holds streams back whole, observe() ends, named, once it gave what the reads showed. */
    const streaming = !holdsStreamsBack(inject("proxy"), inject("proxyConfig"));
    /** The next leader observe() gives, where streams stream. */
    const observes = async (leader: object) => {
      if (streaming) expect(await nextLeader()).toMatchObject(leader);
    };
    try {
      expect(await nextLeader()).toMatchObject({ value: "one", revision: e1.revision });
      await e1.proclaim("one, again");
      if (!streaming) {
        const ended = rejection(
          within(
            5_000,
            "observe",
            (async () => {
              for (;;) await nextLeader();
            })(),
          ),
        );
        expect((await ended).code).toBe("STREAM_HELD_BACK");
      }
      await observes({ value: "one, again", revision: e1.revision });
      expect(await watcher.election(name).leader()).toMatchObject({ value: "one, again" });
      await e1.resign();
      expect(e1.isLeader).toBe(false);
      await within(5_000, "second candidate elected", c2);
      expect(e2.isLeader).toBe(true);
      expect(e2.revision!).toBeGreaterThan(e1.revision ?? 0);
      await observes({ value: "two", leaseId: s2.leaseId });
      expect(await stillPending(c3, 50)).toBe(true);

      // The leader's session ends: the next candidate leads.
      await s2.close();
      await within(5_000, "third candidate elected", c3);
      await observes({ value: "three", leaseId: s3.leaseId });
      expect(await watcher.election(name).leader()).toMatchObject({ value: "three", revision: e3.revision });
      // The old leader's fenced write is refused.
      await expect(e2.proclaim("late")).rejects.toMatchObject({ code: "NOT_LEADER" });
      await e3.resign();
      expect(await watcher.election(name).leader()).toBeUndefined();
      if (!streaming) return;
      // Aborting ends the loop by throwing ABORTED, with the signal's reason as cause.
      const reason = new Error("done observing");
      const pending = observed.next();
      controller.abort(reason);
      const error = await rejection(pending);
      expect(error.code).toBe("ABORTED");
      expect(error.cause).toBe(reason);
    } finally {
      controller.abort();
    }
  });

  it(
    "a candidate still waiting in line is not the leader: isLeader false, " +
      "proclaim → NOT_LEADER, ifLeader() → NOT_LEADER",
    async () => {
      const name = fresh("election");
      const [s1, s2] = await Promise.all([session(), session()]);
      const leader = s1.election(name);
      await leader.campaign("leader");
      const waiting = s2.election(name);
      const campaign = waiting.campaign("candidate");
      await untilLineLength(etcd, name, 2);
      // Give the campaign's own continuation time to run past joining the line.
      expect(await stillPending(campaign, 100)).toBe(true);
      expect(waiting.isLeader).toBe(false);
      await expect(waiting.proclaim("usurper")).rejects.toMatchObject({ code: "NOT_LEADER" });
      expect(() => waiting.ifLeader()).toThrow(expect.objectContaining({ code: "NOT_LEADER" }));
      expect((await s1.election(name).leader())?.value).toBe("leader");
      // A failed proclaim does not withdraw or break the candidacy: it still wins, with its own value.
      await leader.resign();
      await within(5_000, "candidate elected", campaign);
      expect(waiting.isLeader).toBe(true);
      expect(await s1.election(name).leader()).toMatchObject({ value: "candidate", revision: waiting.revision });
      await waiting.proclaim("now leading");
      expect((await s1.election(name).leader())?.value).toBe("now leading");
      await waiting.resign();
      expect(await s1.election(name).leader()).toBeUndefined();
    },
  );
});
