/**
 * `etcd-edge/testing`: an in-memory etcd member speaking the gRPC-gateway JSON API of etcd 3.4 to 3.7, for
 * tests. Use its `fetch` (`new Etcd({ endpoints, fetch: mock.fetch })`), msw handlers from
 * `etcd-edge/testing/msw`, or real HTTP from `etcd-edge/testing/server` (Node). Platform-neutral, no
 * dependency on msw.
 *
 * @module etcd-edge/testing
 */
export { createMockEtcd } from "./mock.js";
export type { MockEtcd, MockEtcdOptions, MockFetch, MockKeyValue, MockLease } from "./mock.js";
export type { AuthOptions, Permission } from "./auth.js";
export type { ClockMode } from "./clock.js";
export type { EtcdVersion } from "./wire/dialect.js";
export { Faults } from "./faults.js";
export { MIN_LEASE_TTL } from "./lease.js";
export { MAX_REQUEST_BYTES, PROGRESS_NOTIFY_INTERVAL_MS } from "./member.js";
