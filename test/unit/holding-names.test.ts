// How an error names what it is about (hold/subject.ts): a holding of each recipe by its kind and name ("read
// lock jobs", "permit of semaphore jobs", "leadership of jobs", "locks a, b"), and an acquisition RBAC refused
// by the grant it needs. On the mock, in manual sessions: a holding whose keys another client deleted learns it
// at its release.
import { describe, expect, it } from "vitest";
import type { Etcd, Session } from "../../src/index.js";
import { rejection, until } from "../support/async.js";
import { permissionDenied } from "../support/gateway.js";
import { mockClient } from "../support/mock.js";

/** Takes a holding of one recipe on `session`, and gives back how to release it. */
type Take = (session: Session) => Promise<() => Promise<unknown>>;

const RECIPES: Array<[string, Take]> = [
  [
    "lock jobs",
    async (s) =>
      (
        (lock) => () =>
          lock.unlock()
      )(await s.mutex("jobs").lock()),
  ],
  [
    "read lock jobs",
    async (s) =>
      (
        (lock) => () =>
          lock.unlock()
      )(await s.rwlock("jobs").readLock()),
  ],
  [
    "write lock jobs",
    async (s) =>
      (
        (lock) => () =>
          lock.unlock()
      )(await s.rwlock("jobs").writeLock()),
  ],
  [
    "permit of semaphore jobs",
    async (s) =>
      (
        (p) => () =>
          p.release()
      )(await s.semaphore("jobs", { permits: 2 }).acquire()),
  ],
  [
    "locks jobs, more",
    async (s) =>
      (
        (locks) => () =>
          locks.unlock()
      )(await s.lockAll(["jobs", "more"])),
  ],
  [
    "leadership of jobs",
    async (s) => {
      const election = s.election("jobs");
      await election.campaign("me");
      const signal = election.signal!;
      // resign() is quiet about a leadership already gone, as Go's is. A proclamation finds it gone (NOT_LEADER);
      // the leadership's signal says why.
      return async () => {
        expect((await rejection(election.proclaim("still me"))).code).toBe("NOT_LEADER");
        await until("the leadership's end", 1_000, () => signal.aborted);
        throw signal.reason;
      };
    },
  ],
];

async function manualSession(etcd: Etcd): Promise<Session> {
  return etcd.session({ ttl: 30, keepAlive: "manual" });
}

describe("an error names the holding it is about", () => {
  it.each(RECIPES)("%s: lost at its release once another client deleted its keys", async (what, take) => {
    const { etcd } = mockClient();
    const release = await take(await manualSession(etcd));
    await etcd.delete({ prefix: "jobs/" });
    await etcd.delete({ prefix: "more/" });
    const error = await rejection(release());
    expect(error.code).toBe("LOCK_LOST");
    expect(error.message).toMatch(new RegExp(`^${what} was lost: `));
  });
});

describe("an acquisition refused by etcd's RBAC", () => {
  it("names the holding and the grant it needs: readwrite on each name's prefix", async () => {
    const { etcd } = mockClient(
      {},
      {
        through: async (input, init, forward) =>
          input.endsWith("/v3/kv/txn") ? (permissionDenied() as never) : forward(input, init),
      },
    );
    const error = await rejection((await manualSession(etcd)).lockAll(["jobs", "more"]));
    expect(error.code).toBe("PERMISSION_DENIED");
    expect(error.message).toContain("locks jobs, more");
    expect(error.message).toContain('readwrite on prefix "jobs/" and "more/"');
  });
});
