import type { EtcdClient } from "../../api/client.js";
import type { LeaseId } from "../../api/codec.js";
import { renewalRefused, sessionClosed, sessionExpired } from "../../errors/catalogue.js";
import { publishSessionLost } from "../../events/channels.js";
import { type EtcdError, isEtcdError } from "../../errors/etcd-error.js";
import { resolveSignal, resolveTimeout } from "../../gateway/config.js";
import { delay } from "../../gateway/signals.js";
import type { CallOptions } from "../../gateway/transport.js";
import { leaseHex } from "../line/keys.js";
import type { KeepAliveMode, LeaseGrant } from "./lease-grant.js";
import { Orphans } from "./orphans.js";

/**
 * A lease owned by this process, kept alive by background renewal or by explicit `renew()`. Everything
 * built on it (mutex keys, election keys) ends with it. The session trusts its lease only until `sentAt +
 * TTL` of the last successful renewal, measured on a monotonic clock from when that request was sent.
 * It knows nothing of what is built on it: locks and elections take a session, as in Go's `concurrency`.
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
  readonly #lost = new AbortController();
  /** @internal What this session's failed acquisitions left, deleted here (and swept on renewal). */
  readonly orphans: Orphans;
  #deadline: number;
  /** Cancels the deadline timer, while one is armed. */
  #deadlineTimer: (() => void) | undefined;
  #stopRenewing: (() => void) | undefined;
  #closed = false;
  /** The lease is gone for sure: revoked by `close()`, or found missing by it. */
  #revoked = false;
  #closing: Promise<boolean> | undefined;
  #closeOutcome: Promise<boolean> | undefined;
  readonly #revokeSends = new ReleaseSends(this);

  /** @internal Made by `etcd.session()`; constructing one starts nothing and sends nothing. */
  constructor(client: EtcdClient, lease: LeaseGrant) {
    this.client = client;
    this.leaseId = lease.id;
    this.ttl = lease.ttl;
    this.keepAlive = lease.keepAlive;
    this.#deadline = lease.sentAt + lease.remaining * 1000;
    this.orphans = new Orphans(client, this.#lost.signal);
  }

  /**
   * @internal Arms the deadline timer and, in `"auto"` mode, background renewal. Called by the factory, and
   * again by a client's shared lease each time it is used after `idle()`.
   */
  start(): this {
    if (this.#lost.signal.aborted) return this;
    this.#armDeadline();
    if (this.keepAlive === "auto") this.#stopRenewing ??= this.#renewEvery();
    return this;
  }

  /**
   * @internal Stops the deadline timer of a manual session nobody is using, so nothing runs between two
   * uses; `alive` still compares with the deadline when asked. `start()` arms it again.
   */
  idle(): void {
    if (this.keepAlive !== "manual") return;
    this.#deadlineTimer?.();
    this.#deadlineTimer = undefined;
  }

  /** Aborts when the lease is lost (expired, revoked, or past its deadline unrenewed) or the session closes. */
  get signal(): AbortSignal {
    return this.#lost.signal;
  }

  /** True while the lease is trusted: not closed, not lost, and its deadline not passed. */
  get alive(): boolean {
    if (this.#lost.signal.aborted) return false;
    if (this.#now() >= this.#deadline) {
      // Noticed within a TTL of the deadline: etcd may well still hold the lease (see #revokeAbandoned).
      this.#lose(sessionExpired(this.leaseId), this.#now() - this.#deadline < this.ttl * 1000);
      return false;
    }
    return true;
  }

  /** Whether `close()` was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** @internal Whether the lease's deadline has not passed yet, closed or not: the server still holds it. */
  beforeDeadline(): boolean {
    return this.#now() < this.#deadline;
  }

  /** Milliseconds until the lease's deadline (0 once passed). */
  remaining(): number {
    return this.alive ? Math.max(0, this.#deadline - this.#now()) : 0;
  }

  /** The lease ID in lowercase hex, as Go's concurrency package and this SDK begin a contender's key. */
  get leaseHex(): string {
    return leaseHex(this.leaseId);
  }

  /** @internal How `close()` ended, once it was called: whether the lease was still there to revoke. */
  get revocation(): Promise<boolean> | undefined {
    return this.#closeOutcome;
  }

  /**
   * Renews the lease to its full TTL with one request and moves the deadline to when that request was sent
   * plus the TTL. SESSION_EXPIRED if the lease is gone or the session already lost it.
   */
  async renew(options: CallOptions = {}): Promise<number> {
    this.#throwIfDead();
    const sentAt = this.#now();
    try {
      const { ttl } = await this.client.lease.keepAliveOnce(this.leaseId, options);
      if (!this.#lost.signal.aborted) {
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
   * @internal etcd refused a request of this session for want of its lease (LEASE_NOT_FOUND: expired or
   * revoked, whatever the deadline says, as after a long-paused leader's revocation): the session has lost it,
   * and says so to everything built on it at once. Returns the session's reason (SESSION_EXPIRED, or what
   * ended it first).
   */
  lostLease(cause: EtcdError): EtcdError {
    this.#lose(sessionExpired(this.leaseId, cause));
    return this.#lost.signal.reason as EtcdError;
  }

  /**
   * Runs `work` while renewing the lease, and stops renewing when it settles: explicit, scoped renewal for
   * `"manual"` sessions (a Lambda waiting for a lock or working under one). The first renewal goes out at
   * once if less than two thirds of the TTL is left, then every ttl/3. No timer outlives the call; a process
   * frozen meanwhile renews nothing and loses the lease as it should.
   */
  async renewWhile<T>(work: () => Promise<T>): Promise<T> {
    const stop = this.#renewEvery();
    try {
      return await work();
    } finally {
      stop();
    }
  }

  /**
   * Stops renewal and revokes the lease, which deletes every key of the session (releasing its locks).
   * Resolves to whether the lease was still there to revoke (false: it had already expired). The
   * revocation is resent after a lost answer; if `close()` fails, calling it again tries again.
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
    this.#closed = true;
    this.#closing ??= this.#revoke(options).finally(() => (this.#closing = undefined));
    this.#closeOutcome = this.#closing;
    this.#lose(sessionClosed(this.leaseId));
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

  /** For `await using`: closes the session. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #throwIfDead(): void {
    if (!this.alive) throw this.#lost.signal.reason as EtcdError;
  }

  /** `abandoned`: the deadline passed unrenewed, and the lease may live on in etcd. */
  #lose(reason: EtcdError, abandoned = false): void {
    this.#stopRenewing?.();
    this.#deadlineTimer?.();
    this.#stopRenewing = this.#deadlineTimer = undefined;
    if (this.#lost.signal.aborted) return;
    // Told before the abort, whose listeners tell of the locks lost with it.
    const events = this.client.transport.events;
    if (events.on && !this.#closed) events.emit({ type: "session.lost", leaseId: this.leaseId, code: reason.code });
    if (!this.#closed) publishSessionLost(this.leaseId, reason.code);
    this.#lost.abort(reason);
    if (abandoned && !this.#closed) void this.#revokeAbandoned();
  }

  /**
   * The deadline passed without a renewal (an outage, a cluster without a leader): the lease is lost to this
   * session, but etcd may still hold it, and a newly elected leader extends every lease by its TTL, so the
   * session's keys could block their lines for another TTL after the cluster is back. Go leaves them to
   * expire. Here the lease is revoked as soon as etcd answers: resent after growing pauses for at most two
   * TTLs, on timers that keep no process alive. Nothing of it is in use any more: its holders were told.
   */
  async #revokeAbandoned(): Promise<void> {
    const until = this.#now() + 2 * this.ttl * 1000;
    for (let failures = 0; !this.#revoked && !this.#closed && this.#now() < until; failures++) {
      try {
        await this.client.lease.revoke(this.leaseId, {
          timeout: Math.max(1, Math.min(until - this.#now(), this.ttl * 1000)),
          idempotent: true,
        });
        this.#revoked = true;
      } catch (error) {
        if (isEtcdError(error, "LEASE_NOT_FOUND")) this.#revoked = true;
        else await delay(resendPause(failures), undefined, true);
      }
    }
  }

  /** The client's clock: the runtime's, or a test's (see EtcdOptions.clock). */
  #now(): number {
    return this.client.clock.now();
  }

  #armDeadline(): void {
    this.#deadlineTimer?.();
    // Timers may fire a fraction of a millisecond early by performance.now(): re-arm until really past.
    this.#deadlineTimer = this.client.clock.setTimer(
      () => {
        if (this.alive) this.#armDeadline();
      },
      Math.ceil(this.#deadline - this.#now()) + 1,
    );
  }

  /**
   * Renews whenever two thirds of the TTL or less is left (every ttl/3 once in step; at once if already
   * less is left), sooner after a failure, until the returned function is called or the lease is lost.
   */
  #renewEvery(): () => void {
    let cancel: (() => void) | undefined;
    let stopped = false;
    const dueIn = () => Math.max(0, this.remaining() - (this.ttl * 1000 * 2) / 3);
    const schedule = (delay: number) => {
      cancel = this.client.clock.setTimer(() => {
        if (stopped || !this.alive) return;
        // Each renewal may take at most the time left, so a slow answer cannot extend trust past the
        // deadline; each endpoint gets a share of it, so a silent member cannot use it all up.
        const left = this.remaining();
        const endpoints = Math.max(2, this.client.config.endpoints.length);
        this.renew({ timeout: Math.max(1, left), attemptTimeout: Math.max(250, left / endpoints) }).then(
          () => stopped || schedule(dueIn()),
          (error: unknown) => {
            const events = this.client.transport.events;
            if (events.on)
              events.emit({
                type: "session.renewFailed",
                leaseId: this.leaseId,
                code: isEtcdError(error) ? error.code : "UNKNOWN",
              });
            // A transient failure: try again soon while the deadline allows; a lost lease has already aborted.
            if (!stopped && this.alive) schedule(Math.min(1_000, this.remaining() / 2));
          },
        );
      }, delay);
    };
    schedule(dueIn());
    return () => {
      stopped = true;
      cancel?.();
    };
  }
}

/**
 * The sends of one release (a held key's guarded delete, a lease's revocation), to decide its outcome from what
 * the server shows when an answer was lost and the release was sent again. A repeat finds the key (or lease)
 * already gone: if an earlier send left while the lease was within its deadline, that is success (that send did
 * it and its answer was lost, or the lease ended after it, that is after the work). Only when the first send
 * finds it gone was it lost before the release.
 */
export class ReleaseSends {
  readonly #lease: { beforeDeadline(): boolean };
  #withinDeadline = 0;
  #earlierWithinDeadline = false;

  constructor(lease: { beforeDeadline(): boolean }) {
    this.#lease = lease;
  }

  /** Pass as the call's `onSent`: records one send. */
  readonly sent = (): void => {
    this.#earlierWithinDeadline = this.#withinDeadline > 0;
    if (this.#lease.beforeDeadline()) this.#withinDeadline++;
  };

  /** Whether a send left while the lease was within its deadline. */
  get sentWithinDeadline(): boolean {
    return this.#withinDeadline > 0;
  }

  /** Whether "already gone" in the latest answer means the release is done. */
  get goneMeansDone(): boolean {
    return this.#earlierWithinDeadline;
  }
}

/** The pause before the next background resend after `failures` failed sends: 250 ms, doubled, at most 2 s. */
export function resendPause(failures: number): number {
  return Math.min(250 * 2 ** failures, 2_000);
}
