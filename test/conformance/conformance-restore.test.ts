// Two sandboxes restored from one snapshot (issue 37, finding 3): a Lambda SnapStart image taken after a lock holds
// the SDK's state as it was then, and every sandbox restored from it starts from that state: the same session, the
// same lease, the same mutex with the same key to reuse, and whatever the SDK keeps to draw randomness from. The
// platform reseeds its CSPRNG at each restore; nothing else tells the sandboxes apart. Whatever each acquisition
// draws after the restore must still make them two contenders: on 4e52409 both drew the same key and secret from a
// pool filled before the snapshot, and both held (6 of 6).
// The emulation is test/support/restore.ts's: two copies of the SDK's modules ending in one state.
import { describe, expect, it } from "vitest";
import { rejection } from "../support/async.js";
import { freshNames, keysUnder } from "../support/etcd.js";
import { restoredPair, type SdkCopy, withFrozenRandomness } from "../support/restore.js";
import type { Fetch } from "../../src/index.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();
const fresh = freshNames("restore");

/** The image's work: a session, and the lock taken and released once (its key kept for reuse). */
async function image(sdk: SdkCopy, fetch: Fetch, name: string) {
  const client = new sdk.Etcd(backend.options({ fetch }));
  const session = await client.session({ ttl: 30, keepAlive: "manual" });
  const lock = await session.mutex(name).lock();
  await lock.unlock();
  return session;
}

describe("two sandboxes restored from one snapshot", () => {
  it("are two contenders: one holds, the other waits its turn", async () => {
    for (let round = 0; round < 3; round++) {
      const name = fresh();
      const { a, b } = await restoredPair(backend.fetch, (sdk, fetch) => image(sdk, fetch, name));
      expect(b.leaseId).toBe(a.leaseId);
      // After the restore: each sandbox takes the lock, as its first invocation would.
      const first = await a.mutex(name).lock({ timeout: 2_000 });
      const second = await rejection(b.mutex(name).lock({ timeout: 500 }));
      expect(second.code).toBe("TIMEOUT");
      expect(await b.mutex(name).tryLock()).toBeUndefined();
      expect(await keysUnder(etcd, name)).toEqual([first.key]);
      await first.unlock();
      const then = await b.mutex(name).lock({ timeout: 2_000 });
      expect(then.revision).toBeGreaterThan(first.revision);
      await then.unlock();
      await a.close();
      expect(await keysUnder(etcd, name)).toEqual([]);
    }
  });

  it("are two contenders even without a reseed: one secret drawn twice is no earlier send", async () => {
    const name = fresh();
    const { a, b } = await restoredPair(backend.fetch, (sdk, fetch) => image(sdk, fetch, name));
    // Each draws the same bytes, so each puts the image's reused key with the same value: only the count of its
    // own sends tells B that the key it finds was not its own join landing late.
    const first = await withFrozenRandomness(() => a.mutex(name).lock({ timeout: 2_000 }));
    const second = await rejection(withFrozenRandomness(() => b.mutex(name).lock({ timeout: 500 })));
    expect(second.code).toBe("TIMEOUT");
    expect(await keysUnder(etcd, name)).toEqual([first.key]);
    await first.unlock();
    await a.close();
    await b.close();
  });
});
