// Snapshot-safe identities (Lambda SnapStart and any runtime restored from a snapshot): nothing random that
// names a holder or proves a ticket is drawn at module load or when a client is made, so nothing drawn before a
// snapshot can be shared by the sandboxes restored from it; and each acquisition and each session draws its
// own, so no two share one.
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockClient } from "../support/mock.js";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("randomness is drawn when used, never ahead", () => {
  it("importing the SDK and making a client draws nothing", async () => {
    const draws = vi.spyOn(globalThis.crypto, "getRandomValues");
    vi.resetModules();
    const { Etcd } = await import("../../src/index.js");
    new Etcd({ endpoints: "http://etcd.test:2379" });
    expect(draws).not.toHaveBeenCalled();
  });

  it("every acquisition of a mutex draws a fresh secret, and every session a fresh lease ID", async () => {
    const { etcd } = mockClient();
    const [a, b] = await Promise.all([etcd.session({ keepAlive: "manual" }), etcd.session({ keepAlive: "manual" })]);
    expect(a.leaseId).not.toBe(b.leaseId);
    const mutex = a.mutex("job");
    const first = await mutex.lock();
    const firstSecret = first.ticket().secret;
    await first.unlock();
    const second = await mutex.lock();
    expect(second.ticket().secret).not.toBe(firstSecret);
    expect(second.ticket().secret).toMatch(/^[0-9a-f]{32}$/);
    await second.unlock();
    await Promise.all([a.close(), b.close()]);
  });
});
