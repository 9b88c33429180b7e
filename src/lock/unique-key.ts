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

/** `bytes` random bytes from the runtime's CSPRNG, as lowercase hex. */
export function randomHex(bytes: number): string {
  let hex = "";
  for (const byte of globalThis.crypto.getRandomValues(new Uint8Array(bytes))) hex += byte.toString(16).padStart(2, "0");
  return hex;
}
