import { type LeaseId } from "../codec.js";
import { EtcdError, invalidArgument, isEtcdError } from "../errors.js";
import { leaseIdArg } from "../args.js";
import type { CallOptions } from "../gateway/transport.js";
import type { Etcd } from "../client.js";
import { untilAborted } from "../gateway/signals.js";
import { backgroundTimer, now } from "./clock.js";
import { Election } from "./election.js";
import { Mutex } from "./mutex.js";

export type KeepAliveMode = "auto" | "manual";

export interface SessionOptions extends CallOptions {
  /** Lease TTL in seconds. Default 60, as in etcd's Go client. */
  ttl?: number | undefined;
  /**
   * `"auto"`: renew every ttl/3 on a timer that does not keep the process alive. `"manual"`: no renewal
   * timer at all; call `renew()` (for frozen Lambdas and Workers between requests). Default `"auto"`.
   */
  keepAlive?: KeepAliveMode | undefined;
  /** Adopt an existing lease instead of granting a new one (its remaining TTL is read from the server). */
  leaseId?: LeaseId | undefined;
}

export const DEFAULT_SESSION_TTL = 60;

/**
 * A lease owned by this process, kept alive by background renewal or by explicit `renew()`. Everything
 * built on it (mutex keys, election keys) ends with it. The session trusts its lease only until `sentAt +
 * TTL` of the last successful renewal, measured on a monotonic clock from when that request was sent.
 */
export class Session {
  readonly leaseId: LeaseId;
  /** The lease's granted TTL in seconds. */
  readonly ttl: number;
  readonly keepAlive: KeepAliveMode;
  /** @internal */
  readonly etcd: Etcd;
  readonly #lost = new AbortController();
  #deadline: number;
  #deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  #stopRenewing: (() => void) | undefined;
  #closed = false;
  readonly #localTurns = new Map<string, Promise<void>>();

  /** @internal Use `etcd.session()`. */
  constructor(etcd: Etcd, lease: { id: LeaseId; ttl: number; remaining: number; sentAt: number }, keepAlive: KeepAliveMode) {
    this.etcd = etcd;
    this.leaseId = lease.id;
    this.ttl = lease.ttl;
    this.keepAlive = keepAlive;
    this.#deadline = lease.sentAt + lease.remaining * 1000;
    this.#armDeadline();
    if (keepAlive === "auto") this.#stopRenewing = this.#renewEvery();
  }

  /** @internal */
  static async create(etcd: Etcd, options: SessionOptions = {}): Promise<Session> {
    const keepAlive = options.keepAlive ?? "auto";
    if (keepAlive !== "auto" && keepAlive !== "manual") {
      throw invalidArgument(`keepAlive must be "auto" or "manual", got ${String(keepAlive)}`);
    }
    const sentAt = now();
    if (options.leaseId !== undefined) {
      const leaseId = leaseIdArg(options.leaseId, "leaseId");
      const lease = await etcd.lease.timeToLive(leaseId, options).catch((error: unknown) => {
        throw isEtcdError(error, "LEASE_NOT_FOUND") ? sessionExpired(leaseId, error) : error;
      });
      return new Session(etcd, { id: leaseId, ttl: lease.grantedTtl, remaining: lease.ttl, sentAt }, keepAlive);
    }
    const lease = await etcd.lease.grant(options.ttl ?? DEFAULT_SESSION_TTL, options);
    return new Session(etcd, { id: lease.id, ttl: lease.ttl, remaining: lease.ttl, sentAt }, keepAlive);
  }

  /** Aborts when the lease is lost (expired, revoked, or past its deadline unrenewed) or the session closes. */
  get signal(): AbortSignal {
    return this.#lost.signal;
  }

