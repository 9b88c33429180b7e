import { afterEach, describe, expect, it, vi } from "vitest";
import { sleep } from "../support/async.js";
import { mockClient } from "../support/mock.js";

afterEach(() => vi.restoreAllMocks());

describe("session deadline", () => {
  it("aborts the signal of a manual session past its TTL even when timers fire early", async () => {
    const { etcd } = mockClient();
    const session = await etcd.session({ ttl: 2, keepAlive: "manual" });
    // Timers measured against a clock that lags performance.now() fire "early": the session must re-arm.
    const real = performance.now.bind(performance);
    vi.spyOn(performance, "now").mockImplementation(() => real() - 50);
    await sleep(2_300);
    expect(session.signal.aborted).toBe(true);
    expect(session.signal.reason).toMatchObject({ code: "SESSION_EXPIRED" });
  });

  it("renewWhile keeps a manual session alive for as long as the work runs, and no longer", async () => {
    const { etcd, mock } = mockClient();
    const session = await etcd.session({ ttl: 2, keepAlive: "manual" });
    const renewals: number[] = [];
    const renew = session.renew.bind(session);
    vi.spyOn(session, "renew").mockImplementation(async (options) => {
      renewals.push(performance.now());
      return renew(options);
    });
    await session.renewWhile(() => sleep(3_000));
    expect(session.alive).toBe(true);
    expect(renewals.length).toBeGreaterThanOrEqual(3);
    const count = renewals.length;
    await sleep(1_000);
    expect(renewals).toHaveLength(count);
    expect(mock.leases()).toHaveLength(1);
    await session.close();
  });
});
