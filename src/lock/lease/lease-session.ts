import type { EtcdClient } from "../../api/client.js";
import type { LeaseId } from "../../api/codec.js";
import { renewalRefused, sessionClosed, sessionExpired } from "../../errors/catalogue.js";
import { type EtcdError, isEtcdError } from "../../errors/etcd-error.js";
import { publishSessionLost } from "../../events/channels.js";
import { resolveSignal, resolveTimeout } from "../../gateway/config.js";
import type { CallOptions } from "../../gateway/transport.js";
import { leaseHex } from "../line/keys.js";
import { renewEvery, revokeUntilGone } from "./keep-alive.js";
import { Orphans } from "./orphans.js";
import { ReleaseSends } from "./release-sends.js";

/**
 * How a session's lease is renewed: `"auto"` in the background, on a timer that does not keep the process
 * alive; `"manual"` only by `renew()` or `renewWhile()`, for runtimes that freeze between invocations.
 */
export type KeepAliveMode = "auto" | "manual";

/** A lease as a session starts with it: how long it was granted for and how long it had left when asked. */
export interface LeaseGrant {
  id: LeaseId;
  /** Granted TTL in seconds. */
  ttl: number;
  /** Seconds left when the server answered. */
  remaining: number;
  /** When the request that learned `remaining` was sent, on the monotonic clock. */
  sentAt: number;
  keepAlive: KeepAliveMode;
}

/**
 * A lease owned by this process: what it trusts of it, and its keeping. Everything built on it (lock keys,
 * election keys) ends with it; it knows nothing of what is built on it: locks and elections take a session, as
 * in Go's `concurrency`.
 *
 * Trust: until `sentAt + TTL` of the last renewal, on a monotonic clock from when that request was *sent*, and
 * not once lost (found gone, revoked, refused) or closed. `alive` only compares; a deadline found past ends the
 * trust where it is found: the deadline timer, or `trusted()` at the start of every acquisition, renewal and
 * release (a frozen process's timers have not run yet when it thaws). Keeping: renewal in the background
 * (`"auto"`) or only by `renew()` / `renewWhile()` (`"manual"`), and `close()`, which revokes the lease.
 */
export class LeaseSession {
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
  #stopRenewing: (() => void) | undefined;
  /** How the latest `close()` ended, once one was called: whether the lease was still there to revoke. */
  #revocation: Promise<boolean> | undefined;
  /** The revocation in flight, shared by every `close()` meanwhile. */
  #closing: Promise<boolean> | undefined;
  /** The lease is gone for sure: revoked by `close()`, found missing by it, or by an abandoned lease's revocation. */
  #revoked = false;
  readonly #revokeSends = new ReleaseSends(this);

