// The CSPRNG's answers, chosen: node:crypto's randomFillSync is what the SDK draws from under Node
// (src/api/random.ts). Restore with vi.restoreAllMocks().
import { createRequire } from "node:module";
import { vi } from "vitest";

const nodeCrypto = createRequire(import.meta.url)("node:crypto") as typeof import("node:crypto");

/** The CSPRNG answers the next `times` draws with `byte` in every place, then as it does. */
export function sameDraws(times: number, byte = 0x5a): void {
  const real = nodeCrypto.randomFillSync.bind(nodeCrypto);
  let left = times;
  vi.spyOn(nodeCrypto, "randomFillSync").mockImplementation(((view: Uint8Array) => {
    if (left-- <= 0) return real(view);
    view.fill(byte);
    return view;
  }) as typeof nodeCrypto.randomFillSync);
}
