import { type EtcdErrorCode, isEtcdError } from "../errors/etcd-error.js";
import type { HoldingKind } from "./events.js";

/**
 * diagnostics_channel publishing, as node-redis and ioredis do it: TracingChannels for calls (`tracePromise`
 * publishes start, end, asyncStart, asyncEnd and error), plain channels for transitions that are not calls.
 * The module is loaded where the runtime has one (Node >= 22.3, Bun, Deno, workerd with nodejs_compat) through
 * `process.getBuiltinModule`, on first use and never by an import; elsewhere every helper runs its call
 * unchanged. No context object is built unless someone listens. A context never holds a password, an auth
 * token, a ticket's secret or a value: tracePromise would set the call's result on it, so the traced function
 * resolves to nothing and the caller gets the result outside.
 */

/** Every channel's name is this prefix and its key: `etcd-edge:lock`, `etcd-edge:session.lost`, ... */
export const PREFIX = "etcd-edge:";

/** The TracingChannels: `etcd-edge:request`, `etcd-edge:lock`, `etcd-edge:release`, `etcd-edge:withLock`. */
export type Traced = "request" | "lock" | "release" | "withLock";
/** The plain channels, for transitions that are not calls. */
export type Point = "lock.lost" | "lock.released" | "session.lost" | "watch.reconnect" | "watch.heldBack";

/** What an acquisition is of: `lockAll` for several locks at once, `election` for a campaign. */
export type LockKind = "lock" | "election" | "semaphore" | "read" | "write" | "lockAll";

/** How a call ended: its success word, the EtcdError's code, or "error" for anything else thrown. */
export type Outcome<Ok extends string> = Ok | EtcdErrorCode | "error";

/** `etcd-edge:request`: one gateway call, its retries and failovers included (one span per call). */
export interface RequestContext {
  /** The gateway path, e.g. `/v3/kv/txn`. */
  path: string;
  /** The endpoint its last attempt went to, once it has ended. */
  endpoint?: string;
  /** How many attempts it made (1 without a retry), once it has ended. */
  attempt?: number;
  /** How it ended, once it has. */
  outcome?: Outcome<"ok">;
  /** The HTTP status of its last answer, once it has ended (absent when none came). */
  status?: number;
  /** Made by the client on its own (a session's background renewal), not by a caller's call. */
  background?: boolean;
  /** What it failed with (set by the tracing channel). */
  error?: unknown;
}

/** `etcd-edge:lock`: one acquisition (lock, read/write lock, permit, campaign, lockAll, resumeLock). */
export interface LockContext {
  /** What is acquired or held. */
  kind: LockKind;
  /** The name asked for; several names joined by ", " for lockAll. */
  name: string;
  /** Asked not to wait (`tryLock`, `tryAcquire`, `timeout: 0`): a busy answer is its expected outcome. */
  tryOnly: boolean;
  /** The lease its key is bound to (its decimal ID), once acquired. */
  lease?: string;
  /** The fencing token (its key's create revision), once acquired. */
  token?: number;
  /** How it ended, once it has. */
  outcome?: Outcome<"acquired">;
  /** True once it had to wait behind another holder. */
  waited?: boolean;
  /** How many contenders were ahead of it when it began to wait, when known. */
  position?: number;
  /** What it failed with (set by the tracing channel). */
  error?: unknown;
}

/** `etcd-edge:release`: one release (unlock, release, resign, dispose, unlockWith, releaseWith). */
export interface ReleaseContext {
  /** What is acquired or held. */
  kind: LockKind;
  /** The name it is taken on; several names joined by ", " for lockAll. */
  name: string;
  /** Its fencing token: its key's create revision. */
  token: number;
  /** How it ended, once it has. */
  outcome?: Outcome<"released">;
  /** From its acquisition to the end of this release, in milliseconds, when it released it. */
  heldMs?: number;
  /** What it failed with (set by the tracing channel). */
  error?: unknown;
}

/** `etcd-edge:withLock`: one withLock / withSemaphore / withLocks: acquisition, the caller's function, release. */
export interface WithLockContext {
  /** What is acquired or held. */
  kind: LockKind;
  /** The name it is taken on; several names joined by ", " for lockAll. */
  name: string;
  /** How it ended, once it has. */
  outcome?: Outcome<"ok">;
  /** What it failed with (set by the tracing channel). */
  error?: unknown;
}

/** `etcd-edge:lock.lost`: a holding found lost (its lease ended, or its key was gone at its release). */
export interface LockLostMessage {
  /** What is acquired or held. */
  kind: LockKind;
  /** The name it is taken on; several names joined by ", " for lockAll. */
  name: string;
  /** Its fencing token: its key's create revision. */
  token: number;
  /** From its acquisition to its loss, in milliseconds. */
  heldMs: number;
}

