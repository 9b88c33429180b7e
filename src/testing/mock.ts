import { binToBytes, toBin } from "./bytes.js";
import { Faults } from "./faults.js";
import { serve } from "./http.js";
import { EtcdState, type ServerOptions } from "./server.js";
import type { AuthOptions } from "./auth.js";

export type { AuthOptions, Permission } from "./auth.js";
export { Faults } from "./faults.js";
export { PROGRESS_NOTIFY_INTERVAL_MS } from "./server.js";
export { MIN_LEASE_TTL } from "./lease.js";

export interface MockEtcdOptions {
  /** Turns auth on (as after `etcdctl auth enable`) with these users. Off by default. */
  auth?: AuthOptions | undefined;
  /** Header cluster_id, a uint64 as a decimal string or bigint. */
  clusterId?: string | bigint | undefined;
  /** Header member_id, a uint64 as a decimal string or bigint. */
  memberId?: string | bigint | undefined;
}

export interface MockKeyValue {
  /** The key as UTF-8 text (lossy for non-UTF-8 keys; see keyBytes). */
  key: string;
  value: string;
  keyBytes: Uint8Array;
  valueBytes: Uint8Array;
  createRevision: number;
  modRevision: number;
  version: number;
  /** 0n when the key has no lease. */
  lease: bigint;
}

export interface MockLease {
  id: bigint;
  /** Granted TTL in seconds (after raising to the 2 s minimum). */
  ttl: number;
  /** Whole seconds left on the virtual clock. */
  remaining: number;
  keys: string[];
}

export type MockFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface MockEtcd<H = never> {
  /** A fetch that serves any URL's path from this mock. Needs no receiver and no msw. */
  readonly fetch: MockFetch;
  /** msw handlers answering every request under baseUrl (e.g. "http://etcd.test:2379"). */
  handlers(baseUrl: string): H[];
  /** Moves the virtual clock: leases expire (their keys deleted in one revision each), progress notifications fire. */
  advance(ms: number): void;
  /** Virtual ms since creation (or the last reset). */
  now(): number;
  readonly revision: number;
  readonly compactRevision: number;
  readonly raftTerm: number;
  get(key: string | Uint8Array): MockKeyValue | undefined;
  /** Current keys (UTF-8 decoded) with this prefix, in etcd's bytewise order. */
  keys(prefix?: string | Uint8Array): string[];
  /** Writes a key as a plain /v3/kv/put would; returns the new revision. */
  put(key: string | Uint8Array, value: string | Uint8Array, options?: { lease?: bigint | string }): number;
  /** As /v3/kv/compaction. */
  compact(revision: number): void;
  leases(): MockLease[];
  /** Watch streams whose body is still open. */
  readonly openWatchStreams: number;
  /** Back to a fresh member: revision 1, no keys or leases or tokens, clock 0, faults off, open streams cut. */
  reset(): void;
  readonly faults: Faults;
  readonly auth: {
    /** Invalidates every issued token, as a server restart or token TTL would; clients must authenticate again. */
    expireTokens(): void;
  };
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/**
 * The msw-free core. `handlers` comes from a factory so that only handlers.ts imports msw.
 * Without a factory, handlers() throws.
 */
export function createMockEtcdCore<H>(
  options: MockEtcdOptions = {},
  handlerFactory?: (baseUrl: string, fetch: (request: Request) => Promise<Response>) => H[],
): MockEtcd<H> {
  const serverOptions: ServerOptions = options;
  let state = new EtcdState(serverOptions);
  const faults = new Faults({
    cutStreams: () => state.watch.failAll(() => new TypeError("terminated")),
    leaderChange: () => state.leaderChange(),
  });
  const handle = (request: Request) => serve(() => state, faults, request);

  const fetch: MockFetch = async (input, init) =>
    serve(() => state, faults, new Request(input, init), init?.signal ?? (input instanceof Request ? input.signal : undefined));

  const toKeyValue = (kv: ReturnType<EtcdState["get"]>): MockKeyValue | undefined => {
    if (!kv) return undefined;
    const keyBytes = binToBytes(kv.key);
    return {
      key: decoder.decode(keyBytes),
      value: decoder.decode(kv.value),
      keyBytes,
      valueBytes: kv.value,
      createRevision: kv.createRevision,
      modRevision: kv.modRevision,
      version: kv.version,
      lease: kv.lease,
    };
  };

  return {
    fetch,
    handlers(baseUrl) {
      if (!handlerFactory) throw new Error("handlers() needs msw: import createMockEtcd from etcd-edge/testing");
      return handlerFactory(baseUrl, handle);
    },
    advance: (ms) => state.advance(ms),
    now: () => state.clock,
    get revision() {
      return state.store.revision;
    },
    get compactRevision() {
      return Math.max(0, state.store.compactRevision);
    },
    get raftTerm() {
      return state.raftTerm;
    },
    get: (key) => toKeyValue(state.get(toBin(key))),
    keys: (prefix = "") => state.keys(toBin(prefix)).map((k) => decoder.decode(binToBytes(k))),
    put: (key, value, opts) =>
      state.putDirect(toBin(key), typeof value === "string" ? encoder.encode(value) : value, BigInt(opts?.lease ?? 0)),
    compact: (revision) => state.store.compact(revision),
    leases: () =>
      state.lessor.list().map((l) => ({
        id: l.id,
        ttl: l.ttl,
        remaining: state.lessor.remaining(l),
        keys: [...l.keys].sort().map((k) => decoder.decode(binToBytes(k))),
      })),
    get openWatchStreams() {
      return state.watch.openStreams;
    },
    reset() {
      state.watch.failAll(() => new TypeError("terminated"));
      state = new EtcdState(serverOptions);
      faults.clear();
    },
    faults,
    auth: { expireTokens: () => state.auth?.expireTokens() },
  };
}


