import type { EtcdClient } from "../../api/client.js";
import { op } from "../../api/txn.js";
import { delay } from "../../gateway/signals.js";

/**
 * How long after a failed acquisition a copy of its join may still land. A join is resent after a lost answer;
 * a copy held up inside etcd (a proposal forwarded to a paused leader, bytes on a stalled connection) can land
 * after the acquisition gave up and deleted its key, re-creating it under the live lease, where it would block
 * the line for as long as the session renews. etcd applies such a copy within an election or so, or never.
 */
export const LATE_JOIN_WINDOW = 60_000;

/**
 * The keys of a session's failed acquisitions: the one place that deletes what a failed acquisition left.
 *
 * Every key is an acquisition's own (see keys.ts), so whatever is found under it is that acquisition's leftover
 * and goes with a plain delete, resent until answered for as long as the session lives: an outage of any length
 * does not strand it. A key whose join may still land (a send was never answered) is deleted again at each
 * renewal for LATE_JOIN_WINDOW. A lost or closed session needs neither: its keys go with its lease.
 */
export class Orphans {
  readonly #client: EtcdClient;
  readonly #session: AbortSignal;
  /** Keys a late join may bring back, with when to stop looking (performance.now()). */
  readonly #late = new Map<string, number>();

  constructor(client: EtcdClient, session: AbortSignal) {
    this.#client = client;
    this.#session = session;
  }

  /** Whether a renewal has keys to sweep. */
  get any(): boolean {
    return this.#late.size > 0;
  }

  /**
   * Deletes `keys` once `joined` has settled (a join in flight could land behind the delete), resending until
   * answered while the session lives. `unsure`: a send of the join was never answered, so the keys are swept
   * again at each renewal until LATE_JOIN_WINDOW has passed.
   */
  async leave(keys: readonly string[], joined: Promise<unknown>, unsure: boolean): Promise<void> {
    await joined.catch(() => {});
    if (unsure) this.watch(keys);
    await this.#delete(keys);
  }

  /**
   * Sweeps `keys` at each renewal for LATE_JOIN_WINDOW: a holding whose join had a send never answered is over,
   * and that send may still land.
   */
  watch(keys: readonly string[]): void {
    const until = performance.now() + LATE_JOIN_WINDOW;
    for (const key of keys) this.#late.set(key, until);
  }

  /** On each renewal: deletes every key a late join may have brought back, then forgets those past the window. */
  sweep(): void {
    const now = performance.now();
    const keys = [...this.#late.keys()];
    for (const [key, until] of this.#late) if (until <= now) this.#late.delete(key);
    void this.#delete(keys);
  }

  async #delete(keys: readonly string[]): Promise<void> {
    const client = this.#client;
    for (let failures = 0; !this.#session.aborted; failures++) {
      try {
        await client
          .txn()
          .then(...keys.map((key) => op.delete(key)))
          .commit({ idempotent: true });
        return;
      } catch {
        await delay(Math.min(250 * 2 ** failures, 5_000), this.#session, true).catch(() => {});
      }
    }
  }
}
