// Handoff cost: how many requests, and how long, between a release and the next holder's acquisition.
// A watch-mode waiter must wake on its predecessor's delete event, and need no read when that was the holder
// (one when it was a waiter ahead that gave up, see conformance-locks); a poll-mode waiter must never open a
// watch.
//
// On a member of its own: when other writes move the store on between a waiter's join and its watch's
// creation, the waiter rightly reads the line once more, so exact request counts need a quiet member.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renewAhead } from "../../src/api/watch.js";
import type { EtcdOptions, Lock, Session } from "../../src/index.js";
import type { EtcdOperator as Etcd } from "../../src/operate/index.js";
import { SECOND_WATCH_AFTER, WAIT_IDLE_TIMEOUT } from "../../src/lock/line/wait.js";
import { sleep, stillPending, until, within } from "../support/async.js";
import { client, recordingFetch, uniqueName } from "../support/etcd.js";
import { startEtcd, type EtcdMember } from "./harness.js";

let member: EtcdMember;
let etcd: Etcd;
/** A client on this file's member. */
const onMember = (options: Partial<EtcdOptions> = {}) => client({ ...options, endpoints: member.clientUrl });

beforeAll(async () => {
  member = await startEtcd();
  etcd = onMember();
});

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}
const sessions: Session[] = [];

afterAll(async () => {
  await Promise.all(sessions.map((s) => s.close().catch(() => {})));
  await member?.stop();
});

/** Manual sessions: no background keep-alive requests in the request logs. */
async function manualSession(c: Etcd = etcd, ttl = 30): Promise<Session> {
  const session = await c.session({ ttl, keepAlive: "manual" });
  sessions.push(session);
  return session;
}

type Release = "unlock" | "session.close" | "lease.revoke";

async function release(kind: Release, lock: Lock, session: Session): Promise<void> {
  if (kind === "unlock") await lock.unlock();
  else if (kind === "session.close") await session.close();
  else await etcd.lease.revoke(session.leaseId);
}

describe("uncontended", () => {
  it("lock is exactly one request (/v3/kv/txn) and unlock exactly one (/v3/kv/txn)", async () => {
    const fetch = recordingFetch();
    const c = onMember({ fetch });
    const session = await manualSession(c);
    const mutex = session.mutex(uniqueName());

    let mark = fetch.mark();
    const lock = await mutex.lock();
    expect(fetch.since(mark)).toEqual(["/v3/kv/txn"]);

    mark = fetch.mark();
    await lock.unlock();
    expect(fetch.since(mark)).toEqual(["/v3/kv/txn"]);

    // A second round on the same session costs the same.
    mark = fetch.mark();
    const again = await mutex.lock();
    await again.unlock();
    expect(fetch.since(mark)).toEqual(["/v3/kv/txn", "/v3/kv/txn"]);
  });
});

describe.each<Release>(["unlock", "session.close", "lease.revoke"])("watch-mode handoff on %s", (kind) => {
  it("the waiter right behind the holder acquires on the delete event alone, promptly", async () => {
    const latencies: number[] = [];
    for (let run = 0; run < 3; run++) {
      const name = uniqueName();
      const holderSession = await manualSession();
      const holder = await holderSession.mutex(name).lock();

      const fetch = recordingFetch();
      const waiterSession = await manualSession(onMember({ fetch }));
      const mark = fetch.mark();
      const pending = waiterSession.mutex(name).lock({ timeout: 20_000 });
      // Joining: the put alone (a new mutex guesses an empty line), refused, then the full join; then the
      // watch on the predecessor (and nothing else while waiting).
      await until("waiter opened its watch", 5_000, () => fetch.since(mark).includes("/v3/watch"));
      await sleep(150);
      expect(fetch.since(mark)).toEqual(["/v3/kv/txn", "/v3/kv/txn", "/v3/watch"]);
      expect(await stillPending(pending, 50)).toBe(true);

      const afterJoin = fetch.mark();
      const releasedAt = performance.now();
      await release(kind, holder, holderSession);
      const lock = await within(5_000, "waiter acquisition", pending);
      latencies.push(performance.now() - releasedAt);

      expect(fetch.since(afterJoin)).toEqual([]);
      expect(lock.held).toBe(true);
      expect(lock.revision).toBeGreaterThan(holder.revision);
      const info = await etcd.inspectLock(name);
      expect(info.holder?.key).toBe(lock.key);
      await lock.unlock();
    }
    console.info(`handoff on ${kind}: latencies ${latencies.map(Math.round).join(", ")} ms`);
    // Event driven: far below any poll interval (the next test polls every 1 500 ms).
    expect(median(latencies)).toBeLessThan(500);
  });
});

