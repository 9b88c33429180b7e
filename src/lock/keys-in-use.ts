import type { EtcdClient } from "../api/client.js";
import { cmp, type Compare, op } from "../api/txn.js";
import type { CallOptions } from "../gateway/transport.js";

/** How long a key whose join was sent twice stays under watch for a late copy. */
const SUSPECT_FOR_MS = 60_000;

interface Suspect {
  /** The value the late copy would write (a mutex's secret): the key is deleted only with it. */
  value: string | undefined;
  until: number;
}

/**
 * The keys a session's callers use (joining, waiting, holding), and the ones that may come back on their
 * own. A join is resent after a lost answer; the first copy may be held up inside etcd (a paused leader with
 * forwarded proposals, bytes on a stalled connection) and land later, after this acquisition is over: it
 * then re-creates the key under the live lease, where it blocks the line (a permit, a read-write lock, a
 * lock the session never takes again) until the lease ends. So the keys of such a join are suspects for a
 * while, and the session's renewals delete any that reappear while no caller of the session uses them.
 */
export class KeysInUse {
  readonly #uses = new Map<string, number>();
  readonly #suspects = new Map<string, Suspect>();

  use(keys: readonly string[]): void {
    for (const key of keys) this.#uses.set(key, (this.#uses.get(key) ?? 0) + 1);
  }

  done(keys: readonly string[]): void {
    for (const key of keys) {
      const count = (this.#uses.get(key) ?? 1) - 1;
      if (count > 0) this.#uses.set(key, count);
      else this.#uses.delete(key);
    }
  }

  /** A join of `keys` was sent more than once, or its outcome is unknown: a copy may land later. */
  suspect(keys: readonly string[], value?: string): void {
    const until = performance.now() + SUSPECT_FOR_MS;
    for (const key of keys) this.#suspects.set(key, { value, until });
  }

  get anySuspect(): boolean {
    return this.#suspects.size > 0;
  }

  /**
   * Deletes every suspect key that no caller of the session uses, if it is there bound to `leaseId` (and
   * holds the value its late join would write). One request per such key; suspects expire after a minute.
   */
  async sweep(client: EtcdClient, leaseId: string, options: CallOptions): Promise<void> {
    const now = performance.now();
    for (const [key, suspect] of this.#suspects) {
      if (suspect.until <= now) {
        this.#suspects.delete(key);
        continue;
      }
      if (this.#uses.has(key)) continue;
      const guards: Compare[] = [cmp.lease(key, "==", leaseId)];
      if (suspect.value !== undefined) guards.push(cmp.value(key, "==", suspect.value));
      await client.txn().if(...guards).then(op.delete(key)).commit({ ...options, idempotent: true });
    }
  }
}
