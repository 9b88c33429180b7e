// What happens on one hot name, recorded on one clock (every contender runs in this process): each
// acquisition in order, the handoff latency (from the holder's unlock() call to the next holder's lock()
// resolving, counted only when that next holder was already waiting), and failures by code.
import { Tally } from "./bounded.mjs";

export class HandoffLog {
  acquisitions = [];
  latencies = [];
  /** When each of `latencies` ended (the next holder's lock() resolving), on the same clock. */
  handedAt = [];
  failures = new Tally();
  #releasedAt;

  /**
   * `calledAt`: when this contender started waiting. `order`: its place in the line by the lock's own
   * rule (etcd-edge: the key's create revision; a retry loop has no line, so: when it started trying).
   */
  acquired(calledAt, order) {
    const now = performance.now();
    if (this.#releasedAt !== undefined && calledAt < this.#releasedAt) {
      this.latencies.push(now - this.#releasedAt);
      this.handedAt.push(now);
    }
    this.#releasedAt = undefined;
    this.acquisitions.push({ at: now, order });
  }

  /** Call right before unlock(). */
  releasing() {
    this.#releasedAt = performance.now();
  }

  /** The latencies of the handoffs that ended `ms` or more after the first acquisition. */
  latenciesAfter(ms) {
    const from = (this.acquisitions[0]?.at ?? 0) + ms;
    return this.latencies.filter((_, i) => this.handedAt[i] >= from);
  }

  countBefore(deadline) {
    return this.acquisitions.filter((a) => a.at <= deadline).length;
  }

  /** Acquisitions that came before one that joined the line earlier: 0 means first come, first served. */
  overtakes() {
    let count = 0;
    let highest = -Infinity;
    for (const { order } of this.acquisitions) {
      if (order < highest) count++;
      else highest = order;
    }
    return count;
  }
}