describe("a hot lock in one process", () => {
  // Before: every wait opened a watch of its own and tore its connection down on acquisition, one connect and
  // one abort per handoff, most of the client's work on a hot lock.
  it("the waiters of one client share one watch stream across many handoffs, each acquisition exclusive", async () => {
    const fetch = recordingFetch();
    const shared = onMember({ fetch });
    const name = uniqueName();
    const sessions = await Promise.all(Array.from({ length: 4 }, () => shared.session({ ttl: 30 })));
    const mark = fetch.mark();
    const startedAt = performance.now();
    let holders = 0;
    /** Acquisitions that waited long enough to open a second watch beside the shared one (a stalled machine). */
    let slow = 0;
    let most = 0;
    const order: number[] = [];
    /** When each lock() call ran: a line with no call under way for the shared stream's linger closes it. */
    const calls: Array<[from: number, to: number]> = [];
    await Promise.all(
      sessions.map(async (session) => {
        for (let i = 0; i < 15; i++) {
          const calledAt = performance.now();
          const lock = await session.mutex(name).lock({ timeout: 10_000 });
          calls.push([calledAt, performance.now()]);
          if (performance.now() - calledAt > SECOND_WATCH_AFTER) slow++;
          most = Math.max(most, ++holders);
          order.push(lock.revision);
          await sleep(1);
          holders--;
          await lock.unlock();
        }
      }),
    );
    expect(order).toHaveLength(60);
    expect(most).toBe(1);
    // Fencing tokens in acquisition order: first come, first served.
    expect(order).toEqual([...order].sort((a, b) => a - b));
    const elapsed = performance.now() - startedAt;
    // One stream for all waits, not one per acquisition: the first waiter's own watch (it was alone in the
    // line then), the shared stream, and the shared stream's renewals (etcd ends every stream at the deadline
    // the SDK asks for, however busy; each renewal resumes from a revision).
    // (A holding that lasts a second, on a machine stalled that long, follows its key on a watch of its own, which
    // carries puts: those are not waits.)
    const watches = fetch.calls
      .slice(mark)
      .filter((call) => call.path === "/v3/watch" && String(call.body).includes("NOPUT"));
    const renewals = watches.filter((call) => String(call.body).includes("start_revision")).length;
    expect(watches.length - renewals).toBeGreaterThanOrEqual(1);
    // On a loaded machine the line can go without any lock() call under way for longer than the shared stream
    // lingers (every session between its unlock and its next call): the next waiter then opens it again.
    expect(watches.length - renewals).toBeLessThanOrEqual(2 + slow + lulls(calls, 200));
    expect(renewals).toBeLessThanOrEqual(Math.floor(elapsed / (WAIT_IDLE_TIMEOUT - renewAhead(WAIT_IDLE_TIMEOUT))) + 1);
    // A waiter knows the key ahead of it was first when a waiter of this client found it first: its delete
    // alone makes it first. Before, each waiter two or more places back read the line once per handoff, on
    // the handoff's path (about 45 reads here); a read now only closes a gap the stream cannot rule out.
    const reads = fetch.since(mark).filter((path) => path === "/v3/kv/range").length;
    expect(reads).toBeLessThanOrEqual(6);
    await Promise.all(sessions.map((session) => session.close()));
  });
});

