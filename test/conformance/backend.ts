/// <reference path="../etcd/provided.d.ts" />
// One suite, several backends. Every conformance file gets its etcd from here and runs unchanged on the
// in-memory mock in each dialect it speaks (vitest projects `unit` for 3.4, `unit-3.5` to `unit-3.7`) and on a
// real member of each etcd version (projects `etcd-3.4`, `etcd-3.5`). A file says
// `const { backend, etcd } = useBackend();` and nothing else about setup; one that asserts a version's own shape
// branches on `backend.wire`.
//
// The mock is used through its own `fetch` (no msw). Each backend's modules are loaded lazily, so the mock path
// never starts etcd and the etcd path never loads the mock.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, inject } from "vitest";
import type { EtcdOptions, Fetch } from "../../src/index.js";
import type { EtcdOperator as Etcd } from "../../src/operate/index.js";
import type { AuthOptions, EtcdVersion, MockEtcd } from "../../src/testing/index.js";
import { sleep } from "../support/async.js";
import { client, clientOptions, sharedEndpoint } from "../support/etcd.js";

export type BackendName = "mock" | "etcd";

/**
 * `describe` for tests that wait out real time and may do so side by side: concurrent on etcd, where `advance()`
 * is each test's own sleep; one at a time on the mock, whose clock `advance()` moves for every test.
 */
export const describeSideBySide: (name: string, body: () => void) => void =
  inject("backend") === "mock" ? describe : describe.concurrent;

export interface Backend {
  readonly name: BackendName;
  /** Whose wire this backend speaks: the mock its project's dialect; a real member its project's version. */
  readonly wire: EtcdVersion;
  /**
   * The transport clients use by default: the mock's fetch, or the runtime's global fetch.
   * Wrap it to count requests.
   */
  readonly fetch: Fetch;
  /** The mock itself, for inspection (mock backend only). */
  readonly mock: MockEtcd | undefined;
  /** The key namespace every client of this backend uses ("" on a dedicated member and on the mock). */
  readonly namespace: string;
  /** A client. On the shared member every client of one backend shares a namespace unique to it. */
  client(options?: Partial<EtcdOptions>): Etcd;
  /** The options `client()` makes its client with (for a client of another copy of the SDK's modules). */
  options(options?: Partial<EtcdOptions>): EtcdOptions;
  /** Lets time pass: virtual and instant on the mock (leases expire at once), a real sleep on etcd. */
  advance(ms: number): Promise<void>;
  close(): Promise<void>;
}

export interface BackendOptions {
  /**
   * A member of its own instead of the shared one, for member-wide operations (compaction). Mock: always
   * its own. Etcd: a fresh member of the project's version, started for this backend and stopped by close().
   */
  dedicated?: boolean;
  /**
   * Auth enabled with these users (implies dedicated). `root` is created with `rootPassword`; each other
   * user gets readwrite on `prefix` (or on everything when it has none).
   */
  auth?: { rootPassword: string; users: Record<string, { password: string; prefix?: string }> };
}

/**
 * The backend of the file (or of the describe block it is called in): opened before its tests, closed after
 * them. `backend` and `etcd` (a default client) are usable in tests and hooks, not at module level: they
 * forward to what beforeAll opened.
 */
export function useBackend(options: BackendOptions = {}): { backend: Backend; etcd: Etcd } {
  let opened: { backend: Backend; etcd: Etcd } | undefined;
  beforeAll(async () => {
    const backend = await openBackend(options);
    opened = { backend, etcd: backend.client() };
  }, 60_000);
  afterAll(async () => {
    await opened?.backend.close();
  });
  const current = () => {
    if (opened === undefined)
      throw new Error("useBackend(): the backend is opened in beforeAll; use it inside tests and hooks");
    return opened;
  };
  return { backend: lateBound(() => current().backend), etcd: lateBound(() => current().etcd) };
}

