/**
 * A key of its own for one acquisition: `<prefix><leaseHex>-<16 random hex digits>`. The mutex has one key
 * per session and name, so a session's callers take turns for it; semaphores and read-write locks give each
 * acquisition its own key instead, so callers of one session can hold several permits, or read together.
 * The lease stays in the key for whoever inspects the line; the random part keeps two processes sharing a
 * lease (a resumed lock) from taking each other's key. A join with it is still create-if-absent, so it is
 * safe to resend.
 */
export function uniqueKey(prefix: string, leaseHex: string): string {
  return `${prefix}${leaseHex}-${randomHex(8)}`;
}

/**
 * Random bytes drawn from the runtime's CSPRNG a block at a time: one getRandomValues call costs about as
 * much for 512 bytes as for 16, and a lock takes 16 for its secret.
 */
const pool = new Uint8Array(512);
let used = pool.length;

/** `bytes` random bytes from the runtime's CSPRNG (at most 512), as lowercase hex. */
export function randomHex(bytes: number): string {
  if (used + bytes > pool.length) {
    globalThis.crypto.getRandomValues(pool);
    used = 0;
  }
  let hex = "";
  for (let i = used; i < used + bytes; i++) hex += HEX[pool[i]!]!;
  used += bytes;
  return hex;
}

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));
