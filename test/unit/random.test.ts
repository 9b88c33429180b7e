// Where the SDK's random bytes come from: Node's own CSPRNG where the runtime offers `node:crypto` (Node builds
// its Web Crypto object on first touch, work a fresh process's first lock would pay for), Web Crypto elsewhere.
import { createRequire } from "node:module";
import { afterEach, describe, expect, it, vi } from "vitest";

const nodeCrypto = createRequire(import.meta.url)("node:crypto") as typeof import("node:crypto");

afterEach(() => {
  vi.restoreAllMocks();
});

/** A fresh copy of the module, so it looks its source up again. */
async function freshRandom() {
  vi.resetModules();
  return (await import("../../src/api/random.js")).randomBytes;
}

describe("randomBytes", () => {
  it("draws from node:crypto where the runtime has it, never touching Web Crypto", async () => {
    const web = vi.spyOn(globalThis.crypto, "getRandomValues");
    const node = vi.spyOn(nodeCrypto, "randomFillSync");
    const randomBytes = await freshRandom();
    const a = randomBytes(16);
    const b = randomBytes(16);
    expect(a).toHaveLength(16);
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(false);
    expect(node).toHaveBeenCalledTimes(2);
    expect(web).not.toHaveBeenCalled();
  });

  it("draws from Web Crypto where there is no node:crypto (a browser, workerd without nodejs_compat)", async () => {
    vi.spyOn(process, "getBuiltinModule").mockImplementation(() => undefined as never);
    const web = vi.spyOn(globalThis.crypto, "getRandomValues");
    const node = vi.spyOn(nodeCrypto, "randomFillSync");
    const randomBytes = await freshRandom();
    const a = randomBytes(8);
    expect(a).toHaveLength(8);
    expect(Buffer.from(a).equals(Buffer.from(randomBytes(8)))).toBe(false);
    expect(web).toHaveBeenCalledTimes(2);
    expect(node).not.toHaveBeenCalled();
  });

  it("falls back to Web Crypto when the runtime refuses the module", async () => {
    vi.spyOn(process, "getBuiltinModule").mockImplementation(() => {
      throw new Error("not allowed here");
    });
    const web = vi.spyOn(globalThis.crypto, "getRandomValues");
    const randomBytes = await freshRandom();
    expect(randomBytes(4)).toHaveLength(4);
    expect(web).toHaveBeenCalledTimes(1);
  });
});
