import type { EtcdClient } from "../../api/client.js";
import { cmp, op } from "../../api/txn.js";
import { delay } from "../../gateway/signals.js";
import type { CallOptions } from "../../gateway/transport.js";
import { resendPause } from "./release-sends.js";

/** How long a key whose join may still land stays under watch for a late copy. */
const SUSPECT_FOR_MS = 60_000;

/**
 * Late joins: the one protocol that cleans up after a join that lands after its acquisition is over.
 *
 * The rule: **a send of a join that was handed to fetch and never answered may still land, at any later
 * time.** A join is resent after a lost answer; the first copy may be held up inside etcd (a paused leader
 * with forwarded proposals, bytes on a stalled connection) and land after the acquisition has ended, when it
 * re-creates the key under the live lease, where it blocks the line (a permit, a read-write lock, a lock the
 * session never takes again) until the lease ends.
 *
 * So each acquisition counts its join's sends and answers ({@link JoinSends}); when it is over, sends left
 * unanswered make its keys suspects for a while, and each renewal of the session deletes a suspect key that
 * has reappeared while no caller of the session uses it. Callers mark the keys they use ({@link use}) from
 * their join to the end of their holding ({@link done}), so no sweep touches a key in use.
 */
export class LateJoins {
  readonly #uses = new Map<string, number>();
  readonly #suspects = new Map<string, { value: string | undefined; until: number }>();
  /** Keys being swept: a join of one waits until the sweep's outcome is known (see `sweep`). */
  readonly #sweeping = new Map<string, Promise<void>>();

  /** A caller of the session starts using `keys` (to join, wait, hold): no sweep deletes them meanwhile. */
  use(keys: readonly string[]): void {
    for (const key of keys) this.#uses.set(key, (this.#uses.get(key) ?? 0) + 1);
  }

  /** That caller is done with `keys` (its holding ended, or its failed acquisition left the line). */
  done(keys: readonly string[]): void {
    for (const key of keys) {
      const count = (this.#uses.get(key) ?? 1) - 1;
      if (count > 0) this.#uses.set(key, count);
      else this.#uses.delete(key);
    }
  }

  /** The count of one acquisition's join sends; `value` is what a late copy would write. */
  track(keys: readonly string[], value: string | undefined): JoinSends {
    return new JoinSends(this, keys, value);
  }

  /** Settles once no sweep of `keys` is under way; undefined when none is (the common case: no wait). */
  swept(keys: readonly string[]): Promise<void> | undefined {
    if (this.#sweeping.size === 0) return undefined;
    const pending = keys.flatMap((key) => this.#sweeping.get(key) ?? []);
    return pending.length === 0 ? undefined : Promise.all(pending).then(() => {});
  }

  get anySuspect(): boolean {
    return this.#suspects.size > 0;
  }

  /** @internal By JoinSends: a join of `keys` may still land. */
  suspect(keys: readonly string[], value: string | undefined): void {
    const until = performance.now() + SUSPECT_FOR_MS;
    for (const key of keys) this.#suspects.set(key, { value, until });
  }

  /**
   * On each renewal: deletes every suspect key that no caller of the session uses, if it is there bound to
   * `leaseId` (and holds the value its late join would write). Suspects expire after a minute.
   *
   * A key is read first and deleted only if unchanged since (its mod revision), and a join of the key waits
   * until that delete is answered (`swept`), so a caller that starts using the key meanwhile neither adopts
   * the copy about to be deleted nor has its own key deleted by a delete that lands late. Resent until
   * answered while the session lives (`signal`).
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

/**
 * The sends of one acquisition's join and the answers that settled them. Each send handed to fetch counts
 * (`sent`, the call's `onSent`); each answer settles one: the answer that showed the join landed, and every
 * answer that refused it (`refused`: etcd answered, and nothing of it landed). When the join is over, a send
 * left unsettled may still land: see {@link LateJoins}.
 */
export class JoinSends {
  readonly #joins: LateJoins;
  readonly #keys: readonly string[];
  readonly #value: string | undefined;
  #sent = 0;
  #settled = 0;

  constructor(joins: LateJoins, keys: readonly string[], value: string | undefined) {
    this.#joins = joins;
    this.#keys = keys;
    this.#value = value;
  }

  /** One send was handed to fetch. */
  readonly sent = (): void => {
    this.#sent++;
  };

  /** One send was answered without effect: it never lands. */
  readonly refused = (): void => {
    this.#settled++;
  };

  /** The join is over: it `landed`, was `refused` by its last answer, or its last send went `unanswered`. */
  settle(outcome: "landed" | "refused" | "unanswered"): void {
    const settled = this.#settled + (outcome === "unanswered" ? 0 : 1);
    if (this.#sent > settled) this.#joins.suspect(this.#keys, this.#value);
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
