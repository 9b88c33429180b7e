// A member that stalls without closing its connections (a paused VM, a disk stall), on the mock and on real etcd:
// the waiter's client reaches the store through two endpoints, the first of which stalls (`stallingEndpoints`:
// requests to it go unanswered, the streams open through it go silent). The cases and the bound of
// test/etcd/stalled-member.test.ts, which pauses a real member of a cluster; here also in the fast suites, which
// mutation testing runs: a waiter's backups against a silent stream (its second watch after a second, the gap
// read that closes it, the look again elsewhere further back) decide how soon a free lock is taken.
import { expect, it } from "vitest";
import type { Etcd, Lock, Session } from "../../src/index.js";
import { sleep, until, within } from "../support/async.js";
import {
  freshNames,
  type RecordedCall,
  type RecordingFetch,
  recordingFetch,
  untilLineLength,
  useSessions,
} from "../support/etcd.js";
import { type StallingEndpoints, stallingEndpoints } from "../support/outage.js";
import { describeSideBySide, useBackend } from "./backend.js";

const { backend, etcd } = useBackend();
// After useBackend: the sessions close before the backend does.
const open = useSessions(etcd, { keepAlive: "manual" });
const fresh = freshNames("stalled");

/** From the holder's release to the waiter's acquisition: a second's wait, its second watch, one read. */
const BOUND_MS = 1_500;

const session = (client: Etcd = etcd): Promise<Session> => open({ ttl: 30 }, client);

/** A waiter's client, through two endpoints the first of which can stall; its fetch records its requests. */
function stallingClient(): { client: Etcd; stalling: StallingEndpoints; fetch: RecordingFetch } {
  const stalling = stallingEndpoints(backend.fetch, backend.options().endpoints[0]!);
  const fetch = recordingFetch(stalling.fetch);
  return { client: backend.client({ endpoints: [...stalling.endpoints], fetch, timeout: 5_000 }), stalling, fetch };
}

/**
 * The first endpoint, which the waiters' calls and watches go through, stalls while `ready` runs; `ready` returns
 * the release that frees `waiting`'s turn (through a client that does not stall), whose lock must then be taken
 * within the bound, with every watch opened through the stalled endpoint cut as the wait ended.
 */
async function stallsWhileReleasing(
  { stalling, fetch }: { stalling: StallingEndpoints; fetch: RecordingFetch },
  waiting: Promise<Lock>,
  ready: () => Promise<() => Promise<unknown>>,
): Promise<void> {
  // The waiters' watches are open through the first endpoint by now.
  await sleep(100);
  stalling.stall();
  try {
    const release = await ready();
    const released = performance.now();
    await release();
    const lock = await within(10_000, "the waiter takes the free lock", waiting);
    const ms = performance.now() - released;
    expect(ms, `taken ${Math.round(ms)} ms after the release`).toBeLessThan(BOUND_MS);
    const watches = fetch.calls.filter((call) => call.path === "/v3/watch" && call.endpoint === stalling.endpoints[0]);
    expect(watches.length, "watches through the stalled endpoint").toBeGreaterThan(0);
    // The watches of a predecessor's key it opened there are cut as the wait ends; the line's stream its client's
    // waiters shared, once found silent or left unused.
    const through = () =>
      fetch.calls.filter((call) => call.path === "/v3/watch" && call.endpoint === stalling.endpoints[0]);
    const open = (calls: RecordedCall[]) => calls.filter((call) => !call.cut).length;
    expect(through().length, "watches through the stalled endpoint").toBeGreaterThan(0);
    // A key's watch names its key alone; the line's stream, a range.
    const keyWatches = (calls: RecordedCall[]) => calls.filter((call) => !String(call.body).includes("range_end"));
    expect(open(keyWatches(through())), "key watches still open").toBe(0);
    await until("every watch through the stalled endpoint is cut", 5_000, () => open(through()) === 0);
    expect(lock.held).toBe(true);
    await lock.unlock();
  } finally {
    stalling.resume();
  }
}

describeSideBySide("a waiter whose watch runs through an endpoint that stalls", () => {
  for (const [when, waitedMs] of [
    ["after it has waited a while (its second watch hears the release)", 1_200],
    ["right after it joined (the read closing its second watch's gap finds it)", 200],
  ] as const) {
    it(`released ${when}: takes the free lock within ${BOUND_MS} ms`, async () => {
      const name = fresh();
      const holder = await (await session()).mutex(name).lock();
      const waiter = stallingClient();
      const waiting = (await session(waiter.client)).mutex(name).lock({ timeout: 20_000 });
      await untilLineLength(etcd, name, 2);
      await stallsWhileReleasing(waiter, waiting, async () => {
        await sleep(waitedMs);
        return () => holder.unlock();
      });
    });
  }

  it(`two back, the one ahead holding briefly: takes the free lock within ${BOUND_MS} ms`, async () => {
    const name = fresh();
    const holder = await (await session()).mutex(name).lock();
    const middle = (await session()).mutex(name).lock({ timeout: 20_000 });
    await untilLineLength(etcd, name, 2);
    const waiter = stallingClient();
    const waiting = (await session(waiter.client)).mutex(name).lock({ timeout: 20_000 });
    await untilLineLength(etcd, name, 3);
    await stallsWhileReleasing(waiter, waiting, async () => {
      await sleep(200);
      await holder.unlock();
      const next = await within(10_000, "the middle waiter takes the lock", middle);
      return () => next.unlock();
    });
  });

  it(`five back, alone in its client, four ahead passing: takes the free lock within ${BOUND_MS} ms`, async () => {
    const name = fresh();
    const holder = await (await session()).mutex(name).lock();
    // Four waiters ahead, each alone in its client: a lone waiter watches its predecessor's key alone.
    const ahead: Array<Promise<Lock>> = [];
    for (let i = 0; i < 4; i++) {
      ahead.push((await session(backend.client())).mutex(name).lock({ timeout: 20_000 }));
      await untilLineLength(etcd, name, i + 2);
    }
    // Five keys ahead when it joins: too far back for a second watch; it reads its line again elsewhere.
    const waiter = stallingClient();
    const waiting = (await session(waiter.client)).mutex(name).lock({ timeout: 20_000 });
    await untilLineLength(etcd, name, 6);
    await stallsWhileReleasing(waiter, waiting, async () => {
      await sleep(200);
      let last: Lock = holder;
      for (const next of ahead) {
        await last.unlock();
        last = await within(10_000, "the next waiter ahead takes the lock", next);
      }
      return () => last.unlock();
    });
  });

  it(`its client's second waiter, on the line's shared stream: takes the free lock within ${BOUND_MS} ms`, async () => {
    const name = fresh();
    const holder = await (await session()).mutex(name).lock();
    const waiter = stallingClient();
    const firstSession = await session(waiter.client);
    const first = firstSession.mutex(name).lock({ timeout: 20_000 });
    await untilLineLength(etcd, name, 2);
    // The client's second waiter in the line opens the line's stream and waits on it.
    const waiting = (await session(waiter.client)).mutex(name).lock({ timeout: 20_000 });
    await untilLineLength(etcd, name, 3);
    await stallsWhileReleasing(waiter, waiting, async () => {
      await sleep(200);
      await holder.unlock();
      await within(10_000, "the client's first waiter takes the lock", first);
      // Its own release would go through the stalled endpoint: its lease ends from elsewhere.
      return () => etcd.lease.revoke(firstSession.leaseId);
    });
  });
});
