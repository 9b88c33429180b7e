import type { HttpHandler } from "msw";
import { mswHandlers } from "./handlers.js";
import { createMockEtcdCore, type MockEtcd, type MockEtcdOptions } from "./mock.js";

export type { AuthOptions, MockEtcdOptions, MockFetch, MockKeyValue, MockLease, Permission } from "./mock.js";
export { Faults, MIN_LEASE_TTL, PROGRESS_NOTIFY_INTERVAL_MS } from "./mock.js";
export type MockEtcdServer = MockEtcd<HttpHandler>;

/**
 * An in-memory etcd 3.4 member speaking the gRPC-gateway JSON API, for unit tests:
 * `setupServer(...mock.handlers("http://etcd.test:2379"))` with msw, or `fetch: mock.fetch` without it.
 * Time is virtual: leases expire only when the test calls `mock.advance(ms)`.
 */
export function createMockEtcd(options?: MockEtcdOptions): MockEtcdServer {
  return createMockEtcdCore(options, mswHandlers);
}
