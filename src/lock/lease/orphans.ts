import type { EtcdClient } from "../../api/client.js";
import { cmp, op } from "../../api/txn.js";
import { untilAnswered } from "../resend/until-answered.js";

/**
 * How long after a failed acquisition a copy of its join may still land. A join is resent after a lost answer;
 * a copy held up inside etcd (a proposal forwarded to a paused leader, bytes on a stalled connection) can land
 * after the acquisition gave up and deleted its key, re-creating it under the live lease, where it would block
 * the line for as long as the session renews. etcd applies such a copy within an election or so, or never.
 */
export const LATE_JOIN_WINDOW = 60_000;

/** A key an acquisition put, as its join put it: the value it wrote (on the session's lease). */
export interface Put {
  key: string;
  value: string;
}

/**
 * The keys of a session's ended acquisitions that may still be there: the one place that deletes what an
 * acquisition left. A key is deleted only as its join made it, on this session's lease with the join's value, so
 * the delete never takes a key that is no longer this acquisition's: one a ticket moved to another lease, or one
 * another sandbox restored from the same snapshot made under the same name. Each delete is resent until etcd
 * answers for as long as the session lives: an outage of any length does not strand a key. A key whose join may
 * still land (a send was never answered) is deleted again at each renewal for LATE_JOIN_WINDOW. A lost or closed
 * session needs neither: its keys go with its lease.
 */
export class Orphans {
  readonly #client: EtcdClient;
  readonly #leaseId: string;
  readonly #session: AbortSignal;
  /** Keys a late join may bring back, with when to stop looking (performance.now()). */
  readonly #late = new Map<string, { put: Put; until: number }>();

  constructor(client: EtcdClient, leaseId: string, session: AbortSignal) {
    this.#client = client;
    this.#leaseId = leaseId;
    this.#session = session;
  }

  /** Whether a renewal has keys to sweep. */
  get any(): boolean {
    return this.#late.size > 0;
  }

  /**
   * Deletes `puts` once `joined` has settled (a join in flight could land behind the delete). `unsure`: a send of
   * the join was never answered, so they are swept again at each renewal until LATE_JOIN_WINDOW has passed.
   */
  async leave(puts: readonly Put[], joined: Promise<unknown>, unsure: boolean): Promise<void> {
    await joined.catch(() => {});
    if (unsure) this.watch(puts);
    await this.#delete(puts);
  }

  /** Sweeps `puts` at each renewal for LATE_JOIN_WINDOW: a holding whose join had a send never answered ended. */
  watch(puts: readonly Put[]): void {
    const until = performance.now() + LATE_JOIN_WINDOW;
    for (const put of puts) this.#late.set(put.key, { put, until });
  }

  /** On each renewal: deletes every key a late join may have brought back, then forgets those past the window. */
  sweep(): void {
    const now = performance.now();
    const puts = [...this.#late.values()].map((late) => late.put);
    for (const [key, { until }] of this.#late) if (until <= now) this.#late.delete(key);
    void this.#delete(puts);
  }

  /** One transaction: each key deleted if it is still as its join put it; none once the lease is lost. */
  #delete(puts: readonly Put[]): Promise<unknown> {
    if (this.#session.aborted) return Promise.resolve();
    const lease = this.#leaseId;
    const guarded = puts.map(({ key, value }) =>
      op.txn([cmp.lease(key, "==", lease), cmp.value(key, "==", value)], [op.delete(key)]),
    );
    const send = () =>
      this.#client
        .txn()
        .then(...guarded)
        .commit({ idempotent: true });
    return untilAnswered(send, { signal: this.#session, background: true }).catch(() => {});
  }
}
