/**
 * Fresh random bytes from the runtime's CSPRNG, for lease IDs and what identifies an acquisition (its key and its
 * secret). Drawn at each call, never ahead: bytes drawn before a snapshot (Lambda SnapStart) would be drawn again
 * by every sandbox restored from it, where the platform's CSPRNG is reseeded at each restore. Two sandboxes would
 * then make the same key with the same secret, and both hold (issue 37: a pool of draws did that).
 *
 * Where the runtime has `node:crypto` (Node, Bun, Deno, workerd with `nodejs_compat`), its `randomFillSync`
 * draws them: Node builds its Web Crypto object on the first touch of `globalThis.crypto` (algorithms, key
 * classes, WebIDL glue), work that would land on a fresh process's first lock, and both draw from the same
 * generator. Elsewhere, Web Crypto's `getRandomValues`.
 */
export function randomBytes(length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  source ??= nodeCrypto() ?? null;
  return source ? source.randomFillSync(bytes) : globalThis.crypto.getRandomValues(bytes);
}

/** `bytes` fresh random bytes as lowercase hex (see `randomBytes`). */
export function randomHex(bytes: number): string {
  const drawn = randomBytes(bytes);
  let hex = "";
  for (let i = 0; i < bytes; i++) hex += HEX[drawn[i]!];
  return hex;
}

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

interface NodeCrypto {
  randomFillSync(bytes: Uint8Array): Uint8Array;
}

/** `node:crypto`, looked up on first use (null: the runtime has none). A module, never a value drawn from it. */
let source: NodeCrypto | null | undefined;

function nodeCrypto(): NodeCrypto | undefined {
  try {
    const crypto = (
      globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }
    ).process?.getBuiltinModule?.("node:crypto") as Partial<NodeCrypto> | undefined;
    return typeof crypto?.randomFillSync === "function" ? (crypto as NodeCrypto) : undefined;
  } catch {
    // A runtime that knows the module but refuses it: Web Crypto.
    return undefined;
  }
}