  /** @internal Constructing one starts nothing and sends nothing. */
  constructor(client: EtcdClient, lease: LeaseGrant) {
    this.client = client;
    this.leaseId = lease.id;
    this.ttl = lease.ttl;
    this.keepAlive = lease.keepAlive;
    this.#deadline = lease.sentAt + lease.remaining * 1000;
    this.orphans = new Orphans(client, lease.id, this.#lost.signal);
  }

  /** Aborts when the lease is lost (expired, revoked, or past its deadline unrenewed) or the session closes. */
  get signal(): AbortSignal {
    return this.#lost.signal;
  }

  /** True while the lease is trusted: not closed, not lost, and its deadline not passed. */
  get alive(): boolean {
    return !this.#lost.signal.aborted && this.client.clock.now() < this.#deadline;
  }

  /** Whether `close()` was called. */
  get closed(): boolean {
    return this.#revocation !== undefined;
  }

  /** The lease ID in lowercase hex, as Go's concurrency package and this SDK begin a contender's key. */
  get leaseHex(): string {
    return leaseHex(this.leaseId);
  }

  /** @internal How `close()` ended, once it was called: whether the lease was still there to revoke. */
  get revocation(): Promise<boolean> | undefined {
    return this.#revocation;
  }

  /**
   * @internal Whether the lease is trusted now. A deadline found past ends the trust here, told to everything
   * built on it; noticed within a TTL of the deadline, etcd may well still hold the lease: it is revoked as soon
   * as etcd answers (`revokeUntilGone`).
   */
  trusted(): boolean {
    if (this.#lost.signal.aborted) return false;
    const late = this.client.clock.now() - this.#deadline;
    if (late < 0) return true;
    this.#lose(sessionExpired(this.leaseId), late < this.ttl * 1000);
    return false;
  }

  /** @internal Whether the lease's deadline has not passed yet, closed or not: the server still holds it. */
  beforeDeadline(): boolean {
    return this.client.clock.now() < this.#deadline;
  }

  /** Milliseconds until the lease's deadline (0 once passed or lost). */
  remaining(): number {
    return this.alive ? Math.max(0, this.#deadline - this.client.clock.now()) : 0;
  }

  /**
   * @internal Arms the deadline timer and, in `"auto"` mode, background renewal. Called by the factory, and
   * again by a client's shared lease each time it is used after `idle()`.
   */
  start(): this {
    if (this.#lost.signal.aborted) return this;
    this.#armDeadline();
    if (this.keepAlive === "auto") this.#stopRenewing ??= renewEvery(this);
    return this;
  }

  /**
   * @internal Stops the deadline timer of a manual session nobody is using, so nothing runs between two uses;
   * `trusted()` still finds a deadline past when it is next used. `start()` arms it again.
   */
  idle(): void {
    if (this.keepAlive === "manual") this.#disarmDeadline();
  }

  /**
   * Renews the lease to its full TTL with one request and moves the deadline to when that request was sent
   * plus the TTL. SESSION_EXPIRED if the lease is gone or the session already lost it.
   */
  async renew(options: CallOptions = {}): Promise<number> {
    this.#throwIfDead();
    const sentAt = this.client.clock.now();
    try {
      const { ttl } = await this.client.lease.keepAliveOnce(this.leaseId, options);
      if (!this.#lost.signal.aborted) {
        // The deadline moves on, never back.
        this.#deadline = Math.max(this.#deadline, sentAt + ttl * 1000);
        this.#armDeadline();
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
        this.#lose(refused);
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
    this.#revocation = this.#closing;
    this.#lose(sessionClosed(this.leaseId));
    return this.#closing;
  }

  /**
   * For `await using`: closes the session, and never throws. A revocation that fails (etcd unreachable) leaves
   * the lease to expire within its TTL, as `close()` would say; thrown here, it would wrap the error that
   * matters (a lock's LOCK_LOST, the body's own) in a SuppressedError. Call `close()` to learn the outcome.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close().catch(() => {});
  }

  /**
   * @internal etcd refused a request for want of the lease (LEASE_NOT_FOUND), whatever the deadline says: lost,
   * told to everything built on it at once. Returns the session's reason (SESSION_EXPIRED, or what ended it first).
   */
  lostLease(cause: EtcdError): EtcdError {
    this.#lose(sessionExpired(this.leaseId, cause));
    return this.#lost.signal.reason as EtcdError;
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

  #throwIfDead(): void {
    if (!this.trusted()) throw this.#lost.signal.reason as EtcdError;
  }

  /** Arms the deadline timer (again). Timers may fire a fraction of a millisecond early: re-armed until past. */
  #armDeadline(): void {
    this.#disarmDeadline();
    if (this.#lost.signal.aborted) return;
    const due = Math.ceil(this.#deadline - this.client.clock.now()) + 1;
    this.#deadlineTimer = this.client.clock.setTimer(() => {
      if (this.trusted()) this.#armDeadline();
    }, due);
  }

  #disarmDeadline(): void {
    this.#deadlineTimer?.();
    this.#deadlineTimer = undefined;
  }

  /**
   * The lease is no longer trusted: told to everything built on it (`signal`). Renewal stops. `abandoned`: its
   * deadline passed unrenewed and etcd may still hold it: it is revoked as soon as etcd answers.
   */
  #lose(reason: EtcdError, abandoned = false): void {
    this.#disarmDeadline();
    if (this.#lost.signal.aborted) return;
    this.#stopRenewing?.();
    this.#stopRenewing = undefined;
    if (abandoned && !this.closed) {
      const over = () => this.#revoked || this.closed;
      void revokeUntilGone(this.client, this.leaseId, this.ttl, over).then((gone) => {
        if (gone) this.#revoked = true;
      });
    }
    // Told before the abort, whose listeners tell of the locks lost with it.
    if (!this.closed) {
      const events = this.client.transport.events;
      if (events.on) events.emit({ type: "session.lost", leaseId: this.leaseId, code: reason.code });
      publishSessionLost(this.leaseId, reason.code);
    }
    this.#lost.abort(reason);
  }
}
