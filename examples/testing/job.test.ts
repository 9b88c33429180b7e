// The test docs/testing.md shows: a handler's lost-lock path, on the in-memory etcd, in milliseconds. The client
// takes the mock's clock, so advancing the mock past the session's TTL ends the lease on both sides at once:
// the lock reports it is lost (held false, signal aborted with LOCK_LOST) as a real expiry would, and the job
// records nothing. Only the public testing API is used.
import { describe, expect, it, vi } from "vitest";
import { Etcd } from "../../src/index.js";
import { createMockEtcd } from "../../src/testing/index.js";
import { runJob } from "./job.js";

// The example imports the package by name, which resolves to the build; unit tests run the source.
vi.mock("etcd-edge", () => import("../../src/index.js"));

function onMock() {
  const mock = createMockEtcd();
  const etcd = new Etcd({ endpoints: "http://etcd.test:2379", fetch: mock.fetch, clock: mock.clock });
  return { mock, etcd };
}

describe("runJob", () => {
  it("records its result when the lock holds to the end", async () => {
    const { mock, etcd } = onMock();
    expect(await runJob(etcd, "nightly", async () => 42)).toBe("done");
    expect(mock.get("results/nightly")?.value).toBe("42");
    expect(mock.keys("nightly/")).toEqual([]);
  });

  it("reports the lock lost when its lease runs out mid-work, and records nothing", async () => {
    const { mock, etcd } = onMock();
    let seen: AbortSignal | undefined;
    const outcome = runJob(etcd, "nightly", (signal) => {
      seen = signal;
      // Work that takes "11 s": the mock's time moves past the 10 s lease while it runs.
      return new Promise((_, reject) => {
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        queueMicrotask(() => mock.advance(11_000));
      });
    });
    expect(await outcome).toBe("lost");
    expect(seen?.aborted).toBe(true);
    expect(seen?.reason).toMatchObject({ code: "LOCK_LOST" });
    expect(mock.get("results/nightly")).toBeUndefined();
    expect(mock.keys("nightly/")).toEqual([]);
  });

  it("a lock's held and signal follow the mock's time, with no real waiting", async () => {
    const { mock, etcd } = onMock();
    const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
    const lock = await session.mutex("nightly").lock();
    mock.advance(9_000);
    expect(lock.held).toBe(true);
    mock.advance(1_100);
    // At once, on the same turn: no timer of the runtime is involved.
    expect(session.alive).toBe(false);
    expect(lock.held).toBe(false);
    expect(lock.signal.aborted).toBe(true);
    expect(lock.signal.reason).toMatchObject({ code: "LOCK_LOST" });
    expect((await lock.unlock().catch((error: { code?: string }) => error))?.code).toBe("LOCK_LOST");
  });

  it("or with vitest's fake timers, on the runtime's clock (performance.now and setTimeout faked)", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const mock = createMockEtcd();
      const etcd = new Etcd({ endpoints: "http://etcd.test:2379", fetch: mock.fetch });
      const session = await etcd.session({ ttl: 10, keepAlive: "manual" });
      const lock = await session.mutex("nightly").lock();
      // The runtime's clock moves the session's deadline; the mock's moves its lease.
      vi.advanceTimersByTime(10_100);
      mock.advance(10_100);
      expect(lock.held).toBe(false);
      expect(lock.signal.reason).toMatchObject({ code: "LOCK_LOST" });
      expect(mock.keys("nightly/")).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  });
});
