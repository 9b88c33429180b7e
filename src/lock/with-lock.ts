import { ttlArg } from "../api/args.js";
import type { EtcdClient } from "../api/client.js";
import { resolveSignal } from "../gateway/config.js";
import { describe, heldLost, invalidArgument, lockLost } from "../errors/catalogue.js";
import { type EtcdError, isEtcdError } from "../errors/etcd-error.js";
import { traceWithLock } from "../events/channels.js";
import type { Held } from "./hold/held.js";
import { nameArg } from "./line/keys.js";
import { type LockOptions, waitSettings } from "./acquire/acquisition.js";
import { namesArg } from "./lock-all/lock-all.js";
import type { MultiLock } from "./lock-all/multi-lock.js";
import type { Lock } from "./mutex/lock.js";
import type { Permit } from "./semaphore/permit.js";
import { permitsArg } from "./semaphore/semaphore.js";
import { Session } from "./session.js";
import { DEFAULT_SESSION_TTL, keepAliveArg } from "./lease/lease-grant.js";
import type { KeepAliveMode } from "./lease/lease-session.js";
import type { SharedLeases } from "./shared-leases.js";

/** Where a one-shot lock's lease comes from. */
export type LeaseMode = "shared" | "per-call";

export interface WithLockOptions extends LockOptions {
  /** Lease TTL in seconds. Default 60. */
  ttl?: number | undefined;
  /**
   * `"auto"` (default): the lease is renewed while `fn` runs. `"manual"` for runtimes that freeze between
   * invocations: the lease is renewed only while the call waits for the lock (so `timeout` may exceed the
   * TTL), never while `fn` runs and never in the background.
   */
  keepAlive?: KeepAliveMode | undefined;
  /**
   * `"shared"` (default): the client keeps one lease for its one-shot locks and reuses it while it is
   * valid, so a warm call costs two requests (take, release); the lease outlives the last call by up to its
   * TTL, holding no key. `"per-call"`: a lease of its own for this call, granted and revoked (three
   * requests), for when nothing may outlive the call.
   */
  lease?: LeaseMode | undefined;
  /**
   * Hands the release to the runtime's "finish after the response" hook, so the call resolves as soon as `fn`
   * does, one round trip earlier: Workers' `ctx.waitUntil`, Vercel's `waitUntil` (`@vercel/functions`), or
   * any function that keeps the runtime alive until the promise it is given settles. Not for Lambda, which
   * freezes the sandbox as soon as the handler returns. The promise it gets never rejects; a release that
   * finds the lock lost (its lease ended under `fn`) is told to `onEvent` (`lock.lost`) and the diagnostics
   * channels, not to the caller, who has its answer already. Fencing still protects every write made under
   * the lock; until the release lands, the next contender waits for it (or for the lease to end).
   */
  waitUntil?: ((release: Promise<unknown>) => void) | undefined;
}

/** Where `withLock` and its siblings get their sessions: the client, and its shared leases. */
export interface LockClient {
  client: EtcdClient;
  shared: SharedLeases;
}

/**
 * Runs `fn` holding lock `name`; takes and releases everything in `finally`. If the lock was lost before
 * the release (its lease expired under `fn`), the call fails with LOCK_LOST even though `fn` succeeded,
 * because `fn` ran partly unprotected.
 */
export async function withLock<T>(
  on: LockClient,
  name: string,
  fn: (lock: Lock<Session>) => T | Promise<T>,
  options: WithLockOptions = {},
): Promise<T> {
  // Refused before a lease is granted for nothing.
  nameArg(name, "a lock");
  checkFn("withLock", fn);
  const lost = () => lockLost(name, "its lease had expired before it was released");
  return traceWithLock("lock", name, () =>
    withHeld(on, (session) => session.mutex(name).lock(options), fn, options, lost),
  );
}

/** As `withLock`, holding a permit of semaphore `name` (of `permits`) while `fn` runs. */
export async function withSemaphore<T>(
  on: LockClient,
  name: string,
  permits: number,
  fn: (permit: Permit<Session>) => T | Promise<T>,
  options: WithLockOptions = {},
): Promise<T> {
  nameArg(name, "a semaphore");
  permitsArg(permits);
  checkFn("withSemaphore", fn);
  const lost = () => heldLost(`permit of semaphore ${name}`, "its lease had expired before it was released");
  const acquire = (session: Session) => session.semaphore(name, { permits }).acquire(options);
  return traceWithLock("permit", name, () => withHeld(on, acquire, fn, options, lost));
}

/** As `withLock`, holding every lock of `names` at once (`session.lockAll`) while `fn` runs. */
export async function withLocks<T>(
  on: LockClient,
  names: readonly string[],
  fn: (locks: MultiLock<Session>) => T | Promise<T>,
  options: WithLockOptions = {},
): Promise<T> {
  const checked = namesArg(names);
  checkFn("withLocks", fn);
  const lost = () => heldLost(`locks ${checked.join(", ")}`, "their lease had expired before they were released");
  return traceWithLock("locks", checked, () =>
    withHeld(on, (session) => session.lockAll(checked, options), fn, options, lost),
  );
}

