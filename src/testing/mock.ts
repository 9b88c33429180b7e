import type { AuthOptions } from "./auth.js";
import type { ClockMode } from "./clock.js";
import { Faults } from "./faults.js";
import { serve } from "./http.js";
import { MAX_REQUEST_BYTES, Member, type MemberOptions } from "./member.js";
import { binToBytes, prefixEnd, toBin } from "./wire/bytes.js";
import { ETCD_VERSIONS, type EtcdVersion } from "./wire/dialect.js";
import { DroppedConnection } from "./wire/errors.js";

/** How `createMockEtcd()` behaves: etcd version, clock, auth, identity, limits. */
export interface MockEtcdOptions {
  /**
   * Whose gateway to speak on the wire: etcd "3.4" (3.4.23, the default), "3.5" (3.5.16), "3.6" (3.6.16) or "3.7"
   * (3.7.3), each checked against a real member of that version.
   */
  version?: EtcdVersion | undefined;
  /**
   * "virtual" (the default): time stands still until the test calls advance(). "wall": time follows the clock,
   * so leases expire by themselves, for clients the test does not drive (another process, another language).
   */
  clock?: ClockMode | undefined;
  /** Turns auth on (as after `etcdctl auth enable`) with these users. Off by default. */
  auth?: AuthOptions | undefined;
  /** Header cluster_id, a uint64 as a decimal string or bigint. */
  clusterId?: string | bigint | undefined;
  /** Header member_id, a uint64 as a decimal string or bigint. Its low 16 bits start every lease ID etcd picks. */
  memberId?: string | bigint | undefined;
  /** The member's name in /v3/cluster/member/list (default "default", as etcd's). */
  name?: string | undefined;
  /** The member's client URLs in /v3/cluster/member/list (the HTTP server entry fills in its own). */
  clientUrls?: readonly string[] | undefined;
  /** The member's peer URLs in /v3/cluster/member/list. */
  peerUrls?: readonly string[] | undefined;
  /** etcd's --max-request-bytes (default 1.5 MiB): larger proposals fail with "request is too large". */
  maxRequestBytes?: number | undefined;
}

/** A key as the mock stores it (what `mock.get()` returns). */
export interface MockKeyValue {
  /** The key as UTF-8 text (lossy for non-UTF-8 keys; see keyBytes). */
  key: string;
  /** The value as UTF-8 text (lossy for binary values; see valueBytes). */
  value: string;
  /** The key's bytes. */
  keyBytes: Uint8Array;
  /** The value's bytes. */
  valueBytes: Uint8Array;
  /** Revision of the key's creation. */
  createRevision: number;
  /** Revision of its last write. */
  modRevision: number;
  /** Writes since creation. */
  version: number;
  /** 0n when the key has no lease. */
  lease: bigint;
}

/** A live lease of the mock (what `mock.leases()` lists). */
export interface MockLease {
  /** The lease ID. */
  id: bigint;
  /** Granted TTL in seconds (after raising to the 2 s minimum). */
  ttl: number;
  /** Whole seconds left, as etcd's timetolive reports them. */
  remaining: number;
  /** Its keys, UTF-8 decoded. */
  keys: string[];
}

