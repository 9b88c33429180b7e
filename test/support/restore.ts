// Two sandboxes restored from one snapshot (a Lambda SnapStart image): each starts from the SDK's state as it was
// when the image was taken, the same session, the same lease, the same mutexes with the same keys to reuse, and
// whatever the SDK keeps to draw randomness from; the platform reseeds its CSPRNG at each restore, and nothing else
// tells them apart.
//
// The emulation: two copies of the SDK's modules (`vi.resetModules`). Copy A runs the image's work with the CSPRNG
// stubbed to a fixed stream; copy B runs the same work from the same stream, its requests answered by replaying
// A's answers byte for byte (and checked to be the same requests): both end in the same state, as two restores of
// one image do. Then the real CSPRNG again, and B's requests go to etcd.
import { createRequire } from "node:module";
import { vi } from "vitest";
import type * as Sdk from "../../src/index.js";

/** The CommonJS face of node:crypto: its methods can be spied on, and the SDK draws through the same object. */
const nodeCrypto = createRequire(import.meta.url)("node:crypto") as typeof import("node:crypto");

/** The SDK, as one sandbox's copy of its modules. */
export type SdkCopy = typeof Sdk;

/** A fixed byte stream, the same from each start: the CSPRNG as the snapshot froze it. Undone by `thaw`. */
function freeze(): () => void {
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
  const node = vi.spyOn(nodeCrypto, "randomFillSync").mockImplementation(fill as typeof nodeCrypto.randomFillSync);
  const web = vi
    .spyOn(globalThis.crypto, "getRandomValues")
    .mockImplementation(fill as typeof globalThis.crypto.getRandomValues);
  return () => {
    node.mockRestore();
    web.mockRestore();
  };
}

/**
 * Runs `work` with the CSPRNG stubbed to the fixed stream from its start: two calls draw the same bytes, as two
 * sandboxes restored from one image would if the platform did not reseed.
 */
export async function withFrozenRandomness<T>(work: () => Promise<T>): Promise<T> {
  const thaw = freeze();
  try {
    return await work();
  } finally {
    thaw();
  }
}

/** A fresh copy of the SDK's modules: one sandbox's. */
async function sandbox(): Promise<SdkCopy> {
  vi.resetModules();
  return (await import("../../src/index.js")) as SdkCopy;
}

interface Recorded {
  path: string;
  body: string;
  status: number;
  headers: [string, string][];
  text: string;
}

/**
 * Runs `image` (the work before the snapshot) in two sandboxes that end in the same state, and returns what each
 * made of it: A's and B's. Both talk to etcd through `fetch` once restored.
 */
export async function restoredPair<T>(fetch: Sdk.Fetch, image: (sdk: SdkCopy, fetch: Sdk.Fetch) => Promise<T>) {
  const recorded: Recorded[] = [];
  const recording: Sdk.Fetch = async (input, init) => {
    const response = await fetch(input, init);
    const text = await response.text();
    const own = (response as { headers?: HeadersInit }).headers;
    const headers = own === undefined ? [] : [...new Headers(own).entries()];
    const body = String(init?.body ?? "");
    recorded.push({ path: new URL(input).pathname, body, status: response.status, headers, text });
    return new Response(text, { status: response.status, headers });
  };
  let replayed = 0;
  let restored = false;
  const mismatches: string[] = [];
  const replaying: Sdk.Fetch = async (input, init) => {
    if (restored) return fetch(input, init);
    const answer = recorded[replayed++];
    const path = new URL(input).pathname;
    if (answer === undefined || answer.path !== path || answer.body !== String(init?.body ?? "")) {
      mismatches.push(`request ${replayed}: ${path} is not the image's ${answer?.path ?? "(none)"}`);
      throw new TypeError("fetch failed", { cause: new Error("the replay diverged") });
    }
    return new Response(answer.text, { status: answer.status, headers: answer.headers });
  };
  let thaw = freeze();
  let a: T;
  let b: T;
  try {
    a = await image(await sandbox(), recording);
    thaw();
    thaw = freeze();
    b = await image(await sandbox(), replaying);
  } finally {
    thaw();
  }
  restored = true;
  if (mismatches.length > 0 || replayed !== recorded.length) {
    throw new Error(`the two sandboxes did not end in one state: ${mismatches.join("; ") || "fewer requests"}`);
  }
  return { a, b };
}
