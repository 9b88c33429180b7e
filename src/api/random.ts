/**
 * Fresh random bytes from the runtime's CSPRNG, for lease IDs and `randomHex`'s pool. Drawn at each call, never
 * ahead: a value drawn at module load would be shared by every sandbox restored from one snapshot (Lambda
 * SnapStart).
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

/**
 * `bytes` random bytes as lowercase hex, for the keys and secrets of acquisitions. A call into the CSPRNG costs
 * more than the rest of a lock's work before its request when the process is busy, so acquisitions share draws:
 * a pool of POOL_BYTES, filled from `randomBytes` when it runs out. Filled at the first acquisition, never at
 * module load: a sandbox that takes no lock before its snapshot (as the README asks) fills it after the restore.
 */
export function randomHex(bytes: number): string {
  if (pool === undefined || used + bytes > pool.length) {
    pool = randomBytes(POOL_BYTES);
    used = 0;
  }
  let hex = "";
  for (const end = used + bytes; used < end; used++) hex += HEX[pool[used]!];
  return hex;
}

const POOL_BYTES = 512;
let pool: Uint8Array | undefined;
let used = 0;
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
