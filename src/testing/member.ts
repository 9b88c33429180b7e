import { AuthStore, type AuthOptions } from "./auth.js";
import { createClock, type Clock, type ClockMode } from "./clock.js";
import { KvApplier } from "./kv.js";
import { Lessor, type Lease } from "./lease.js";
import { accessedRanges, type Op } from "./ops.js";
import { MvccStore } from "./store.js";
import { WatchHub } from "./watch.js";
import { DIALECTS, type Dialect, type EtcdVersion } from "./wire/dialect.js";
import { header, type Out } from "./wire/encode.js";
import { Errors } from "./wire/errors.js";
import { raftRequestSize } from "./wire/proto-size.js";

/** Virtual ms between progress notifications (etcd's default progress report interval: 10 minutes). */
export const PROGRESS_NOTIFY_INTERVAL_MS = 600_000;

/** etcd's --max-request-bytes default (1.5 MiB); the gRPC server accepts 512 KiB more. */
export const MAX_REQUEST_BYTES = 1.5 * 1024 * 1024;
export const GRPC_OVERHEAD_BYTES = 512 * 1024;

export interface MemberOptions {
  version: EtcdVersion;
  clock: ClockMode;
  auth: AuthOptions | undefined;
  clusterId: bigint;
  memberId: bigint;
  name: string;
  peerUrls: readonly string[];
  clientUrls: readonly string[];
  maxRequestBytes: number;
}

/** The token a request carried (the Authorization header), for auth checks. */
export interface Caller {
  token: string | null;
}

const MASK_48 = (1n << 48n) - 1n;
const MASK_63 = (1n << 63n) - 1n;

/** All state of one in-memory etcd member: store, leases, watches, auth, its clock and its request IDs. */
export class Member {
  readonly dialect: Dialect;
  readonly clock: Clock;
  raftTerm = 2;
  /** Raft entries so far (a fresh single member has applied its bootstrap entries). */
  raftIndex = 4;
  readonly store: MvccStore;
  readonly lessor: Lessor;
  readonly watch: WatchHub;
  readonly kv: KvApplier;
  readonly auth: AuthStore | undefined;
  private nextProgressAt = PROGRESS_NOTIFY_INTERVAL_MS;
  /** etcd's idutil generator: the member ID's low 16 bits, then a 40-bit time in ms and an 8-bit counter. */
  private readonly idPrefix: bigint;
  private idSuffix: bigint;

  constructor(readonly options: MemberOptions) {
    this.dialect = DIALECTS[options.version];
    this.clock = createClock(options.clock);
    this.store = new MvccStore(
      (rev, events) => this.watch.notify(rev, events),
      this.dialect.keepsTombstoneAtCompactRevision,
    );
    this.lessor = new Lessor(() => this.clock.now());
    this.watch = new WatchHub(this.store, (rev) => this.header(rev), this.dialect);
    this.kv = new KvApplier(this.store, this.lessor, this.dialect);
    this.auth = options.auth ? new AuthStore(options.auth, () => this.clock.now()) : undefined;
    this.idPrefix = (options.memberId & 0xffffn) << 48n;
    // A virtual member starts its IDs at time 0, so they are the same on every run.
    const ms = options.clock === "wall" ? BigInt(Date.now()) : 0n;
    this.idSuffix = (ms & ((1n << 40n) - 1n)) << 8n;
  }

  header(revision = this.store.revision): Out {
    return header({
      clusterId: this.options.clusterId,
      memberId: this.options.memberId,
      revision,
      raftTerm: this.raftTerm,
    });
  }

  nextRequestId(): bigint {
    this.idSuffix++;
    return this.idPrefix | (this.idSuffix & MASK_48);
  }

  /** A lease ID as etcd's server picks one when the client leaves it 0. */
  nextLeaseId(): bigint {
    let id = 0n;
    while (id === 0n || this.lessor.get(id)) id = this.nextRequestId() & MASK_63;
    return id;
  }

  /**
   * A raft proposal of a request of `requestSize` bytes as InternalRaftRequest field `field`: refused past
   * --max-request-bytes ("request is too large"), numbered otherwise.
   */
  propose(requestSize: number, field: number, caller?: Caller): void {
    const username = caller ? (this.user(caller) ?? "") : "";
    const size = raftRequestSize(requestSize, field, {
      id: this.nextRequestId(),
      username,
      authRevision: username ? 1n : 0n,
    });
    if (size > this.options.maxRequestBytes) throw Errors.requestTooLarge();
    this.raftIndex++;
  }

  // ---- time -------------------------------------------------------------------------------------------------