/** `etcd-edge:lock.released`: a holding ended by its release (its keys deleted while its own). */
export interface LockReleasedMessage {
  /** What is acquired or held. */
  kind: LockKind;
  /** The name it is taken on; several names joined by ", " for lockAll. */
  name: string;
  /** Its fencing token: its key's create revision. */
  token: number;
  /** From its acquisition to its release, in milliseconds. */
  heldMs: number;
}

/** `etcd-edge:session.lost`: a session's lease is gone or can no longer be trusted. */
export interface SessionLostMessage {
  /** The session's lease. */
  leaseId: string;
  /** Why. */
  code: EtcdErrorCode;
}

/** `etcd-edge:watch.reconnect`: a watch stream broke or went silent and is reopened from `revision`. */
export interface WatchReconnectMessage {
  /** The endpoint the stream was on, when known. */
  endpoint: string | undefined;
  /** Why. */
  code: EtcdErrorCode;
  /** The revision it resumes from, when known. */
  revision: number | undefined;
}

/**
 * `etcd-edge:watch.heldBack`: a watch stream through `endpoint` came back whole, only when it ended (a proxy that
 * holds streamed answers back): published once per client and endpoint.
 */
export interface WatchHeldBackMessage {
  /** The endpoint whose stream was held back. */
  endpoint: string;
}

/** The parts of diagnostics_channel used here (Node's, Bun's, Deno's and workerd's have them). */
export interface Channel {
  readonly hasSubscribers: boolean;
  publish(message: unknown): void;
}
export interface TracingChannel {
  /** Undefined in Bun: then its channels are asked one by one. */
  readonly hasSubscribers?: boolean;
  readonly start: Channel;
  readonly end: Channel;
  readonly asyncStart: Channel;
  readonly asyncEnd: Channel;
  readonly error: Channel;
  tracePromise<T>(fn: () => Promise<T>, context: object): Promise<T>;
}
export interface DiagnosticsChannel {
  channel(name: string): Channel;
  tracingChannel(name: string): TracingChannel;
}

/** The runtime's diagnostics_channel, or undefined where it has none (a browser, workerd without nodejs_compat). */
export function diagnostics(): DiagnosticsChannel | undefined {
  try {
    const dc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process?.getBuiltinModule?.(
      "node:diagnostics_channel",
    ) as DiagnosticsChannel | undefined;
    return typeof dc?.tracingChannel === "function" ? dc : undefined;
  } catch {
    return undefined;
  }
}

/** Made on first use: null where the runtime has no diagnostics_channel. */
let made: Record<string, TracingChannel & Channel> | null | undefined;

/** The channel `key` when someone listens to it, else undefined (and nothing is built). */
function listening(key: Traced | Point): (TracingChannel & Channel) | undefined {
  if (made === undefined) {
    const dc = diagnostics();
    made = dc && {};
    for (const name of [
      "request",
      "lock",
      "release",
      "withLock",
      "lock.lost",
      "lock.released",
      "session.lost",
      "watch.reconnect",
      "watch.heldBack",
    ])
      if (dc)
        made![name] = (name.includes(".") ? dc.channel(PREFIX + name) : dc.tracingChannel(PREFIX + name)) as never;
  }
  const channel = made?.[key];
  // Bun's TracingChannel has no hasSubscribers: its channels are asked one by one.
  const on =
    channel?.hasSubscribers ??
    (["start", "end", "asyncStart", "asyncEnd", "error"] as const).some((event) => channel?.[event].hasSubscribers);
  return on ? channel : undefined;
}

const KINDS: Record<HoldingKind, LockKind> = {
  lock: "lock",
  leadership: "election",
  permit: "semaphore",
  read: "read",
  write: "write",
  locks: "lockAll",
};

const nameOf = (name: string | readonly string[]) => (typeof name === "string" ? name : name.join(", "));

/**
 * `run` inside `channel.tracePromise`, with `context.outcome` set to `ok` or to the error's code, and `done`
 * called either way, before asyncEnd is published. The traced function resolves to nothing: no result (a
 * holding, an answer with values) reaches a subscriber.
 */
function traced<T, C extends { outcome?: string }>(
  channel: TracingChannel,
  context: C,
  run: () => Promise<T>,
  ok: string,
  done?: (context: C, value: T | undefined) => void,
): Promise<T> {
  let value: T | undefined;
  return channel
    .tracePromise(async () => {
      try {
        value = await run();
        context.outcome = ok;
      } catch (error) {
        context.outcome = isEtcdError(error) ? error.code : "error";
        throw error;
      } finally {
        done?.(context, value);
      }
    }, context)
    .then(() => value as T);
}

