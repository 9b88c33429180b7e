import type { EtcdClient } from "../api/client.js";
import { cmp, op } from "../api/txn.js";
import { delay } from "../gateway/signals.js";
import type { CallOptions } from "../gateway/transport.js";
import { resendPause } from "./sends.js";

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
  /** Keys being swept: a join of one waits until the sweep's outcome is known (see `sweep`). */
  readonly #sweeping = new Map<string, Promise<void>>();

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

  /** Settles once no sweep of `keys` is under way; undefined when none is (the common case: no wait). */
  swept(keys: readonly string[]): Promise<void> | undefined {
    if (this.#sweeping.size === 0) return undefined;
    const pending = keys.flatMap((key) => this.#sweeping.get(key) ?? []);
    return pending.length === 0 ? undefined : Promise.all(pending).then(() => {});
  }

  /**
   * Deletes every suspect key that no caller of the session uses, if it is there bound to `leaseId` (and
   * holds the value its late join would write). Suspects expire after a minute.
   *
   * A key is read first and deleted only if unchanged since (its mod revision), and a join of the key waits
   * until that delete is answered (`swept`), so a caller that starts using the key meanwhile neither adopts
   * the copy about to be deleted nor has its own key deleted by a delete that lands late: a delete guarded by
   * lease and value alone, sent when no caller used the key, deleted the key of the next acquisition when it
   * landed after that acquisition's join. Resent until answered while the session lives (`signal`).
   */
  sweep(client: EtcdClient, leaseId: string, options: CallOptions, signal: AbortSignal): void {
    const now = performance.now();
    for (const [key, suspect] of this.#suspects) {
      if (suspect.until <= now) {
        this.#suspects.delete(key);
        continue;
      }
      if (this.#uses.has(key) || this.#sweeping.has(key)) continue;
      const swept = sweepKey(client, key, leaseId, suspect.value, options, signal).finally(() =>
        this.#sweeping.delete(key),
      );
      this.#sweeping.set(key, swept);
    }
  }
}

async function sweepKey(
  client: EtcdClient,
  key: string,
  leaseId: string,
  value: string | undefined,
  options: CallOptions,
  signal: AbortSignal,
): Promise<void> {
  for (let failures = 0; !signal.aborted; failures++) {
    try {
      const found = await client.get(key, options);
      if (found === undefined || found.lease !== leaseId || (value !== undefined && found.value !== value)) return;
      await client
        .txn()
        .if(cmp.modRevision(key, "==", found.modRevision), cmp.lease(key, "==", leaseId))
        .then(op.delete(key))
        .commit({ ...options, idempotent: true });
      return;
    } catch {
      // Unanswered or refused: read again, and delete what is there then.
      await delay(resendPause(failures), signal, true).catch(() => {});
    }
  }
}
