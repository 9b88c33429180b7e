/// <reference path="../etcd/provided.d.ts" />
// One suite, two backends. Every conformance file gets its etcd from here and runs unchanged on the in-memory
// mock (vitest project `unit`) and on a real etcd 3.4 member (project `etcd`).
//
// msw must never be loaded in the `etcd` project, and this file must not need it in `unit` either: the mock is
// built with the msw-free core (src/testing/mock.ts) and used through its own `fetch`; the public
// `createMockEtcd` (src/testing/index.ts) statically imports msw for `handlers()`. Each backend's modules are
// loaded lazily, so the mock path never starts etcd and the etcd path never loads the mock.
import { randomUUID } from "node:crypto";
import { inject } from "vitest";
import { Etcd, EtcdError, type EtcdOptions, type Fetch } from "../../src/index.js";
import type { AuthOptions, MockEtcd } from "../../src/testing/mock.js";
import type { EtcdVersion } from "../support/etcd-versions.js";
import { sleep, until, within, stillPending, rejection } from "../support/async.js";
export { sleep, until, within, stillPending, rejection };

export type BackendName = "mock" | "etcd";

export interface Backend {
  readonly name: BackendName;
  /** Whose wire this backend speaks: the mock follows 3.4; a real member is its project's version. */
  readonly wire: EtcdVersion;
  /** The transport clients use by default: the mock's fetch, or the runtime's global fetch. Wrap it to count requests. */
  readonly fetch: Fetch;
  /** The mock itself, for inspection (mock backend only). */
  readonly mock: MockEtcd<unknown> | undefined;
  /** The key namespace every client of this backend uses ("" on a dedicated member and on the mock). */
  readonly namespace: string;
  /** A client. On the shared member every client of one backend shares a namespace unique to it. */
  client(options?: Partial<EtcdOptions>): Etcd;
  /** Lets time pass: virtual and instant on the mock (leases expire at once), a real sleep on etcd. */
  advance(ms: number): Promise<void>;
  close(): Promise<void>;
}

export interface BackendOptions {
  /**
   * A member of its own instead of the shared one, for member-wide operations (compaction). Mock: always
   * its own. Etcd: a fresh member started for this backend and stopped by close().
   */
  dedicated?: boolean;
  /**
   * Auth enabled with these users (implies dedicated). `root` is created with `rootPassword`; each other
   * user gets readwrite on `prefix` (or on everything when it has none).
   */
  auth?: { rootPassword: string; users: Record<string, { password: string; prefix?: string }> };
}

export function backendName(): BackendName {
  return inject("backend");
}

const MOCK_ENDPOINT = "http://etcd.test:2379";

export async function openBackend(options: BackendOptions = {}): Promise<Backend> {
  return backendName() === "mock" ? openMock(options) : openEtcd(options);
}

async function openMock(options: BackendOptions): Promise<Backend> {
  const { createMockEtcdCore } = await import("../../src/testing/mock.js");
  let auth: AuthOptions | undefined;
  if (options.auth) {
    const users: Record<string, string> = { root: options.auth.rootPassword };
    const permissions: NonNullable<AuthOptions["permissions"]> = {};
    for (const [user, spec] of Object.entries(options.auth.users)) {
      users[user] = spec.password;
      if (spec.prefix !== undefined) permissions[user] = [{ key: spec.prefix, prefix: true, type: "readwrite" }];
    }
    auth = { users, permissions };
  }
  const mock = createMockEtcdCore(auth ? { auth } : {});
  const fetch = mock.fetch as unknown as Fetch;
  return {
    name: "mock",
    wire: "3.4",
    fetch,
    mock,
    namespace: "",
    client: (o = {}) => new Etcd({ endpoints: [MOCK_ENDPOINT], fetch, timeout: 5_000, ...o }),
    advance: async (ms) => {
      mock.advance(ms);
      // Let watch deliveries (queued as microtasks) and their consumers run.
      await new Promise((resolve) => setTimeout(resolve, 0));
    },
    close: async () => mock.reset(),
  };
}

async function openEtcd(options: BackendOptions): Promise<Backend> {
  const fetch = ((input, init) => globalThis.fetch(input, init)) as Fetch;
  const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  if (!options.dedicated && !options.auth) {
    const endpoint = inject("etcdEndpoint");
    const namespace = `conf-${randomUUID()}/`;
    return {
      name: "etcd",
      wire: inject("etcdVersion"),
      fetch,
      mock: undefined,
      namespace,
      client: (o = {}) => new Etcd({ endpoints: [endpoint], namespace, timeout: 5_000, ...o }),
      advance: sleep,
      close: async () => {
        // Leave the shared member as we found it.
        await new Etcd({ endpoints: [endpoint], timeout: 5_000 }).delete({ prefix: namespace }).catch(() => {});
      },
    };
  }
  const harness = await import("../etcd/harness.js");
  const member = await harness.startEtcd();
  try {
    if (options.auth) {
      const { rootPassword, users } = options.auth;
      await harness.enableAuth(member, { rootPassword });
      for (const [user, spec] of Object.entries(users)) {
        await harness.addUser(member, { rootPassword, user, password: spec.password, ...(spec.prefix === undefined ? {} : { prefix: spec.prefix }) });
      }
    }
  } catch (error) {
    await member.stop();
    throw error;
  }
  return {
    name: "etcd",
    wire: inject("etcdVersion"),
    fetch,
    mock: undefined,
    namespace: "",
    client: (o = {}) => new Etcd({ endpoints: [member.clientUrl], timeout: 5_000, ...o }),
    advance: sleep,
    close: () => member.stop(),
  };
}

// ---- helpers shared by the conformance files ---------------------------------------------------------------

/** A fetch that records the path of every request it forwards. */
export function countingFetch(inner: Fetch): Fetch & { paths: string[]; mark(): number; since(mark: number): string[] } {
  const paths: string[] = [];
  const f: Fetch = (input, init) => {
    paths.push(new URL(input).pathname);
    return inner(input, init);
  };
  return Object.assign(f, { paths, mark: () => paths.length, since: (mark: number) => paths.slice(mark) });
}

export const bytes = (...values: number[]) => new Uint8Array(values);
