// The channels cost nothing when nobody listens: the runtime's module is asked for once, and a call with no
// subscriber is handed back untouched (no context object, no tracePromise). A runtime without
// diagnostics_channel runs every call unchanged.
import dc from "node:diagnostics_channel";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EtcdEvent } from "../../src/index.js";
import { sleep } from "../support/async.js";
import { logChannels } from "../support/channels.js";
import { mockClient } from "../support/mock.js";

type Channels = typeof import("../../src/events/channels.js");

/** A fresh copy of the channels module (its memo of the runtime's module is per copy). */
async function freshChannels(): Promise<Channels> {
  vi.resetModules();
  return import("../../src/events/channels.js");
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("channels with nobody listening", () => {
  it("hand the call back untouched, build no context, and ask the runtime for the module once", async () => {
    const load = vi.spyOn(process, "getBuiltinModule");
    const lock = dc.tracingChannel("etcd-edge:lock");
    const request = dc.tracingChannel("etcd-edge:request");
    const traced = [vi.spyOn(lock, "tracePromise"), vi.spyOn(request, "tracePromise")];
    const { traceLock, traceRequest, traceRelease, traceWithLock, startingAcquisition } = await freshChannels();
    for (let i = 0; i < 3; i++) {
      const pending = Promise.resolve({ revision: 1 });
      // The very promise the call made: nothing wrapped it.
      expect(
        traceLock("lock", "x", {}, () => {
          // No context was made for an Acquisition to find.
          expect(startingAcquisition()).toBeUndefined();
          return pending;
        }),
      ).toBe(pending);
      const answer = Promise.resolve("answer");
      expect(
        traceRequest(
          { path: "/v3/kv/range", tries: 0, endpoint: "http://e", status: 0, background: false },
          () => answer,
        ),
      ).toBe(answer);
      const done = Promise.resolve();
      expect(traceRelease({ kind: "lock", name: "x" }, 1, 0, () => done)).toBe(done);
      expect(traceWithLock("lock", ["a", "b"], () => answer)).toBe(answer);
    }
    for (const spy of traced) expect(spy).not.toHaveBeenCalled();
    expect(load.mock.calls).toEqual([["node:diagnostics_channel"]]);
  });

  it("in a runtime without diagnostics_channel, run every call unchanged and publish nothing", async () => {
    const load = vi.spyOn(process, "getBuiltinModule").mockImplementation((() => undefined) as never);
    const log = logChannels();
    try {
      const channels = await freshChannels();
      const pending = Promise.resolve({ revision: 7 });
      expect(channels.traceLock("lock", "x", {}, () => pending)).toBe(pending);
      channels.publishSessionLost("1", "SESSION_EXPIRED");
      channels.publishLockEnd("lock.lost", { kind: "lock", name: "x" }, 7, 0);
      channels.publishLockEnd("lock.released", { kind: "lock", name: "x" }, 7, 0);
      channels.publishWatchReconnect(undefined, "UNAVAILABLE");
      expect(channels.diagnostics()).toBeUndefined();
      expect(log.seen).toEqual([]);
      expect(load).toHaveBeenCalled();
    } finally {
      log.stop();
    }
  });
});

describe("channels with a subscriber", () => {
  it("trace an acquisition: kind, name, token and outcome; the holding itself never reaches the context", async () => {
    const log = logChannels();
    try {
      const { traceLock, traceWaiting, startingAcquisition } = await freshChannels();
      const holding = { revision: 42, toJSON: () => ({ secret: "s3cr3t" }) };
      const got = await traceLock("permit", "sem", { timeout: 0 }, async () => {
        const context = startingAcquisition();
        await Promise.resolve();
        traceWaiting(context, 3);
        return holding;
      });
      expect(got).toBe(holding);
      expect(log.events("lock")).toEqual(["start", "end", "asyncStart", "asyncEnd"]);
      expect(log.seen.at(-1)!.message).toEqual({
        kind: "semaphore",
        name: "sem",
        tryOnly: true,
        waited: true,
        position: 3,
        outcome: "acquired",
        token: 42,
        result: undefined,
      });
      expect(log.seen.map((s) => s.text).join(" ")).not.toContain("s3cr3t");
    } finally {
      log.stop();
    }
  });

  it("trace a lock that waited: waited, and its place in line when it joined; one that did not, neither", async () => {
    const log = logChannels();
    try {
      const { etcd } = mockClient();
      const holder = await (await etcd.session({ ttl: 30 })).mutex("jobs").lock();
      const waiting = (await etcd.session({ ttl: 30 })).mutex("jobs").lock({ timeout: 5_000 });
      await sleep(50);
      await holder.unlock();
      const next = await waiting;
      await next.unlock();
      const ends = log.seen.filter((s) => s.event === "lock:asyncEnd").map((s) => s.message);
      expect(ends).toHaveLength(2);
      expect(ends[0]).toMatchObject({ name: "jobs", token: holder.revision });
      expect(ends[0]!.waited).toBeUndefined();
      expect(ends[1]).toMatchObject({ name: "jobs", token: next.revision, waited: true, position: 1 });
    } finally {
      log.stop();
    }
  });

  type Session = Awaited<ReturnType<ReturnType<typeof mockClient>["etcd"]["session"]>>;
  /** Takes `name` in `session`: its fencing token, and what ends the holding. */
  type Take = (session: Session, name: string) => Promise<{ token: number; end: () => Promise<void> }>;
  const held = (h: { revision: number; unlock?: () => Promise<void>; release?: () => Promise<void> }) => ({
    token: h.revision,
    end: () => (h.unlock ?? h.release)!.call(h),
  });
  const write: Take = (s, name) => s.rwlock(name).writeLock().then(held);
  const read: Take = (s, name) => s.rwlock(name).readLock().then(held);
  const permit: Take = (s, name) => s.semaphore(name, { permits: 1 }).acquire().then(held);
  const locks: Take = (s, name) => s.lockAll([name, `${name}-b`]).then(held);
  /** `name` and `${name}-b` held by two locks, released one after the other: a multi-lock waits twice. */
  const apart: Take = async (s, name) => {
    const [a, b] = [await s.mutex(name).lock(), await s.mutex(`${name}-b`).lock()];
    return { token: a.revision, end: () => a.unlock().then(() => sleep(50).then(() => b.unlock())) };
  };
  const leadership: Take = async (s, name) => {
    const election = s.election(name);
    await election.campaign("v");
    return { token: election.revision!, end: () => election.resign() };
  };

  it.each([
    ["a read lock", "read", read, write, { kind: "read", name: "jobs" }],
    ["a write lock", "write", write, write, { kind: "write", name: "jobs", position: 1 }],
    ["a permit", "semaphore", permit, permit, { kind: "permit", name: "jobs", position: 1 }],
    ["locks", "lockAll", locks, locks, { kind: "locks", name: "jobs, jobs-b" }],
    ["locks, held apart,", "lockAll", locks, apart, { kind: "locks", name: "jobs, jobs-b" }],
    ["leadership", "election", leadership, leadership, { kind: "leadership", name: "jobs", position: 1 }],
  ])(
    "trace %s that waited as a %s, with its name and token; onEvent told it waits",
    async (_, traced, take, block, is) => {
      const log = logChannels();
      try {
        const events: EtcdEvent[] = [];
        const { etcd } = mockClient({ onEvent: (event) => void events.push(event) });
        const holder = await block(await etcd.session({ ttl: 30 }), "jobs");
        const waiting = take(await etcd.session({ ttl: 30 }), "jobs");
        await sleep(50);
        await holder.end();
        const next = await waiting;
        await next.end();
        const ends = log.seen.filter((s) => s.event === "lock:asyncEnd").map((s) => s.message);
        const position = (is as { position?: number }).position;
        expect(ends.at(-1)).toMatchObject({ kind: traced, name: is.name, position, token: next.token, waited: true });
        expect(events.filter((event) => event.type === "lock.waiting")).toEqual([
          { type: "lock.waiting", ...is, position },
        ]);
      } finally {
        log.stop();
      }
    },
  );

  it("trace a failure: error event, the code as outcome, the same rejection for the caller", async () => {
    const log = logChannels();
    try {
      const { traceWithLock } = await freshChannels();
      const failure = Object.assign(new Error("user's own"), { code: "NOT_OURS" });
      await expect(traceWithLock("locks", ["a", "b"], () => Promise.reject(failure))).rejects.toBe(failure);
      expect(log.events("withLock")).toEqual(["start", "end", "error", "asyncStart", "asyncEnd"]);
      expect(log.seen.at(-1)!.message).toMatchObject({ kind: "lockAll", name: "a, b", outcome: "error" });
    } finally {
      log.stop();
    }
  });
});