/** The mock's `fetch`: pass it as `new Etcd({ fetch })` (or to any client that takes a fetch). */
export type MockFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** An in-memory etcd member speaking the gRPC-gateway JSON API (see `createMockEtcd`). */
export interface MockEtcd {
  /** Which etcd's wire the mock speaks. */
  readonly version: EtcdVersion;
  /** A fetch that serves any URL's path from this mock. Needs no receiver and no msw. */
  readonly fetch: MockFetch;
  /**
   * Serves one Request (for msw handlers, servers, service workers). `signal` is the client's, when it has one
   * that outlives the Request object. A request etcd would drop rejects with a TypeError.
   */
  handle(request: Request, signal?: AbortSignal): Promise<Response>;
  /** Moves the clock: leases expire (their keys deleted in one revision each), progress notifications fire. */
  advance(ms: number): void;
  /**
   * The member's clock, for the client: `new Etcd({ fetch: mock.fetch, clock: mock.clock, ... })` measures its
   * sessions' lease deadlines on it, so `advance()` past a session's TTL ends the lease on both sides at once:
   * the session is lost, its locks report `held` false and abort their `signal` with LOCK_LOST, and the mock
   * deletes the keys. With the default "virtual" clock, a test's time moves only by `advance()`.
   */
  readonly clock: {
    /** The member's time in milliseconds, as `now()`. */
    now(): number;
    /** Calls `fire` once `ms` of the member's time has passed; the function returned cancels it. */
    setTimer(fire: () => void, ms: number): () => void;
  };
  /** Ms since creation (or the last reset), including advance(). */
  now(): number;
  /** The store's current revision. */
  readonly revision: number;
  /** The revision history was last compacted to (0 before any compaction). */
  readonly compactRevision: number;
  /** The raft term headers report; `faults.leaderChange()` moves it. */
  readonly raftTerm: number;
  /** One key as stored, or undefined. */
  get(key: string | Uint8Array): MockKeyValue | undefined;
  /** Current keys (UTF-8 decoded) with this prefix, in etcd's bytewise order. */
  keys(prefix?: string | Uint8Array): string[];
  /** Writes a key as a plain /v3/kv/put would; returns the new revision. */
  put(key: string | Uint8Array, value: string | Uint8Array, options?: { lease?: bigint | string }): number;
  /** As /v3/kv/compaction. */
  compact(revision: number): void;
  /** Every live lease. */
  leases(): MockLease[];
  /** Watch streams whose body is still open. */
  readonly openWatchStreams: number;
  /** Sets the client URLs /v3/cluster/member/list reports. */
  advertise(clientUrls: readonly string[]): void;
  /** Back to a fresh member: revision 1, no keys or leases or tokens, clock 0, faults off, open streams cut. */
  reset(): void;
  /** Cuts open streams and stops the wall clock's timer; the mock still answers, on a stopped clock. */
  close(): void;
  /** Faults to inject: unavailability, latency, cut streams, leader changes. */
  readonly faults: Faults;
  /** Auth controls (when created with `auth`). */
  readonly auth: {
    /** Invalidates every issued token, as a server restart or token TTL would; clients must authenticate again. */
    expireTokens(): void;
  };
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();
const terminated = () => new TypeError("terminated");

/** An in-memory etcd member speaking the gRPC-gateway JSON API of etcd 3.4, 3.5, 3.6 or 3.7. */
export function createMockEtcd(options: MockEtcdOptions = {}): MockEtcd {
  const memberOptions: MemberOptions = {
    version: options.version ?? "3.4",
    clock: options.clock ?? "virtual",
    auth: options.auth,
    clusterId: BigInt(options.clusterId ?? "14841639068965178418"),
    memberId: BigInt(options.memberId ?? "10276657743932975437"),
    name: options.name ?? "default",
    peerUrls: options.peerUrls ?? ["http://localhost:2380"],
    clientUrls: options.clientUrls ?? ["http://localhost:2379"],
    maxRequestBytes: options.maxRequestBytes ?? MAX_REQUEST_BYTES,
  };
  if (!ETCD_VERSIONS.includes(memberOptions.version))
    throw new TypeError(`etcd-edge/testing: unknown version ${String(options.version)}`);
  if (!["virtual", "wall"].includes(memberOptions.clock))
    throw new TypeError(`etcd-edge/testing: unknown clock ${String(options.clock)}`);
  let member = new Member(memberOptions);
  const faults = new Faults({
    cutStreams: () => member.watch.failAll(terminated),
    leaderChange: () => member.leaderChange(),
  });

  const handle = async (request: Request, signal?: AbortSignal): Promise<Response> => {
    try {
      return await serve(() => member, faults, request, signal ?? request.signal);
    } catch (err) {
      if (err instanceof DroppedConnection) throw new TypeError("fetch failed", { cause: err });
      throw err;
    }
  };
  const fetch: MockFetch = (input, init) =>
    handle(new Request(input, init), init?.signal ?? (input instanceof Request ? input.signal : undefined));

  const toKeyValue = (kv: ReturnType<Member["store"]["get"]>): MockKeyValue | undefined => {
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
  const keys = (prefix: string | Uint8Array): string[] => {
    const bin = toBin(prefix);
    return member.store
      .range(bin === "" ? "\0" : bin, bin === "" ? "\0" : prefixEnd(bin))
      .map((kv) => decoder.decode(binToBytes(kv.key)));
  };

  return {
    version: memberOptions.version,
    fetch,
    handle,
    advance: (ms) => member.advance(ms),
    clock: { now: () => member.clock.now(), setTimer: (fire, ms) => member.setClientTimer(fire, ms) },
    now: () => member.clock.now(),
    get revision() {
      return member.store.revision;
    },
    get compactRevision() {
      return Math.max(0, member.store.compactRevision);
    },
    get raftTerm() {
      return member.raftTerm;
    },
    get: (key) => toKeyValue(member.store.get(toBin(key))),
    keys: (prefix = "") => keys(prefix),
    put: (key, value, opts) => {
      const op = {
        kind: "put",
        key: toBin(key),
        value: typeof value === "string" ? encoder.encode(value) : value,
        lease: BigInt(opts?.lease ?? 0),
        prevKv: false,
        ignoreValue: false,
        ignoreLease: false,
      } as const;
      return member.kv.put(op, () => {}).revision;
    },
    compact: (revision) => member.store.compact(revision),
    leases: () =>
      member.lessor.list().map((l) => ({
        id: l.id,
        ttl: l.ttl,
        remaining: member.lessor.remaining(l),
        keys: [...l.keys].sort().map((k) => decoder.decode(binToBytes(k))),
      })),
    get openWatchStreams() {
      return member.watch.openStreams;
    },
    advertise(clientUrls) {
      memberOptions.clientUrls = [...clientUrls];
    },
    reset() {
      member.dispose(terminated);
      member = new Member(memberOptions);
      faults.clear();
    },
    close() {
      member.dispose(terminated);
    },
    faults,
    auth: { expireTokens: () => member.auth?.expireTokens() },
  };
}

/**
 * The name the repository's tests import from this module (from when the public entry needed msw): the same
 * function as createMockEtcd. Not exported by etcd-edge/testing.
 * @deprecated use createMockEtcd.
 */
export const createMockEtcdCore = createMockEtcd;
