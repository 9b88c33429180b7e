import type { EtcdClient } from "../../api/client.js";
import type { LeaseId } from "../../api/codec.js";
import { sessionExpired } from "../../errors/catalogue.js";
import type { EtcdError } from "../../errors/etcd-error.js";
import { publishSessionLost } from "../../events/channels.js";
import { leaseHex } from "../line/keys.js";
import type { KeepAliveMode, LeaseGrant } from "./lease-grant.js";
import { Orphans } from "./orphans.js";

/**
 * A lease as its session trusts it: until `sentAt + TTL` of the last renewal, on a monotonic clock from when that
 * request was sent, and not once lost (expired, revoked, found gone) or closed; everything built on it ends with
 * that trust (`signal`). Its keeping (renewal, closing) is LeaseSession's.
 */
export class TrustedLease {
  /** The session's lease: every key it puts is bound to it, and ends with it. */
  readonly leaseId: LeaseId;
  /** The lease's granted TTL in seconds. */
  readonly ttl: number;
  /** How the lease is renewed: in the background (`"auto"`) or only when asked (`"manual"`). */
  readonly keepAlive: KeepAliveMode;
  /** @internal The client the session's requests go through. */
  readonly client: EtcdClient;
  /** @internal What this session's failed acquisitions left: deleted there, and swept on renewal. */
  readonly orphans: Orphans;
  readonly #lost = new AbortController();
  #deadline: number;
  /** Cancels the deadline timer, while one is armed. */
  #deadlineTimer: (() => void) | undefined;
  #revocation: Promise<boolean> | undefined;

  /** @internal Constructing one starts nothing and sends nothing. */
  constructor(client: EtcdClient, lease: LeaseGrant) {
    this.client = client;
    this.leaseId = lease.id;
    this.ttl = lease.ttl;
    this.keepAlive = lease.keepAlive;
    this.#deadline = lease.sentAt + lease.remaining * 1000;
    this.orphans = new Orphans(client, this.#lost.signal);
  }

  /** Aborts when the lease is lost (expired, revoked, or past its deadline unrenewed) or the session closes. */
  get signal(): AbortSignal {
    return this.#lost.signal;
  }

  /** True while the lease is trusted: not closed, not lost, and its deadline not passed. */
  get alive(): boolean {
    if (this.#lost.signal.aborted) return false;
    if (this.now() < this.#deadline) return true;
    // Noticed within a TTL of the deadline: etcd may well still hold the lease (see revokeAbandoned).
    this.lose(sessionExpired(this.leaseId), this.now() - this.#deadline < this.ttl * 1000);
    return false;
  }

  /** Whether `close()` was called. */
  get closed(): boolean {
    return this.#revocation !== undefined;
  }

  /** @internal How `close()` ended, once it was called: whether the lease was still there to revoke. */
  get revocation(): Promise<boolean> | undefined {
    return this.#revocation;
  }

  /** @internal Whether the lease's deadline has not passed yet, closed or not: the server still holds it. */
  beforeDeadline(): boolean {
    return this.now() < this.#deadline;
  }

  /** Milliseconds until the lease's deadline (0 once passed). */
  remaining(): number {
    return this.alive ? Math.max(0, this.#deadline - this.now()) : 0;
  }

  /** The lease ID in lowercase hex, as Go's concurrency package and this SDK begin a contender's key. */
  get leaseHex(): string {
    return leaseHex(this.leaseId);
  }

  /**
   * @internal etcd refused a request for want of the lease (LEASE_NOT_FOUND), whatever the deadline says: lost,
   * told to everything built on it at once. Returns the session's reason (SESSION_EXPIRED, or what ended it first).
   */
  lostLease(cause: EtcdError): EtcdError {
    this.lose(sessionExpired(this.leaseId, cause));
    return this.#lost.signal.reason as EtcdError;
  }

  /** The client's clock: the runtime's, or a test's (see EtcdOptions.clock). */
  protected now(): number {
    return this.client.clock.now();
  }

  /** A renewal sent at `sentAt` was answered with `ttl`: the deadline moves on (never back). */
  protected renewed(sentAt: number, ttl: number): void {
    this.#deadline = Math.max(this.#deadline, sentAt + ttl * 1000);
    this.armDeadline();
  }

  /** Arms the deadline timer (again), or stops it (`false`: a manual session nobody is using). */
  protected armDeadline(armed = true): void {
    this.#deadlineTimer?.();
    this.#deadlineTimer = undefined;
    if (!armed || this.#lost.signal.aborted) return;
    // Timers may fire a fraction of a millisecond early by performance.now(): re-arm until really past.
    this.#deadlineTimer = this.client.clock.setTimer(
      () => {
        if (this.alive) this.armDeadline();
      },
      Math.ceil(this.#deadline - this.now()) + 1,
    );
  }

  /** The owner closes the session: its end is `revocation`'s outcome. */
  protected closing(revocation: Promise<boolean>, reason: EtcdError): void {
    this.#revocation = revocation;
    this.lose(reason);
  }

  /** The lease is no longer trusted. `abandoned`: its deadline passed unrenewed, and it may live on in etcd. */
  protected lose(reason: EtcdError, abandoned = false): void {
    this.armDeadline(false);
    if (this.#lost.signal.aborted) return;
    this.lost(abandoned);
    // Told before the abort, whose listeners tell of the locks lost with it.
    if (!this.closed) {
      const events = this.client.transport.events;
      if (events.on) events.emit({ type: "session.lost", leaseId: this.leaseId, code: reason.code });
      publishSessionLost(this.leaseId, reason.code);
    }
    this.#lost.abort(reason);
  }

  /** What keeping the lease stops when it is lost (LeaseSession's renewal). */
  protected lost(_abandoned: boolean): void {}
}
