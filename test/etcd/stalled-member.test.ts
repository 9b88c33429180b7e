// A member that stalls without closing its connections (a paused VM, a disk stall: SIGSTOP here) while a
// waiter's watch runs through it. The waiter must still take the free lock within 1.5 s of its release: near
// the front, a wait that has lasted a second opens a second watch on another endpoint, which hears the
// release; a release before that is found by the read that closes the second watch's gap. Also for a waiter
// two back whose predecessor takes the lock and releases it at once, before its own watch showed a departure
// (a chaos run: 3.2 s), and for a lone waiter five back whose four predecessors pass at once (a chaos run:
// 3.3 s), which reads the line again elsewhere after a second. Whichever watch or read ends the wait, the
// client has cut every watch the waiter opened through the stalled member by then. On a 3-member
// cluster of the project's version, member 1 leading: a stalled leader is an election, which stalls every
// write (the holder's release too), not the waiter's watch.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Etcd, Lock } from "../../src/index.js";
import { sleep, until, within } from "../support/async.js";
import { client, type RecordingFetch, recordingFetch, uniqueName, untilLineLength } from "../support/etcd.js";
import { type EtcdCluster, makeLeader, startCluster } from "./harness.js";

/** The bound the waiter must meet, from the holder's release to its own acquisition. */
const BOUND_MS = 1_500;

let cluster: EtcdCluster;

beforeAll(async () => {
  cluster = await startCluster(3);
}, 60_000);

afterAll(async () => {
  for (const member of cluster?.members ?? []) {
    try {
      process.kill(member.pid, "SIGCONT");
    } catch {}
  }
  await cluster?.stop();
});

/**
 * Member 1 leads, once the cluster has a leader: a member that was paused past the election timeout may call an
 * election when it resumes (etcd 3.4 has no pre-vote by default), so each case waits for a settled leader.
 */
async function member1Leads(): Promise<void> {
  await until(
    "member 1 leads",
    15_000,
    () =>
      makeLeader(cluster, 1).then(
        () => true,
        () => false,
      ),
    200,
  );
}

/** A client whose calls and watches go to `first` while it answers, the others after it. */
function through(first: number, fetch?: RecordingFetch): Etcd {
  const { endpoints } = cluster;
  return client({ endpoints: [...endpoints.slice(first), ...endpoints.slice(0, first)], timeout: 5_000, fetch });
}

/** A manual session whose calls and watches go to member `first` first. */
const sessionThrough = (first: number, fetch?: RecordingFetch) =>
  through(first, fetch).session({ ttl: 30, keepAlive: "manual" });

/** The waiter's client: its fetch records its watches. */
async function waiterThrough0() {
  const fetch = recordingFetch();
  return { fetch, session: await sessionThrough(0, fetch) };
}

/**
 * Member 0, which the waiter's calls and watch go through, stops (SIGSTOP keeps every connection open) while
 * `release` runs; `release` returns the lock whose unlock frees the waiter's turn, and the waiter must then
 * take the free lock within the bound, having cut the watches it opened through member 0 (`fetch`: its client's).
 */
async function member0Stalls(
  waiting: Promise<Lock>,
  fetch: RecordingFetch,
  release: () => Promise<Lock>,
): Promise<void> {
  const paused = cluster.members[0]!;
  // The waiter's watch is open through member 0 by now.
  await sleep(100);
  process.kill(paused.pid, "SIGSTOP");
  try {
    const last = await release();
    const released = performance.now();
    await last.unlock();
    const lock = await within(10_000, "the waiter takes the free lock", waiting);
    const ms = performance.now() - released;
    expect(ms, `taken ${Math.round(ms)} ms after the release`).toBeLessThan(BOUND_MS);
    // The watch that lost the race is cut as the wait ends, not left to its idle timeout on a stalled member.
    const member0 = new URL(paused.clientUrl).origin;
    const watches = fetch.calls.filter((call) => call.path === "/v3/watch" && call.endpoint === member0);
    expect(watches.length, "watches through member 0").toBeGreaterThan(0);
    expect(watches.filter((call) => !call.cut).length, "watches through member 0 still open").toBe(0);
    expect(lock.held).toBe(true);
    await lock.unlock();
  } finally {
    process.kill(paused.pid, "SIGCONT");
  }
}

describe.each([
  ["after the waiter has waited a while", 1_200],
  ["right after the waiter joined", 200],
])("a waiter whose watch runs through a member that stalls, released %s", (_when, waitedMs) => {
  it(`takes the free lock within ${BOUND_MS} ms of the release`, async () => {
    await member1Leads();
    const name = uniqueName("stalled");
    const holderSession = await sessionThrough(1);
    const holder = await holderSession.mutex(name).lock();
    const { fetch, session: waiterSession } = await waiterThrough0();
    const waiting = waiterSession.mutex(name).lock({ timeout: 20_000 });
    await untilLineLength(through(1), name, 2);
    await member0Stalls(waiting, fetch, async () => {
      await sleep(waitedMs);
      return holder;
    });
    await Promise.all([holderSession.close(), waiterSession.close()]);
  });
});

describe("a waiter two back, its watch through a member that stalls, the one ahead of it holding briefly", () => {
  it(`takes the free lock within ${BOUND_MS} ms of the release`, async () => {
    await member1Leads();
    const name = uniqueName("stalled-two-back");
    const holderSession = await sessionThrough(1);
    const holder = await holderSession.mutex(name).lock();
    const middleSession = await sessionThrough(1);
    const middle = middleSession.mutex(name).lock({ timeout: 20_000 });
    await untilLineLength(through(1), name, 2);
    // The waiter watches the middle waiter's key.
    const { fetch, session: waiterSession } = await waiterThrough0();
    const waiting = waiterSession.mutex(name).lock({ timeout: 20_000 });
    await untilLineLength(through(1), name, 3);
    await member0Stalls(waiting, fetch, async () => {
      await sleep(200);
      await holder.unlock();
      return within(10_000, "the middle waiter takes the lock", middle);
    });
    await Promise.all([holderSession.close(), middleSession.close(), waiterSession.close()]);
  });
});

describe("a waiter five back, alone in its process, its watch through a member that stalls, four ahead passing", () => {
  it(`takes the free lock within ${BOUND_MS} ms of the release`, async () => {
    await member1Leads();
    const name = uniqueName("stalled-five-back");
    const sessions = [await sessionThrough(1)];
    const holder = await sessions[0]!.mutex(name).lock();
    // Four waiters ahead, each alone in its session (a lone waiter watches its predecessor's key alone).
    const ahead: Array<Promise<Lock>> = [];
    for (let i = 0; i < 4; i++) {
      sessions.push(await sessionThrough(1));
      ahead.push(sessions.at(-1)!.mutex(name).lock({ timeout: 20_000 }));
      await untilLineLength(through(1), name, i + 2);
    }
    // Five keys ahead when it joins: too far back for the second watch at first (a chaos run: 3.3 s).
    const { fetch, session: waiterSession } = await waiterThrough0();
    sessions.push(waiterSession);
    const waiting = waiterSession.mutex(name).lock({ timeout: 20_000 });
    await untilLineLength(through(1), name, 6);
    await member0Stalls(waiting, fetch, async () => {
      await sleep(200);
      let last: Lock = holder;
      for (const next of ahead) {
        await last.unlock();
        last = await within(10_000, "the next waiter ahead takes the lock", next);
      }
      return last;
    });
    await Promise.all(sessions.map((session) => session.close()));
  });
});
