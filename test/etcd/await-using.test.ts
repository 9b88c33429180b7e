// What `await using` throws, and when (the rule the README states): a holding's disposal releases it unless
// the body already asked (`unlock()`, whatever it answered), and throws what that release throws; a session's
// and a client's disposal never throw, so a lock's LOCK_LOST reaches the caller as itself, never wrapped in a
// SuppressedError. Against a real member, with etcd reachable and with it gone (a relay closed in front of it).
import { describe, expect, it } from "vitest";
import { type EtcdError, isEtcdError } from "../../src/index.js";
import { client, keysUnder, sharedEndpoint, uniqueName } from "../support/etcd.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { sleep } from "../support/time.js";

/** What a block threw, or undefined when it ended normally. */
async function outcome(block: () => Promise<void>): Promise<unknown> {
  try {
    await block();
    return undefined;
  } catch (error) {
    return error;
  }
}

describe("await using, etcd reachable", () => {
  it("the body ends normally: released, nothing thrown", async () => {
    const etcd = client();
    const name = uniqueName("using");
    const thrown = await outcome(async () => {
      await using session = await etcd.session({ ttl: 20 });
      await using lock = await session.mutex(name).lock();
      expect(lock.held).toBe(true);
    });
    expect(thrown).toBeUndefined();
    expect(await keysUnder(etcd, name)).toEqual([]);
  });

  it("the body throws: its own error, as it is", async () => {
    const etcd = client();
    const name = uniqueName("using");
    const boom = new Error("boom");
    const thrown = await outcome(async () => {
      await using session = await etcd.session({ ttl: 20 });
      await using _lock = await session.mutex(name).lock();
      throw boom;
    });
    expect(thrown).toBe(boom);
    expect(await keysUnder(etcd, name)).toEqual([]);
  });

  it("the body handles a loss (unlock() answered LOCK_LOST): disposal tells it no second time", async () => {
    const etcd = client();
    const name = uniqueName("using");
    let handled: EtcdError | undefined;
    const thrown = await outcome(async () => {
      await using session = await etcd.session({ ttl: 20, keepAlive: "manual" });
      await using lock = await session.mutex(name).lock();
      await etcd.delete(lock.key);
      try {
        await lock.unlock();
      } catch (error) {
        if (!isEtcdError(error, "LOCK_LOST")) throw error;
        handled = error;
      }
    });
    expect(handled?.code).toBe("LOCK_LOST");
    expect(thrown).toBeUndefined();
  });

  it("a loss the body did not handle: disposal throws LOCK_LOST (the work was not protected to its end)", async () => {
    const etcd = client();
    const name = uniqueName("using");
    const thrown = await outcome(async () => {
      await using session = await etcd.session({ ttl: 20, keepAlive: "manual" });
      await using lock = await session.mutex(name).lock();
      await etcd.delete(lock.key);
    });
    expect(isEtcdError(thrown, "LOCK_LOST")).toBe(true);
    expect((thrown as EtcdError).message).toMatch(/^lock .* was lost: /);
  });

  it("the body throws, the lock was lost: a SuppressedError, its error the loss, suppressing the body's", async () => {
    const etcd = client();
    const name = uniqueName("using");
    const boom = new Error("boom");
    const thrown = await outcome(async () => {
      await using session = await etcd.session({ ttl: 20, keepAlive: "manual" });
      await using lock = await session.mutex(name).lock();
      await etcd.delete(lock.key);
      throw boom;
    });
    expect(thrown).toBeInstanceOf(SuppressedError);
    expect(isEtcdError((thrown as SuppressedError).error, "LOCK_LOST")).toBe(true);
    expect((thrown as SuppressedError).suppressed).toBe(boom);
  });
});

describe("await using, etcd gone", () => {
  it("a lock lost while etcd is unreachable: LOCK_LOST as itself, no failed revocation added", async () => {
    const proxy = await startTcpProxy(sharedEndpoint());
    const etcd = client({ endpoints: proxy.url, timeout: 1_000, attemptTimeout: 500 });
    const name = uniqueName("using-down");
    try {
      const thrown = await outcome(async () => {
        await using session = await etcd.session({ ttl: 2, keepAlive: "manual" });
        await using lock = await session.mutex(name).lock();
        await proxy.close();
        // Past the lease's deadline with no renewal: lost, known without a request.
        await sleep(2_200);
        expect(lock.held).toBe(false);
      });
      expect(isEtcdError(thrown, "LOCK_LOST")).toBe(true);
    } finally {
      await proxy.close().catch(() => {});
    }
  });

  it("the body handled the loss with etcd unreachable: the block ends normally", async () => {
    const proxy = await startTcpProxy(sharedEndpoint());
    const etcd = client({ endpoints: proxy.url, timeout: 1_000, attemptTimeout: 500 });
    const name = uniqueName("using-down");
    try {
      let handled = false;
      const thrown = await outcome(async () => {
        await using session = await etcd.session({ ttl: 2, keepAlive: "manual" });
        await using lock = await session.mutex(name).lock();
        await proxy.close();
        await sleep(2_200);
        await lock.unlock().catch((error: unknown) => {
          handled = isEtcdError(error, "LOCK_LOST");
        });
      });
      expect(handled).toBe(true);
      expect(thrown).toBeUndefined();
    } finally {
      await proxy.close().catch(() => {});
    }
  });

  it("a held lock whose release cannot be sent: disposal throws why; the client's disposal adds nothing", async () => {
    const proxy = await startTcpProxy(sharedEndpoint());
    const name = uniqueName("using-down");
    try {
      const thrown = await outcome(async () => {
        await using etcd = client({ endpoints: proxy.url, timeout: 1_000, attemptTimeout: 500 });
        await using session = await etcd.session({ ttl: 20 });
        await using _lock = await session.mutex(name).lock();
        await proxy.close();
      });
      expect(isEtcdError(thrown, "UNAVAILABLE")).toBe(true);
      expect((thrown as EtcdError).message).toMatch(/127\.0\.0\.1/);
    } finally {
      await proxy.close().catch(() => {});
      // The lease was never revoked: its key goes when it expires. Removed here so no other test meets it.
      const etcd = client();
      for (const key of await keysUnder(etcd, name)) await etcd.delete(key);
    }
  });
});