/** What `traceRequest` reads of a gateway call when it ends. */
interface TracedCall {
  readonly path: string;
  /** Attempts made so far, less one. */
  readonly tries: number;
  /** Where its latest attempt went. */
  readonly endpoint: string;
  /** The HTTP status of its latest answer, 0 before one. */
  readonly status: number;
  /** Made by the client on its own. */
  readonly background: boolean;
}

/** One gateway call, its retries and failovers included. */
export function traceRequest<T>(call: TracedCall, run: () => Promise<T>): Promise<T> {
  const channel = listening("request");
  if (channel === undefined) return run();
  const context: RequestContext = { path: call.path, background: call.background };
  return traced(channel, context, run, "ok", () => {
    context.endpoint = call.endpoint;
    context.attempt = call.tries + 1;
    if (call.status !== 0) context.status = call.status;
  });
}

/** The acquisition whose synchronous start is running (see `startingAcquisition`). */
let starting: LockContext | undefined;

/**
 * One acquisition: `run` is the recipe's method body. Its token and lease are the holding's `revision` and
 * `leaseId`, or `holding()`'s for a recipe that resolves to nothing (a campaign).
 */
export function traceLock<T>(
  kind: HoldingKind,
  name: string | readonly string[],
  options: { timeout?: number | undefined },
  run: () => Promise<T>,
  holding?: () => { revision?: number | undefined; leaseId?: string },
): Promise<T> {
  const channel = listening("lock");
  if (channel === undefined) return run();
  const context: LockContext = { kind: KINDS[kind], name: nameOf(name), tryOnly: options.timeout === 0 };
  // tracePromise calls `run` at once, and `run` builds its Acquisition before its first await.
  starting = context;
  try {
    return traced(channel, context, run, "acquired", (_, held) => {
      if (context.outcome !== "acquired") return;
      const got = holding?.() ?? (held as { revision?: number; leaseId?: string } | undefined);
      context.token = got?.revision;
      context.lease = got?.leaseId;
    });
  } finally {
    starting = undefined;
  }
}

/**
 * The context of the traced acquisition starting now, for its Acquisition to report its wait on: a recipe
 * builds its Acquisition before its first await, so inside `traceLock`'s synchronous call of its body.
 */
export function startingAcquisition(): LockContext | undefined {
  return starting;
}

/** Tells a traced acquisition it must wait, with `position` contenders ahead of it when known. */
export function traceWaiting(context: LockContext | undefined, position: number | undefined): void {
  if (context === undefined) return;
  context.waited = true;
  context.position = position;
}

/** One release of a holding acquired at `acquiredAt` (performance.now()). */
export function traceRelease<T>(
  subject: { kind: HoldingKind; name: string },
  token: number,
  acquiredAt: number,
  run: () => Promise<T>,
): Promise<T> {
  const channel = listening("release");
  if (channel === undefined) return run();
  const context: ReleaseContext = { kind: KINDS[subject.kind], name: subject.name, token };
  return traced(channel, context, run, "released", () => {
    if (context.outcome === "released") context.heldMs = performance.now() - acquiredAt;
  });
}

/** One withLock, withSemaphore or withLocks. */
export function traceWithLock<T>(kind: HoldingKind, name: string | readonly string[], run: () => Promise<T>) {
  const channel = listening("withLock");
  if (channel === undefined) return run();
  const context: WithLockContext = { kind: KINDS[kind], name: nameOf(name) };
  return traced(channel, context, run, "ok");
}

/** A holding acquired at `acquiredAt` (performance.now()) ended: found lost, or released. */
export function publishLockEnd(
  how: "lock.lost" | "lock.released",
  subject: { kind: HoldingKind; name: string },
  token: number,
  acquiredAt: number,
): void {
  const channel = listening(how);
  if (channel === undefined) return;
  const message = { kind: KINDS[subject.kind], name: subject.name, token, heldMs: performance.now() - acquiredAt };
  channel.publish(message satisfies LockLostMessage & LockReleasedMessage);
}

export function publishSessionLost(leaseId: string, code: EtcdErrorCode): void {
  listening("session.lost")?.publish({ leaseId, code } satisfies SessionLostMessage);
}

export function publishWatchHeldBack(endpoint: string): void {
  listening("watch.heldBack")?.publish({ endpoint } satisfies WatchHeldBackMessage);
}

export function publishWatchReconnect(endpoint: string | undefined, code: EtcdErrorCode, revision?: number): void {
  listening("watch.reconnect")?.publish({ endpoint, code, revision } satisfies WatchReconnectMessage);
}
