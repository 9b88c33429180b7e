/** Fault injection state; the HTTP layer consults it on every request. */
export class Faults {
  /** Requests still to be refused with 503 "no leader". */
  unavailableCount = 0;
  /** Real (wall-clock) delay before every answer. */
  latencyMs = 0;

  constructor(private readonly hooks: { cutStreams: () => void; leaderChange: () => void }) {}

  /** The next `count` requests (any endpoint) answer 503, code 14 "etcdserver: no leader". */
  unavailable(count = 1): void {
    this.unavailableCount += count;
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
  }

  /** @internal consumes one unavailable answer if any is pending */
  takeUnavailable(): boolean {
    if (this.unavailableCount <= 0) return false;
    this.unavailableCount--;
    return true;
  }
}