function checkFn(what: string, fn: unknown): void {
  if (typeof fn !== "function")
    throw invalidArgument(`${what} needs a function to run under the lock, got ${describe(fn)}`);
}

/** The frame of withLock and its siblings, on a lease of its own or on the client's shared one. */
function withHeld<H extends Held<Session>, T>(
  on: LockClient,
  acquire: (session: Session) => Promise<H>,
  fn: (held: H) => T | Promise<T>,
  options: WithLockOptions,
  lost: () => EtcdError,
): Promise<T> {
  // Every option is checked before a lease is granted for nothing.
  const mode = options.lease === undefined ? "shared" : options.lease;
  if (mode !== "shared" && mode !== "per-call")
    throw invalidArgument(`lease must be "shared" or "per-call", got ${describe(mode)}`);
  const keepAlive = keepAliveArg(options.keepAlive);
  if (options.waitUntil !== undefined && typeof options.waitUntil !== "function") {
    throw invalidArgument(`waitUntil must be a function, got ${describe(options.waitUntil)}`);
  }
  if (options.ttl !== undefined) ttlArg(options.ttl);
  resolveSignal(options.signal);
  waitSettings(options);
  return mode === "shared"
    ? onSharedLease(on.shared, acquire, fn, options, keepAlive)
    : onOwnLease(on.client, acquire, fn, options, lost);
}

/** Grant, take, `fn`, revoke: the revocation is the release and says whether the lock survived. */
async function onOwnLease<H, T>(
  client: EtcdClient,
  acquire: (session: Session) => Promise<H>,
  fn: (held: H) => T | Promise<T>,
  options: WithLockOptions,
  lost: () => EtcdError,
): Promise<T> {
  const session = await Session.create(client, {
    ttl: options.ttl,
    keepAlive: options.keepAlive,
    signal: options.signal,
  });
  let result: T;
  try {
    // A manual lease cannot outlast its TTL by itself: renew it while waiting, so `timeout` means what it says.
    const held =
      session.keepAlive === "manual" ? await session.renewWhile(() => acquire(session)) : await acquire(session);
    result = await fn(held);
  } catch (error) {
    if (options.waitUntil === undefined) await session.close().catch(() => {});
    else handOff(options.waitUntil, session.close());
    throw error;
  }
  if (options.waitUntil !== undefined) {
    handOff(options.waitUntil, session.close());
    return result;
  }
  if (!(await session.close())) throw lost();
  return result;
}

/**
 * Hands `release` to the caller's `waitUntil` (see WithLockOptions), settled quietly: the runtime must never
 * see a rejection it cannot act on (what went wrong is told to `onEvent` and the diagnostics channels).
 */
function handOff(waitUntil: (release: Promise<unknown>) => void, release: Promise<unknown>): true {
  waitUntil(
    release.then(
      () => {},
      () => {},
    ),
  );
  return true;
}

/** Take on the client's shared lease, `fn`, release the keys: two requests when the lease is warm. */
async function onSharedLease<H extends Held<Session>, T>(
  shared: SharedLeases,
  acquire: (session: Session) => Promise<H>,
  fn: (held: H) => T | Promise<T>,
  options: WithLockOptions,
  keepAlive: KeepAliveMode,
): Promise<T> {
  const ttl = options.ttl === undefined ? DEFAULT_SESSION_TTL : options.ttl;
  for (let grants = 0; ; grants++) {
    const session = await shared.use(ttl, options.signal);
    // Once the release is handed off, the session is done with when it lands.
    let handedOff = false;
    const done = () => shared.done(ttl, session);
    try {
      let held: H;
      try {
        // Renewing while waiting also renews at once, beside the take, when the lease has little left.
        held = await session.renewWhile(() => acquire(session));
      } catch (error) {
        // The lease ended while the process was frozen: the server refused our key. One fresh grant.
        if (grants === 0 && (isEtcdError(error, "LEASE_NOT_FOUND") || isEtcdError(error, "SESSION_EXPIRED"))) {
          shared.forget(ttl, session);
          continue;
        }
        throw error;
      }
      let result: T;
      try {
        result = await (keepAlive === "auto" ? session.renewWhile(async () => fn(held)) : fn(held));
      } catch (error) {
        if (options.waitUntil === undefined) await held[Symbol.asyncDispose]().catch(() => {});
        else handedOff = handOff(options.waitUntil, held[Symbol.asyncDispose]().finally(done));
        throw error;
      }
      // The release: LOCK_LOST if the keys had gone before it (the lease ended under `fn`).
      if (options.waitUntil === undefined) await held[Symbol.asyncDispose]();
      else handedOff = handOff(options.waitUntil, held[Symbol.asyncDispose]().finally(done));
      return result;
    } finally {
      if (!handedOff) done();
    }
  }
}
