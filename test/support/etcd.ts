/// <reference path="../etcd/provided.d.ts" />
// What test files need to use a backend: the one client factory, unique key names, a fetch that records what
// the SDK sent, and bounded ways to read a watch. The member and its version come from the project
// (`inject`), so the same file runs unchanged on etcd 3.4 and 3.5.
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, inject } from "vitest";
import { EtcdOperator } from "../../src/operate/index.js";
import {
  type Compare,
  type Etcd,
  type EtcdOptions,
  type Fetch,
  isEtcdError,
  type KeyValue,
  type Session,
  type SessionOptions,
  type WatchBatch,
  type WatchQuery,
  op,
} from "../../src/index.js";
import { sleep, until, within } from "./async.js";

/**
 * The project's shared member for this worker. Global setup starts one per vitest worker (VITEST_POOL_ID,
 * 1 to maxWorkers, is unique among the workers running at a time), so files running side by side never write
 * to the same member; the files one worker runs in turn share it, each under keys of its own.
 */
export function sharedEndpoint(): string {
  const endpoints = inject("etcdEndpoints");
  if (endpoints === undefined || endpoints.length === 0)
    throw new Error("no etcdEndpoints: this runs only in an etcd-3.x vitest project");
  const worker = Number(process.env.VITEST_POOL_ID ?? "1");
  return endpoints[(worker - 1) % endpoints.length]!;
}

/**
 * The client every test uses: on the shared member unless `endpoints` (or `fetch`) says otherwise, with a
 * timeout that bounds every call even on a loaded machine.
 */
export function client(options: Partial<EtcdOptions> = {}): EtcdOperator {
  return new EtcdOperator(clientOptions(options));
}

/** The options `client()` makes its client with: for a client of another copy of the SDK (a restored sandbox). */
export function clientOptions(options: Partial<EtcdOptions> = {}): EtcdOptions {
  return { timeout: 10_000, ...options, endpoints: options.endpoints ?? sharedEndpoint() };
}

/**
 * Sessions a test file opens, every one closed after the file's tests: `open(options, on)` opens one on `on`
 * (default `etcd`) with `defaults` overridden by `options`.
 */
export function useSessions(
  etcd: Etcd,
  defaults: SessionOptions = {},
): (options?: SessionOptions, on?: Etcd) => Promise<Session> {
  const sessions: Session[] = [];
  afterAll(async () => {
    await Promise.all(sessions.map((s) => s.close().catch(() => {})));
  });
  return async (options = {}, on = etcd) => {
    const session = await on.session({ ...defaults, ...options });
    sessions.push(session);
    return session;
  };
}

/** A name no other test uses, e.g. for a lock or an election: `<label>/<uuid>`. */
export function uniqueName(label = "t"): string {
  return `${label}/${randomUUID()}`;
}

/** A key prefix no other test uses: `<label>/<uuid>/`. */
export function uniquePrefix(label = "t"): string {
  return `${uniqueName(label)}/`;
}

/**
 * Short names for a file whose backend keeps its keys apart from other files' (the conformance suites): each
 * call of the result gives `<label><n><end>`, n counting from 1 across labels (`label` by default).
 */
export function freshNames(label: string, end = ""): (label?: string) => string {
  let n = 0;
  return (other = label) => `${other}${++n}${end}`;
}

/** The lease ID as Go's concurrency package writes it in lock and election keys: lowercase hex. */
export function leaseHex(leaseId: string): string {
  return BigInt(leaseId).toString(16);
}

/**
 * The form of a key a mutex, election or lockAll acquisition of `name` makes on lease `leaseId`: its own,
 * `<name>/<leaseHex>_<16 hex>`.
 */
export function acquisitionKey(name: string, leaseId: string): RegExp {
  return new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}/${leaseHex(leaseId)}_[0-9a-f]{16}$`);
}

/** Whether etcd still has the lease (one whose TTL reads 0 is expiring, not yet gone). */
export async function leaseAlive(etcd: Etcd, leaseId: string): Promise<boolean> {
  return etcd.lease.timeToLive(leaseId).then(
    () => true,
    (error: unknown) => {
      if (isEtcdError(error, "LEASE_NOT_FOUND")) return false;
      throw error;
    },
  );
}

/** How many keys are under `<name>/`: the contenders in a lock's, an election's or a recipe's line. */
export async function lineLength(etcd: Etcd, name: string): Promise<number> {
  return (await etcd.range({ prefix: `${name}/`, countOnly: true })).count;
}

/** Waits (up to 5 s) until the line of `name` is `count` long. */
export async function untilLineLength(etcd: Etcd, name: string, count: number): Promise<void> {
  await until(`${count} contenders in ${name}`, 5_000, async () => (await lineLength(etcd, name)) === count, 10);
}

/** Keys currently under `<name>/` (a lock's or an election's line). */
export async function keysUnder(etcd: Etcd, name: string): Promise<string[]> {
  const { kvs } = await etcd.range({ prefix: `${name}/` });
  return kvs.map((kv: KeyValue) => kv.key);
}

/** Writes `value` to `key` only while `lock` is held (its fencing compare); true when the write landed. */
export async function fencedPut(
  etcd: Etcd,
  lock: { ifHeld(): Compare | Compare[] },
  key: string,
  value = "x",
): Promise<boolean> {
  return (
    await etcd
      .txn()
      .if(...[lock.ifHeld()].flat())
      .then(op.put(key, value))
      .commit()
  ).succeeded;
}

// ---- what the SDK sent ------------------------------------------------------------------------------------

export interface RecordedCall {
  url: string;
  /** `http://host:port` the call went to. */
  endpoint: string;
  path: string;
  body: string;
  /** performance.now() when the SDK called fetch. */
  at: number;
  status?: number;
  /** Set when fetch itself threw (connection refused, reset, aborted). */
  error?: unknown;
  /** Set when the SDK aborted the call's signal: for a stream (a watch), the client cut it. */
  cut?: boolean;
}