  /** True while the lease is trusted: not closed, not lost, and its deadline not passed. */
  get alive(): boolean {
    if (this.#lost.signal.aborted) return false;
    if (now() >= this.#deadline) {
      this.#lose(sessionExpired(this.leaseId));
      return false;
    }
    return true;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Milliseconds until the lease's deadline (0 once passed). */
  remaining(): number {
    return this.alive ? Math.max(0, this.#deadline - now()) : 0;
  }

  /** The lease key suffix used by Go's concurrency package: the lease ID in lowercase hex. */
  get leaseHex(): string {
    return BigInt(this.leaseId).toString(16);
  }

  /**
   * Renews the lease to its full TTL with one request and moves the deadline to when that request was sent
   * plus the TTL. SESSION_EXPIRED if the lease is gone or the session already lost it.
   */
  async renew(options: CallOptions = {}): Promise<number> {
    this.#throwIfDead();
    const sentAt = now();
    try {
      const { ttl } = await this.etcd.lease.keepAliveOnce(this.leaseId, options);
      if (!this.#lost.signal.aborted) {
        this.#deadline = Math.max(this.#deadline, sentAt + ttl * 1000);
        this.#armDeadline();
      }
      this.#throwIfDead();
      return ttl;
    } catch (error) {
      if (isEtcdError(error, "LEASE_NOT_FOUND")) {
        const expired = sessionExpired(this.leaseId, error);
        this.#lose(expired);
        throw expired;
      }
      throw error;
    }
  }

  /**
   * @internal Serialises this session's own contenders for one key (etcd sees a single key per session and
   * name). Resolves with the function that hands the turn on.
   */
  async localTurn(key: string, signal: AbortSignal): Promise<() => void> {
    const previous = this.#localTurns.get(key);
    const release = this.#takeTurn(key, previous);
    if (previous === undefined) return release;
    try {
      await untilAborted(previous, signal);
      return release;
    } catch (error) {
      release();
      throw error;
    }
  }

  /** @internal The turn if nobody in this session has it, else undefined. */
  tryLocalTurn(key: string): (() => void) | undefined {
    return this.#localTurns.has(key) ? undefined : this.#takeTurn(key, undefined);
  }

  #takeTurn(key: string, previous: Promise<void> | undefined): () => void {
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const turn = previous === undefined ? mine : previous.then(() => mine);
    this.#localTurns.set(key, turn);
    // The entry goes only when every turn before and including this one is over.
    void turn.then(() => {
      if (this.#localTurns.get(key) === turn) this.#localTurns.delete(key);
    });
    return release;
  }

  /**
   * Runs `work` while renewing the lease every ttl/3, and stops renewing when it settles: explicit,
   * scoped renewal for `"manual"` sessions (a Lambda waiting for a lock or working under one). No timer
   * outlives the call; a process frozen meanwhile renews nothing and loses the lease as it should.
   */
  async renewWhile<T>(work: () => Promise<T>): Promise<T> {
    const stop = this.#renewEvery();
    try {
      return await work();
    } finally {
      stop();
    }
  }

  /** A mutex named `name` whose key is bound to this session's lease. */
  mutex(name: string): Mutex {
    return new Mutex(this, name);
  }

  /** A leader election named `name`, campaigning with this session's lease. */
  election(name: string): Election {
    return new Election(this, name);
  }

  /**
   * Stops renewal and revokes the lease, which deletes every key of the session (releasing its locks).
   * Resolves to whether the lease was still there to revoke (false: it had already expired).
   */
  async close(options: CallOptions = {}): Promise<boolean> {
    if (this.#closed) return false;
    this.#closed = true;
    this.#lose(new EtcdError("SESSION_EXPIRED", `session of lease ${this.leaseId} was closed`));
    try {
      await this.etcd.lease.revoke(this.leaseId, options);
      return true;
    } catch (error) {
      if (isEtcdError(error, "LEASE_NOT_FOUND")) return false;
      throw error;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #throwIfDead(): void {
    if (!this.alive) throw this.#lost.signal.reason as EtcdError;
  }

  #lose(reason: EtcdError): void {
    this.#stopRenewing?.();
    clearTimeout(this.#deadlineTimer);
    this.#stopRenewing = this.#deadlineTimer = undefined;
    if (!this.#lost.signal.aborted) this.#lost.abort(reason);
  }

  #armDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    // Timers may fire a fraction of a millisecond early by performance.now(): re-arm until really past.
    this.#deadlineTimer = backgroundTimer(() => {
      if (this.alive) this.#armDeadline();
    }, Math.ceil(this.#deadline - now()) + 1);
  }

  /** Renews every ttl/3 (sooner after a failure) until the returned function is called or the lease is lost. */
  #renewEvery(): () => void {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const schedule = (delay: number) => {
      timer = backgroundTimer(() => {
        if (stopped || !this.alive) return;
        // Each renewal may take at most the time left, so a slow answer cannot extend trust past the deadline.
        this.renew({ timeout: Math.max(1, this.remaining()) }).then(
          () => stopped || schedule((this.ttl * 1000) / 3),
          () => {
            // A transient failure: try again soon while the deadline allows; a lost lease has already aborted.
            if (!stopped && this.alive) schedule(Math.min(1_000, this.remaining() / 2));
          },
        );
      }, delay);
    };
    schedule((this.ttl * 1000) / 3);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }
}

export function sessionExpired(leaseId: LeaseId, cause?: unknown): EtcdError {
  return new EtcdError("SESSION_EXPIRED", `session lease ${leaseId} has expired`, cause === undefined ? {} : { cause });
}