describe("waiters alone in their processes", () => {
  // A line's shared stream carries every delete of the line: opened for a waiter alone in its process (the
  // serverless case), every release would reach every waiting process.
  it("each watches only its predecessor's key, so a release reaches one process", async () => {
    const name = uniqueName();
    const holderSession = await manualSession();
    const holder = await holderSession.mutex(name).lock();
    const fetches = [recordingFetch(), recordingFetch()];
    const waiters = await Promise.all(fetches.map((fetch) => manualSession(onMember({ fetch }))));
    const watchBody = (i: number) => fetches[i]!.calls.find((call) => call.path === "/v3/watch")?.body;
    const first = waiters[0]!.mutex(name).lock({ timeout: 10_000 });
    await until("the first waiter's watch", 5_000, () => watchBody(0) !== undefined);
    const second = waiters[1]!.mutex(name).lock({ timeout: 10_000 });
    await until("the second waiter's watch", 5_000, () => watchBody(1) !== undefined);
    const watched = [0, 1].map(
      (i) =>
        (JSON.parse(String(watchBody(i))) as { create_request: { key: string; range_end?: string } }).create_request,
    );
    expect(watched.map((w) => w.range_end)).toEqual([undefined, undefined]);
    // The second waits for the first waiter's own key.
    expect(atob(watched[0]!.key)).toBe(holder.key);
    expect(atob(watched[1]!.key)).toMatch(new RegExp(`^${name}/${waiters[0]!.leaseHex}_[0-9a-f]{16}$`));
    await holder.unlock();
    const firstLock = await within(5_000, "the first waiter", first);
    await firstLock.unlock();
    const secondLock = await within(5_000, "the second waiter", second);
    expect(secondLock.revision).toBeGreaterThan(firstLock.revision);
    await secondLock.unlock();
  });
});

describe("poll mode", () => {
  it("acquires after the release by repeated reads, never opening a watch", async () => {
    const name = uniqueName();
    const holderSession = await manualSession();
    const holder = await holderSession.mutex(name).lock();

    const fetch = recordingFetch();
    const waiterSession = await manualSession(onMember({ fetch }));
    const mark = fetch.mark();
    const pending = waiterSession.mutex(name).lock({ wait: "poll", pollInterval: 200, timeout: 20_000 });
    await sleep(1_100);
    expect(await stillPending(pending, 0)).toBe(true);
    await holder.unlock();
    const lock = await within(5_000, "poll-mode acquisition", pending);

    const paths = fetch.since(mark);
    // The join: the put alone (refused: the line is busy), then the full join.
    expect(paths.slice(0, 2)).toEqual(["/v3/kv/txn", "/v3/kv/txn"]);
    expect(paths).not.toContain("/v3/watch");
    // ~1.1 s of waiting at 200 ms per poll: several reads, every one of them a range.
    expect(paths.slice(2).every((p) => p === "/v3/kv/range")).toBe(true);
    expect(paths.length - 2).toBeGreaterThanOrEqual(3);
    expect(lock.held).toBe(true);
    await lock.unlock();
  });

  it("a long poll interval is what bounds the handoff (contrast with watch mode)", async () => {
    const latencies: number[] = [];
    for (let run = 0; run < 3; run++) {
      const name = uniqueName();
      const holderSession = await manualSession();
      const holder = await holderSession.mutex(name).lock();
      const waiterSession = await manualSession();
      const pending = waiterSession.mutex(name).lock({ wait: "poll", pollInterval: 1_500, timeout: 20_000 });
      // Release at a different phase of the poll cycle in each run.
      await sleep(100 + run * 500);
      const releasedAt = performance.now();
      await holder.unlock();
      const lock = await within(5_000, "poll acquisition", pending);
      latencies.push(performance.now() - releasedAt);
      await lock.unlock();
    }
    console.info(`poll-mode handoff (1500 ms interval): latencies ${latencies.map(Math.round).join(", ")} ms`);
    // Never later than one interval plus slack; on average it has to wait for the next poll.
    expect(Math.max(...latencies)).toBeLessThan(1_500 + 1_500);
    expect(latencies.reduce((a, b) => a + b, 0) / latencies.length).toBeGreaterThan(200);
  });
});

/** Gaps longer than `ms` in which none of `calls` ([from, to] each) was under way. */
function lulls(calls: ReadonlyArray<readonly [number, number]>, ms: number): number {
  let count = 0;
  let until = Number.NEGATIVE_INFINITY;
  for (const [from, to] of [...calls].sort((a, b) => a[0] - b[0])) {
    if (until !== Number.NEGATIVE_INFINITY && from - until > ms) count++;
    until = Math.max(until, to);
  }
  return count;
}
