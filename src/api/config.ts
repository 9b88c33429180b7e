import { describe, invalidArgument, REDACTED } from "../errors/catalogue.js";
import { type GatewayConfig, type GatewayOptions, resolveGatewayConfig } from "../gateway/config.js";
import { type Bytes, toBytes } from "./bytes.js";
import { type Clock, clockArg } from "./clock.js";

/** Options of `new Etcd(...)`: where etcd is and how to reach it, plus the client's key namespace. */
export interface EtcdOptions extends GatewayOptions {
  /**
   * A key prefix applied to every key sent (KV, txn, watch, locks, elections, semaphores) and stripped from
   * every key received; it must end with `"/"`. Without the separator, `"tenant-a"` would also cover
   * `"tenant-a0/…"` and every other namespace that starts with the same text (as etcd's Go namespace does),
   * so it is refused. (A Go client's namespace `"app"` used with keys `"/x"` is this client's `"app/"` with
   * keys `"x"`: the same etcd keys.)
   *
   * A namespace isolates keys, not leases: leases are cluster-wide. `lease.list()` shows every lease,
   * `lease.revoke()`, `lease.keepAliveOnce()` and `lease.timeToLive()` act on any lease whose ID is given
   * (revoking deletes its keys in every namespace), and `etcd.session({ leaseId })` adopts any live lease,
   * another tenant's included. `compact()` is cluster-wide too. Isolate tenants with etcd's auth (a user per
   * tenant, with a role on its prefix) where one must not touch another's leases.
   */
  namespace?: Bytes | undefined;
  /**
   * The clock sessions measure lease deadlines and run their timers on. Default: the runtime's monotonic clock.
   * In tests, the mock's (`createMockEtcd().clock`): advancing the mock past a session's TTL then ends the
   * session, its locks (`held` false, `signal` aborted with LOCK_LOST) and the lease on the mock together.
   */
  clock?: Clock | undefined;
  /**
   * The default `lockDelay` of this client's locks, elections and read-write locks, in milliseconds (0 to
   * 60 000): see `lock()`'s `lockDelay`. Default 0: a lock whose holder left uncleanly is taken at once.
   */
  lockDelay?: number | undefined;
}

/** {@link EtcdOptions} checked once, defaults filled in. */
export interface ResolvedConfig extends GatewayConfig {
  /** The key prefix as bytes; empty without a namespace. */
  readonly namespace: Uint8Array;
  /** The clock sessions measure lease deadlines on (see {@link EtcdOptions.clock}). */
  readonly clock: Clock;
  /** The default lockDelay of the client's locks, in milliseconds. */
  readonly lockDelay: number;
}

/** Checks the options once, with messages that say what to fix, and fills in the defaults. */
export function resolveConfig(options: EtcdOptions): ResolvedConfig {
  if (typeof options !== "object" || options === null) {
    throw invalidArgument("new Etcd(options): options must be an object with `endpoints`");
  }
  return {
    ...resolveGatewayConfig(options),
    namespace: resolveNamespace(options.namespace),
    clock: clockArg(options.clock),
    lockDelay: lockDelayArg(options.lockDelay) ?? 0,
  };
}

/** The longest lock delay: Chubby's default is a minute too; longer, a lock is as good as stuck. */
export const MAX_LOCK_DELAY = 60_000;

/** A `lockDelay` option: milliseconds from 0 to MAX_LOCK_DELAY; undefined stays undefined (the default applies). */
export function lockDelayArg(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !(value >= 0 && value <= MAX_LOCK_DELAY)) {
    throw invalidArgument(
      `lockDelay must be a number of milliseconds from 0 to ${MAX_LOCK_DELAY}, got ${describe(value)}`,
    );
  }
  return value;
}

const SLASH = 0x2f;

function resolveNamespace(value: Bytes | undefined): Uint8Array {
  if (value === undefined) return new Uint8Array(0);
  // A copy: the caller's array may change later, and the namespace must not move under live keys.
  const bytes = toBytes(value).slice();
  if (bytes.length > 0 && bytes[bytes.length - 1] !== SLASH) {
    if (typeof value !== "string") {
      throw invalidArgument(
        `namespace (${bytes.length} bytes) must end with "/" (0x2f): without it the client would also see ` +
          "every namespace that starts with the same bytes",
      );
    }
    const [given, fixed, sibling] = [value, `${value}/`, `${value}0/`].map((text) => JSON.stringify(text));
    throw invalidArgument(
      `namespace ${given} must end with "/": without it the client would also see the keys of ${sibling} and ` +
        `of every other namespace that starts with ${given}. Write ${fixed} (keys "/x" under ${given} are ` +
        `keys "x" under ${fixed})`,
    );
  }
  return bytes;
}

/**
 * A copy of `config` to hand out: changing it changes nothing. The config holds no secret to hide (the
 * password and credential headers already read `"[redacted]"` there).
 */
export function redacted(config: ResolvedConfig): ResolvedConfig {
  return {
    ...config,
    auth: config.auth === undefined ? undefined : { username: config.auth.username, password: REDACTED },
    headers: { ...config.headers },
    endpoints: [...config.endpoints],
    namespace: config.namespace.slice(),
  };
}
