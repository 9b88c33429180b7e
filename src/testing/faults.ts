/** Fault injection state; the HTTP layer consults it on every request. */
export class Faults {
  /** Requests still to be refused with 503 "no leader". */
  unavailableCount = 0;
  /** Real (wall-clock) delay before every answer. */
  latencyMs = 0;
  /** Requests still to be applied with their answer lost, and the path they must have (any when undefined). */
  private lostAnswers: { count: number; path: string | undefined } = { count: 0, path: undefined };

  constructor(private readonly hooks: { cutStreams: () => void; leaderChange: () => void }) {}

  /** The next `count` requests (any endpoint) answer 503, code 14 "etcdserver: no leader". */
  unavailable(count = 1): void {
    this.unavailableCount += count;
  }

  /**
   * The next `count` unary requests (on `path`, e.g. "/v3/kv/txn", or any) are applied, and then their answer
   * is lost: the client's fetch rejects as when a connection drops after the server answered. A write's outcome
   * is then unknown to the client (`indeterminate`), while the mock has applied it.
   */
  loseAnswers(count = 1, path?: string): void {
    this.lostAnswers = { count, path };
  }

  /** Delays every following request by `ms` of real time (0 turns it off); the request's signal aborts the wait. */
  latency(ms: number): void {
    this.latencyMs = ms;
  }

  /** Errors every open watch stream's body, as a dropped connection would. */
  cutStreams(): void {
    this.hooks.cutStreams();
  }

  /** A new leader: raft_term + 1 and every lease back to its full TTL, as etcd does on promotion. */
  leaderChange(): void {
    this.hooks.leaderChange();
  }

  /** Turns every fault off. */
  clear(): void {
    this.unavailableCount = 0;
    this.latencyMs = 0;
    this.lostAnswers = { count: 0, path: undefined };
  }

  /** @internal consumes one lost answer for a request on `path`, if one is pending */
  takeLostAnswer(path: string): boolean {
    const lost = this.lostAnswers;
    if (lost.count <= 0 || (lost.path !== undefined && lost.path !== path)) return false;
    lost.count--;
    return true;
  }

  /** @internal consumes one unavailable answer if any is pending */
  takeUnavailable(): boolean {
    if (this.unavailableCount <= 0) return false;
    this.unavailableCount--;
    return true;
  }
}
