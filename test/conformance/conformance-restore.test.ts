// Two sandboxes restored from one snapshot (issue 37, finding 3): a Lambda SnapStart image taken after a lock holds
// the SDK's state as it was then, and every sandbox restored from it starts from that state: the same session, the
// same lease, the same mutex with the same key to reuse, and whatever the SDK keeps to draw randomness from. The
// platform reseeds its CSPRNG at each restore; nothing else tells the sandboxes apart. Whatever each acquisition
// draws after the restore must still make them two contenders: on 4e52409 both drew the same key and secret from a
// pool filled before the snapshot, and both held (6 of 6).
//
// The emulation: two copies of the SDK's modules (`vi.resetModules`). Copy A runs the image's work (open a session,
// lock and unlock) with the CSPRNG stubbed to a fixed stream; copy B runs the same work with the same stream, its
// requests answered by replaying A's answers, byte for byte (and checked to be the same requests): both end in the
// same state, as two restores of one image do. Then the real CSPRNG, and both take the lock.
import { createRequire } from "node:module";
import { afterEach, describe, expect, it, vi } from "vitest";
import type * as Sdk from "../../src/index.js";
import { rejection } from "../support/async.js";
import { freshNames, keysUnder } from "../support/etcd.js";
import { useBackend } from "./backend.js";

// The CommonJS face of node:crypto: its methods can be spied on, and the SDK draws through the same object.
const nodeCrypto = createRequire(import.meta.url)("node:crypto") as typeof import("node:crypto");
const { backend, etcd } = useBackend();
const fresh = freshNames("restore");

afterEach(() => {
  vi.restoreAllMocks();
});

/** A fixed byte stream, the same from each start: the CSPRNG as the snapshot froze it. */
function frozenRandom(): void {
  let next = 7;
  const fill = <T extends ArrayBufferView | null>(view: T): T => {
    if (view === null) return view;
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    for (let i = 0; i < bytes.length; i++) {
      next = (next * 1103515245 + 12345) >>> 0;
      bytes[i] = next >>> 24;
    }
    return view;
  };
  vi.spyOn(nodeCrypto, "randomFillSync").mockImplementation(fill as typeof nodeCrypto.randomFillSync);
  vi.spyOn(globalThis.crypto, "getRandomValues").mockImplementation(fill as typeof globalThis.crypto.getRandomValues);
}

/** A fresh copy of the SDK's modules: one sandbox's. */
async function sandbox(): Promise<typeof Sdk> {
  vi.resetModules();
  return (await import("../../src/index.js")) as typeof Sdk;
}

interface Recorded {
  path: string;
  body: string;
  status: number;
  headers: [string, string][];
  text: string;
}

/** The image's work: a session, and the lock taken and released once (its key kept for reuse). */
async function image(sdk: typeof Sdk, fetch: Sdk.Fetch, name: string) {
  const client = new sdk.Etcd(backend.options({ fetch }));
  const session = await client.session({ ttl: 30, keepAlive: "manual" });
  const lock = await session.mutex(name).lock();
  await lock.unlock();
  return { session };
}

describe("two sandboxes restored from one snapshot", () => {
  it("are two contenders: one holds, the other waits; one fenced write lands", async () => {
    for (let round = 0; round < 3; round++) {
      const name = fresh();
      const recorded: Recorded[] = [];
      const recording: Sdk.Fetch = async (input, init) => {
        const response = await backend.fetch(input, init);
        const text = await response.text();
        const own = (response as { headers?: HeadersInit }).headers;
        const headers = own === undefined ? [] : [...new Headers(own).entries()];
        recorded.push({ path: new URL(input).pathname, body: String(init?.body ?? ""), status: response.status, headers, text });
        return new Response(text, { status: response.status, headers });
      };
      let replayed = 0;
      let restored = false;
      const replaying: Sdk.Fetch = async (input, init) => {
        if (restored) return backend.fetch(input, init);
        const answer = recorded[replayed++];
        expect({ path: new URL(input).pathname, body: String(init?.body ?? "") }).toEqual({
          path: answer?.path,
          body: answer?.body,
        });
        return new Response(answer!.text, { status: answer!.status, headers: answer!.headers });
      };

      frozenRandom();
      const a = await image(await sandbox(), recording, name);
      vi.restoreAllMocks();
      frozenRandom();
      const b = await image(await sandbox(), replaying, name);
      vi.restoreAllMocks();
      restored = true;
      expect(replayed).toBe(recorded.length);
      expect(b.session.leaseId).toBe(a.session.leaseId);

      // After the restore: each sandbox takes the lock, as its first invocation would.
      const first = await a.session.mutex(name).lock({ timeout: 2_000 });
      const second = await rejection(b.session.mutex(name).lock({ timeout: 500 }));
      expect(second.code).toBe("TIMEOUT");
      expect(await b.session.mutex(name).tryLock()).toBeUndefined();
      expect(await keysUnder(etcd, name)).toEqual([first.key]);
      await first.unlock();
      const then = await b.session.mutex(name).lock({ timeout: 2_000 });
      expect(then.revision).toBeGreaterThan(first.revision);
      await then.unlock();
      await a.session.close();
      expect(await keysUnder(etcd, name)).toEqual([]);
    }
  });
});
