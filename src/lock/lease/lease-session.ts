import { renewalRefused, sessionClosed } from "../../errors/catalogue.js";
import { type EtcdError, isEtcdError } from "../../errors/etcd-error.js";
import { resolveSignal, resolveTimeout } from "../../gateway/config.js";
import type { CallOptions } from "../../gateway/transport.js";
import { renewEvery, revokeAbandoned } from "./keep-alive.js";
import { ReleaseSends } from "./release-sends.js";
import { TrustedLease } from "./trust.js";

/**
 * A lease owned by this process, kept alive by background renewal (`"auto"`) or by explicit `renew()`
 * (`"manual"`), and revoked by `close()`. Everything built on it (lock keys, election keys) ends with it; it
 * knows nothing of what is built on it: locks and elections take a session, as in Go's `concurrency`. What it
 * trusts of its lease, and until when, is TrustedLease's.
 */
export class LeaseSession extends TrustedLease {
  #stopRenewing: (() => void) | undefined;
  /** The lease is gone for sure: revoked by `close()`, or found missing by it. */
  #revoked = false;
  #closing: Promise<boolean> | undefined;
  readonly #revokeSends = new ReleaseSends(this);

  /**
   * @internal Arms the deadline timer and, in `"auto"` mode, background renewal. Called by the factory, and
   * again by a client's shared lease each time it is used after `idle()`.
   */
  start(): this {
    if (this.signal.aborted) return this;
    this.armDeadline();
    if (this.keepAlive === "auto") this.#stopRenewing ??= renewEvery(this);
    return this;
  }

  /**
   * @internal Stops the deadline timer of a manual session nobody is using, so nothing runs between two uses;
   * `alive` still compares with the deadline when asked. `start()` arms it again.
   */
  idle(): void {
    if (this.keepAlive === "manual") this.armDeadline(false);
  }

  /**
   * Renews the lease to its full TTL with one request and moves the deadline to when that request was sent
   * plus the TTL. SESSION_EXPIRED if the lease is gone or the session already lost it.
   */
  async renew(options: CallOptions = {}): Promise<number> {
    this.#throwIfDead();
    const sentAt = this.now();
    try {
      const { ttl } = await this.client.lease.keepAliveOnce(this.leaseId, options);
      if (!this.signal.aborted) {
        this.renewed(sentAt, ttl);
        const events = this.client.transport.events;
        if (events.on) events.emit({ type: "session.renewed", leaseId: this.leaseId, ttl });
        // In the background: a key a late join brought back goes at the next renewal.
        if (this.orphans.any) this.orphans.sweep();
      }
      this.#throwIfDead();
      return ttl;
    } catch (error) {
      if (isEtcdError(error, "LEASE_NOT_FOUND")) throw this.lostLease(error);
      // Refused for good: retrying would only be refused again until the deadline. The lease is as lost.
      if (isEtcdError(error, "PERMISSION_DENIED")) {
        const refused = renewalRefused(this.leaseId, error);
        this.lose(refused);
        throw refused;
      }
      throw error;
    }
  }

  /**
   * Runs `work` while renewing the lease, and stops renewing when it settles: explicit, scoped renewal for
   * `"manual"` sessions (a Lambda waiting for a lock or working under one). The first renewal goes out at once
   * if less than two thirds of the TTL is left, then every ttl/3. No timer outlives the call; a process frozen
   * meanwhile renews nothing and loses the lease as it should.
   */
  async renewWhile<T>(work: () => Promise<T>): Promise<T> {
    const stop = renewEvery(this);
    try {
      return await work();
    } finally {
      stop();
    }
  }

  /**
   * Stops renewal and revokes the lease, which deletes every key of the session (releasing its locks). Resolves
   * to whether the lease was still there to revoke (false: it had already expired). The revocation is resent
   * after a lost answer; if `close()` fails, calling it again tries again.
   */
  close(options: CallOptions = {}): Promise<boolean> {
    if (this.#revoked) return Promise.resolve(false);
    // Bad options are refused before anything changes: the session stays open.
    try {
      resolveTimeout(options.timeout, "timeout");
      resolveSignal(options.signal);
    } catch (error) {
      return Promise.reject(error);
    }
    this.#closing ??= this.#revoke(options).finally(() => (this.#closing = undefined));
    this.closing(this.#closing, sessionClosed(this.leaseId));
    return this.#closing;
  }

  async #revoke(options: CallOptions): Promise<boolean> {
    try {
      await this.client.lease.revoke(this.leaseId, { ...options, idempotent: true, onSent: this.#revokeSends.sent });
      this.#revoked = true;
      return true;
    } catch (error) {
      if (!isEtcdError(error, "LEASE_NOT_FOUND")) throw error;
      this.#revoked = true;
      // Gone on a resend: our earlier send revoked it (its answer was lost), unless that send left late.
      return this.#revokeSends.goneMeansDone;
    }
  }

  /**
   * For `await using`: closes the session, and never throws. A revocation that fails (etcd unreachable) leaves
   * the lease to expire within its TTL, as `close()` would say; thrown here, it would wrap the error that
   * matters (a lock's LOCK_LOST, the body's own) in a SuppressedError. Call `close()` to learn the outcome.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close().catch(() => {});
  }

  #throwIfDead(): void {
    if (!this.alive) throw this.signal.reason as EtcdError;
  }

  /** Renewal stops; a lease abandoned past its deadline is revoked as soon as etcd answers (keep-alive.ts). */
  protected override lost(abandoned: boolean): void {
    this.#stopRenewing?.();
    this.#stopRenewing = undefined;
    if (!abandoned || this.closed) return;
    const over = () => this.#revoked || this.closed;
    void revokeAbandoned(this.client, this.leaseId, this.ttl, over).then((gone) => {
      if (gone) this.#revoked = true;
    });
  }
}
