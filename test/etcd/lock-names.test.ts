// A key under a lock's prefix that no contender made (data stored under the lock's name, another lock named
// inside it, a key with no lease or with a suffix that is not its lease) would sort into the line and hold the
// lock for good: lock, tryLock, campaign and inspectLock refuse it at once with LOCK_NAME_CONFLICT.
import { describe, expect, it } from "vitest";
import { op } from "../../src/index.js";
import { rejection, within } from "../support/async.js";
import { client, keysUnder, uniqueName } from "../support/etcd.js";

const etcd = client();

describe("lock-name conflicts", () => {
  // Before: the README's first example wrote `jobs/nightly/last-run` under lock `jobs/nightly`; from its second
  // run on that key was the holder forever and every withLock timed out.
  it(
    "data stored under the lock's name: withLock fails at once, " + "naming the key, and leaves no key of its own",
    async () => {
      const name = uniqueName("jobs");
      await etcd.put(`${name}/last-run`, "yesterday");
      const error = await within(
        3_000,
        "withLock on a name with data under it",
        rejection(etcd.withLock(name, () => "ran", { ttl: 5, timeout: 10_000 })),
      );
      expect(error.code).toBe("LOCK_NAME_CONFLICT");
      expect(error.message).toContain(`${name}/last-run`);
      expect(await keysUnder(etcd, name)).toEqual([`${name}/last-run`]);
      await expect(etcd.inspectLock(name)).rejects.toMatchObject({ code: "LOCK_NAME_CONFLICT" });
      // Data beside the lock's prefix is fine.
      await etcd.delete(`${name}/last-run`);
      await etcd.put(`${name}-last-run`, "today");
      expect(await etcd.withLock(name, () => "ran", { ttl: 5 })).toBe("ran");
    },
  );

  it("holding lock a/b blocks neither: lock a refuses to wait behind a/b's key", async () => {
    const name = uniqueName("nested");
    const session = await etcd.session({ ttl: 10 });
    const inner = await session.mutex(`${name}/b`).lock();
    const other = await etcd.session({ ttl: 10 });
    const error = await rejection(other.mutex(name).lock({ timeout: 5_000 }));
    expect(error.code).toBe("LOCK_NAME_CONFLICT");
    expect(error.message).toContain(inner.key);
    await expect(other.mutex(name).tryLock()).rejects.toMatchObject({ code: "LOCK_NAME_CONFLICT" });
    await expect(other.election(name).campaign("x", { timeout: 5_000 })).rejects.toMatchObject({
      code: "LOCK_NAME_CONFLICT",
    });
    // Nothing of the refused contenders stays in the line.
    expect(await keysUnder(etcd, name)).toEqual([inner.key]);
    await Promise.all([session.close(), other.close()]);
  });

  it("a key with a lease whose suffix is not that lease's hex is not a contender", async () => {
    const name = uniqueName("suffix");
    const { id } = await etcd.lease.grant(10);
    await etcd.put(`${name}/not-hex-of-its-lease`, "", { lease: id });
    const session = await etcd.session({ ttl: 10 });
    await expect(session.mutex(name).lock({ timeout: 5_000 })).rejects.toMatchObject({ code: "LOCK_NAME_CONFLICT" });
    await Promise.all([session.close(), etcd.lease.revoke(id)]);
  });

  it("a conflicting key that reaches the head of the line later is refused then, not waited on", async () => {
    const name = uniqueName("later");
    const holderSession = await etcd.session({ ttl: 10 });
    const holder = await holderSession.mutex(name).lock();
    // A stray key (no lease) joins behind the holder, then a real waiter behind it.
    await etcd.put(`${name}/stray`, "x");
    const waiterSession = await etcd.session({ ttl: 10 });
    const waiting = rejection(waiterSession.mutex(name).lock({ timeout: 5_000 }));
    const error = await within(3_000, "the waiter sees the stray key as its predecessor", waiting);
    expect(error.code).toBe("LOCK_NAME_CONFLICT");
    expect(error.message).toContain(`${name}/stray`);
    expect(holder.held).toBe(true);
    await holder.unlock();
    await Promise.all([holderSession.close(), waiterSession.close(), etcd.delete(`${name}/stray`)]);
  });

  it(
    "keys written by contenders of any client stay contenders: " + "a fenced write under the lock still works",
    async () => {
      const name = uniqueName("ok");
      const session = await etcd.session({ ttl: 10 });
      const lock = await session.mutex(name).lock();
      const write = await etcd
        .txn()
        .if(lock.ifHeld())
        .then(op.put(`${name}.data`, "v"))
        .commit();
      expect(write.succeeded).toBe(true);
      const info = await etcd.inspectLock(name);
      expect(info.holder?.key).toBe(lock.key);
      await lock.unlock();
      await session.close();
    },
  );
});
