// Snapshot-safe identities (Lambda SnapStart and any runtime restored from a snapshot): nothing random that
// names a holder or proves a ticket is drawn at module load or when a client is made, so nothing drawn before a
// snapshot can be shared by the sandboxes restored from it; each session draws its lease ID at its grant, and each
// acquisition its key and secret when it starts, never from draws made ahead (a pool filled before a snapshot
// handed two restored sandboxes the same key and secret: test/conformance/conformance-restore.test.ts).
import { createRequire } from "node:module";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockClient } from "../support/mock.js";

// The two sources the SDK may draw from: Node's own CSPRNG (what it uses in Node) and Web Crypto.
const nodeCrypto = createRequire(import.meta.url)("node:crypto") as typeof import("node:crypto");

afterEach(() => {
  vi.restoreAllMocks();
});

describe("randomness is drawn when used, never at module load", () => {
  it("importing the SDK and making a client draws nothing", async () => {
    const web = vi.spyOn(globalThis.crypto, "getRandomValues");
    const node = vi.spyOn(nodeCrypto, "randomFillSync");
    vi.resetModules();
    const { Etcd } = await import("../../src/index.js");
    const etcd = new Etcd({ endpoints: "http://etcd.test:2379" });
    expect(web).not.toHaveBeenCalled();
    expect(node).not.toHaveBeenCalled();
    // The spies see a draw when there is one.
    const { randomBytes } = await import("../../src/api/random.js");
    randomBytes(8);
    expect(web.mock.calls.length + node.mock.calls.length).toBe(1);
    void etcd;
  });

  it("lease IDs are drawn at each grant, and each acquisition's key and secret when it starts", async () => {
    const node = vi.spyOn(nodeCrypto, "randomFillSync");
    const web = vi.spyOn(globalThis.crypto, "getRandomValues");
    vi.resetModules();
    const { Etcd } = await import("../../src/index.js");
    const { createMockEtcd } = await import("../../src/testing/index.js");
    const mock = createMockEtcd();
    const etcd = new Etcd({ endpoints: "http://etcd.test:2379", fetch: (url, init) => mock.fetch(url, init) });
    const draws = () => node.mock.calls.length + web.mock.calls.length;
    const session = await etcd.session({ keepAlive: "manual" });
    expect(draws()).toBe(1);
    const mutex = session.mutex("job");
    const secrets = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const lock = await mutex.lock();
      secrets.add(lock.ticket().secret);
      await lock.unlock();
    }
    // One draw each: its secret, with its key's random part while the mutex has no key of its own to reuse.
    expect(draws()).toBe(21);
    expect(secrets.size).toBe(20);
    await session.close();
    await etcd.close();
  });

  it("every acquisition of a mutex has a fresh secret, and every session a fresh lease ID", async () => {
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
