import type { BinKey } from "./wire/bytes.js";
import { Errors } from "./wire/errors.js";

/** etcd's minimum TTL with the default 1 s election timeout: ceil(1.5 × election timeout). */
export const MIN_LEASE_TTL = 2;
/** etcd's MaxLeaseTTL. */
export const MAX_LEASE_TTL = 9_000_000_000;

export interface Lease {
  readonly id: bigint;
  /** Seconds, after raising to the minimum. */
  readonly ttl: number;
  /** Virtual ms. */
  expiry: number;
  readonly keys: Set<BinKey>;
  /** Tie-breaker for listing, as granting order. */
  readonly seq: number;
}

/** Leases on the member's clock. Key deletion on expiry/revoke is the caller's job (it owns the store). */
export class Lessor {
  private readonly leases = new Map<bigint, Lease>();
  private seq = 0;

  constructor(private readonly now: () => number) {}

  /** `id` 0 is not allowed here: the member picks one from its request ID generator, as etcd's server does. */
  grant(id: bigint, requestedTtl: number): Lease {
    if (requestedTtl > MAX_LEASE_TTL) throw Errors.leaseTTLTooLarge();
    if (this.leases.has(id)) throw Errors.leaseExists();
    const ttl = Math.max(requestedTtl, MIN_LEASE_TTL);
    const lease: Lease = { id, ttl, expiry: this.now() + ttl * 1000, keys: new Set(), seq: this.seq++ };
    this.leases.set(id, lease);
    return lease;
  }

  get(id: bigint): Lease | undefined {
    return this.leases.get(id);
  }

  require(id: bigint): Lease {
    const lease = this.leases.get(id);
    if (!lease) throw Errors.leaseNotFound();
    return lease;
  }

  remove(id: bigint): void {
    this.leases.delete(id);
  }

  renew(id: bigint): Lease | undefined {
    const lease = this.leases.get(id);
    if (lease) lease.expiry = this.now() + lease.ttl * 1000;
    return lease;
  }

  /**
   * Seconds left, as etcd's TimeToLive truncates them. Some time always passes between two requests to a real
   * member, so a 60 s lease asked right after its grant says 59: the mock counts a whole second as just begun.
   */
  remaining(lease: Lease): number {
    return Math.max(0, Math.ceil((lease.expiry - this.now()) / 1000) - 1);
  }

  /** etcd refreshes every lease on a new leader (Promote): a dead holder gets its full TTL again. */
  refreshAll(): void {
    for (const lease of this.leases.values()) lease.expiry = this.now() + lease.ttl * 1000;
  }

  /** By expiry then grant order, as 3.4's Leases() sorts. */
  list(): Lease[] {
    return [...this.leases.values()].sort((a, b) => a.expiry - b.expiry || a.seq - b.seq);
  }

  nextExpiry(): Lease | undefined {
    return this.list()[0];
  }

  attach(id: bigint, key: BinKey): void {
    this.leases.get(id)?.keys.add(key);
  }

  detach(id: bigint, key: BinKey): void {
    this.leases.get(id)?.keys.delete(key);
  }

  clear(): void {
    this.leases.clear();
  }
}