  /**
   * Timers a client set on this member's clock (a session's deadline and renewals, when the client was given
   * `mock.clock`): they fire when the clock reaches them, among the member's own events, in time order.
   */
  private clientTimers: Array<{ at: number; fire: () => void }> = [];

  /** Calls `fire` once `ms` of this member's time has passed; the function returned cancels it. */
  setClientTimer(fire: () => void, ms: number): () => void {
    const timer = { at: this.clock.now() + Math.max(0, ms), fire };
    this.clientTimers.push(timer);
    this.rearm();
    return () => {
      const at = this.clientTimers.indexOf(timer);
      if (at >= 0) this.clientTimers.splice(at, 1);
    };
  }

  /** Moves time forward by `ms`, then runs what fell due. */
  advance(ms: number): void {
    this.clock.skip(ms);
    this.tick();
  }

  /** Runs what is due at the clock's time: lease expiries (in expiry order) and progress notifications. */
  tick(): void {
    const now = this.clock.now();
    for (;;) {
      const lease = this.lessor.nextExpiry();
      const leaseAt = lease && lease.expiry <= now ? lease.expiry : Infinity;
      const progressAt = this.nextProgressAt <= now ? this.nextProgressAt : Infinity;
      const timer = this.nextClientTimer();
      const timerAt = timer && timer.at <= now ? timer.at : Infinity;
      if (leaseAt === Infinity && progressAt === Infinity && timerAt === Infinity) break;
      if (timerAt < leaseAt && timerAt <= progressAt && timer) {
        this.clientTimers.splice(this.clientTimers.indexOf(timer), 1);
        timer.fire();
      } else if (leaseAt <= progressAt && lease) {
        this.revokeLease(lease);
      } else {
        this.nextProgressAt += PROGRESS_NOTIFY_INTERVAL_MS;
        this.watch.progressTick();
      }
    }
    this.rearm();
  }

  /** A wall clock fires the next due event by itself; a virtual one waits for advance(). */
  rearm(): void {
    if (this.clock.mode !== "wall") return;
    const next = Math.min(
      this.lessor.nextExpiry()?.expiry ?? Infinity,
      this.nextProgressAt,
      this.nextClientTimer()?.at ?? Infinity,
    );
    this.clock.alarm(Number.isFinite(next) ? next : undefined, () => this.tick());
  }

  private nextClientTimer(): { at: number; fire: () => void } | undefined {
    let next: { at: number; fire: () => void } | undefined;
    for (const timer of this.clientTimers) if (next === undefined || timer.at < next.at) next = timer;
    return next;
  }

  /** Deletes the lease's keys in one revision (in key order, as etcd's Revoke), then forgets the lease. */
  revokeLease(lease: Lease): void {
    const keys = [...lease.keys].sort();
    if (keys.length > 0) {
      this.store.write((w) => {
        for (const key of keys) w.deleteRange(key, "");
      });
    }
    this.lessor.remove(lease.id);
  }

  leaderChange(): void {
    this.raftTerm++;
    this.lessor.refreshAll();
    this.rearm();
  }

  /** Stops the clock's alarm and cuts every open stream: nothing of this member keeps running. */
  dispose(reason: () => unknown): void {
    this.clock.stop();
    this.watch.failAll(reason);
  }

  // ---- auth -------------------------------------------------------------------------------------------------

  /** The caller's user when auth is on; throws for a bad token. Undefined means "no token" (or auth off). */
  user(caller: Caller): string | undefined {
    const token = this.dialect.bearer ? caller.token?.replace(/^Bearer /, "") : caller.token;
    return this.auth?.userOf(token ?? null);
  }

  /** The caller's user for a lease call, which 3.6 refuses without a token. */
  leaseUser(caller: Caller): string | undefined {
    const user = this.user(caller);
    if (this.auth && this.dialect.rbac.leaseCalls && user === undefined) throw Errors.userEmpty();
    return user;
  }

  /** Throws unless the caller may read (or write) every key the lease holds now; admins may. */
  checkLeaseKeys(user: string | undefined, lease: Lease | undefined, write: boolean): void {
    if (!this.auth || !lease || this.auth.isAdmin(user)) return;
    for (const key of lease.keys) this.auth.check(user, key, "", write);
  }

  checkOp(caller: Caller, op: Op): void {
    if (!this.auth) return;
    const user = this.user(caller);
    const leaseKeys = (id: bigint) => this.lessor.get(id)?.keys ?? [];
    for (const r of accessedRanges(op, this.dialect.rbac, leaseKeys)) this.auth.check(user, r.key, r.end, r.write);
  }
}