/** An object that forwards every property read to `target()`, with methods bound to it. */
function lateBound<T extends object>(target: () => T): T {
  return new Proxy({} as T, {
    get(_, property) {
      const object = target();
      const value: unknown = Reflect.get(object, property, object);
      return typeof value === "function" ? value.bind(object) : value;
    },
  });
}

export function openBackend(options: BackendOptions = {}): Promise<Backend> {
  return inject("backend") === "mock" ? openMock(options) : openEtcd(options);
}

const MOCK_ENDPOINT = "http://etcd.test:2379";

async function openMock(options: BackendOptions): Promise<Backend> {
  const { createMockEtcd } = await import("../../src/testing/index.js");
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
  const version = inject("mockVersion");
  const mock = createMockEtcd({ version, ...(auth ? { auth } : {}) });
  const fetch = mock.fetch as unknown as Fetch;
  return {
    name: "mock",
    wire: version,
    fetch,
    mock,
    namespace: "",
    client: (o = {}) => client({ endpoints: [MOCK_ENDPOINT], fetch, ...o }),
    options: (o = {}) => clientOptions({ endpoints: [MOCK_ENDPOINT], fetch, ...o }),
    advance: async (ms) => {
      mock.advance(ms);
      // Let watch deliveries (queued as microtasks) and their consumers run.
      await new Promise((resolve) => setTimeout(resolve, 0));
    },
    close: async () => mock.reset(),
  };
}

async function openEtcd(options: BackendOptions): Promise<Backend> {
  const wire = inject("etcdVersion");
  if (!options.dedicated && !options.auth) {
    const endpoint = sharedEndpoint();
    const namespace = `conf-${randomUUID()}/`;
    // Through a proxy (a `proxy-*` project): https, its certificate issued by the project's CA.
    const { fetch, close } = await proxiedFetch();
    return {
      name: "etcd",
      wire,
      fetch,
      mock: undefined,
      namespace,
      client: (o = {}) => client({ endpoints: [endpoint], namespace, fetch, ...o }),
      options: (o = {}) => clientOptions({ endpoints: [endpoint], namespace, fetch, ...o }),
      advance: sleep,
      close: async () => {
        // Leave the shared member as we found it.
        await client({ endpoints: [endpoint], fetch })
          .delete({ prefix: namespace })
          .catch(() => {});
        await close();
      },
    };
  }
  const fetch: Fetch = (input, init) => globalThis.fetch(input, init);
  const harness = await import("../etcd/harness.js");
  const member = await harness.startEtcd();
  try {
    if (options.auth) {
      const { rootPassword, users } = options.auth;
      await harness.enableAuth(member, { rootPassword });
      for (const [user, spec] of Object.entries(users)) {
        await harness.addUser(member, {
          rootPassword,
          user,
          password: spec.password,
          ...(spec.prefix === undefined ? {} : { prefix: spec.prefix }),
        });
      }
    }
  } catch (error) {
    await member.stop();
    throw error;
  }
  return {
    name: "etcd",
    wire,
    fetch,
    mock: undefined,
    namespace: "",
    client: (o = {}) => client({ endpoints: [member.clientUrl], ...o }),
    options: (o = {}) => clientOptions({ endpoints: [member.clientUrl], ...o }),
    advance: sleep,
    close: () => member.stop(),
  };
}

/** The fetch a client of the shared member uses: the global one, or, through a proxy, one that trusts its CA. */
async function proxiedFetch(): Promise<{ fetch: Fetch; close: () => Promise<void> }> {
  const ca = inject("proxyCa");
  if (ca === undefined) return { fetch: (input, init) => globalThis.fetch(input, init), close: async () => {} };
  const [{ createNodeFetch }, { readFileSync }] = await Promise.all([
    import("../../src/node/index.js"),
    import("node:fs"),
  ]);
  const fetch = createNodeFetch({ ca: readFileSync(ca) });
  return { fetch, close: () => fetch.close() };
}