export type RecordingFetch = Fetch & {
  calls: RecordedCall[];
  paths(): string[];
  /** The number of calls so far: `since(mark())` later gives the paths of the calls made in between. */
  mark(): number;
  since(mark: number): string[];
};

/** `inner` (default: the runtime's global fetch), recording every call in order, with its status once answered. */
export function recordingFetch(inner: Fetch = (input, init) => globalThis.fetch(input, init)): RecordingFetch {
  const calls: RecordedCall[] = [];
  const f: Fetch = async (input, init) => {
    const url = new URL(input);
    const call: RecordedCall = {
      url: input,
      endpoint: url.origin,
      path: url.pathname,
      body: init.body,
      at: performance.now(),
    };
    calls.push(call);
    init.signal?.addEventListener(
      "abort",
      () => {
        call.cut = true;
      },
      { once: true },
    );
    try {
      const response = await inner(input, init);
      call.status = response.status;
      return response;
    } catch (error) {
      call.error = error;
      throw error;
    }
  };
  return Object.assign(f, {
    calls,
    paths: () => calls.map((c) => c.path),
    mark: () => calls.length,
    since: (mark: number) => calls.slice(mark).map((c) => c.path),
  });
}

/** How many times the client behind `fetch` authenticated. */
export const authCalls = (fetch: RecordingFetch): number =>
  fetch.paths().filter((path) => path === "/v3/auth/authenticate").length;

// ---- waiting on real servers ------------------------------------------------------------------------------

/** Retries `attempt` until it stops throwing, for at most `timeoutMs`. */
export async function eventually<T>(
  what: string,
  timeoutMs: number,
  attempt: () => Promise<T>,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${what} did not succeed within ${timeoutMs} ms: ${String(err)}`);
      await sleep(everyMs);
    }
  }
}

/**
 * Opens watches that end with the test: each is aborted after it (a pending next() would otherwise keep its
 * stream open). Call at the top of a file; the returned function opens a watch and gives its iterator.
 */
export function useWatches(): (etcd: Etcd, query: WatchQuery) => AsyncIterator<WatchBatch> {
  const open = new Set<AbortController>();
  afterEach(() => {
    for (const controller of open) controller.abort(new Error("test finished"));
    open.clear();
  });
  return (etcd, query) => {
    const controller = new AbortController();
    open.add(controller);
    const signal = query.signal === undefined ? controller.signal : AbortSignal.any([query.signal, controller.signal]);
    return etcd.watch({ ...query, signal })[Symbol.asyncIterator]();
  };
}

/** Every event of the batches, flattened. */
export function events(batches: WatchBatch[]) {
  return batches.flatMap((b) => b.events);
}

/** A `pull` condition: at least `n` events have arrived. */
export const eventCount = (n: number) => (batches: WatchBatch[]) => events(batches).length >= n;

export function describeBatches(batches: WatchBatch[]): string {
  return JSON.stringify(batches.map((b) => b.events.map((e) => `${e.type}:${e.kv.key}@${e.kv.modRevision}`)));
}

/**
 * Pulls batches from a watch into `into` until `until(into)` is true; throws if that takes longer than `ms`
 * or the watch ends. Leaves the iterator open (the caller decides when to stop it).
 */
export async function pull(
  iterator: AsyncIterator<WatchBatch>,
  until: (batches: WatchBatch[]) => boolean,
  ms: number,
  into: WatchBatch[] = [],
): Promise<WatchBatch[]> {
  const deadline = Date.now() + ms;
  while (!until(into)) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`watch: condition not met within ${ms} ms; got ${describeBatches(into)}`);
    const next = await within(left, `watch (got ${describeBatches(into)})`, iterator.next());
    if (next.done) throw new Error(`watch ended early; got ${describeBatches(into)}`);
    into.push(next.value);
  }
  return into;
}

export const bytes = (...values: number[]) => new Uint8Array(values);
