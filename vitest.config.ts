// First: a Node older than 22 stops here, saying so, before anything runs.
import "./scripts/lib/node-guard.mjs";
import { availableParallelism } from "node:os";
import { configDefaults, defineConfig, type TestProjectInlineConfiguration } from "vitest/config";
import type { EtcdVersion as MockVersion } from "./src/testing/index.js";
import type { EtcdVersion } from "./test/support/etcd-versions.js";
import { holdsStreamsBack, type ProxyConfig, type ProxyKind } from "./test/support/proxies.js";

// One folder per project (test/README.md): test/unit runs on msw and the in-memory gateway, test/etcd on real
// etcd members, test/runtimes on the packed package in other runtimes. test/conformance is shared: the same
// files run on the mock in each dialect it speaks (unit, unit-3.x) and on every etcd version, told which
// backend by `provide`.
const etcdProject = (version: EtcdVersion, exclude: string[] = []): TestProjectInlineConfiguration => ({
  test: {
    name: `etcd-${version}`,
    include: ["test/etcd/**/*.test.ts", "test/conformance/**/*.test.ts"],
    exclude: [...configDefaults.exclude, ...exclude],
    // Finds this version's binaries and starts the member the project's files share.
    globalSetup: ["test/etcd/global-setup.ts"],
    provide: { backend: "etcd", etcdVersion: version },
    // test/etcd/harness.ts starts extra members of this version (it reads no vitest state: plain Node loads it too).
    env: { ETCD_EDGE_ETCD_VERSION: version },
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});

/**
 * The suites through a reverse proxy (test/proxies/global-setup.ts), in the configuration docs/deploying.md
 * recommends or as a user first writes it, in front of one etcd version a day, in turn (ETCD_EDGE_PROXIES_ETCD picks
 * one). Every one runs the lock, handoff, follow, election and recipe suites and test/proxies (held-back streams,
 * read timeouts, the bounds through the proxy), and the watch suite unless the proxy holds streams back whole (nginx
 * as first written): its watches end with STREAM_HELD_BACK by design, which test/proxies checks.
 */
const PROXIED_ETCD = (process.env.ETCD_EDGE_PROXIES_ETCD ?? ["3.4", "3.7"][Math.floor(Date.now() / 86_400_000) % 2]) as
  | "3.4"
  | "3.7";
/** nginx as first written buffers streamed answers whole. */
const proxyProject = (proxy: ProxyKind, config: ProxyConfig): TestProjectInlineConfiguration => ({
  test: {
    name: `proxy-${proxy}${config === "first" ? "-first" : ""}`,
    include: [
      "test/proxies/**/*.test.ts",
      ...["locks", "follow", "recipes", ...(holdsStreamsBack(proxy, config) ? [] : ["watch"])].map(
        (suite) => `test/conformance/conformance-${suite}.test.ts`,
      ),
    ],
    globalSetup: ["test/proxies/global-setup.ts"],
    provide: { backend: "etcd", etcdVersion: PROXIED_ETCD, proxy, proxyConfig: config },
    env: { ETCD_EDGE_ETCD_VERSION: PROXIED_ETCD },
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});

// The conformance suites on the mock in each dialect it speaks: 3.4 within `unit`, the others in `unit-3.x`.
const mockProject = (version: MockVersion): TestProjectInlineConfiguration => ({
  test: {
    name: `unit-${version}`,
    include: ["test/conformance/**/*.test.ts"],
    provide: { backend: "mock", mockVersion: version },
    testTimeout: 10_000,
  },
});

export default defineConfig({
  test: {
    // Real-etcd files mostly wait on leases, watches and child processes, not on the CPU: one file more than
    // cores (vitest's default on 2 cores is one). On this 2-core machine kind, the etcd 3.5 project alone took
    // 258 s with two at a time (the CPU half idle) and 144 s with four; the whole suite about 1,480 s with two
    // and 1,045-1,065 s with four, which left the CPU nearly no idle time and twice made a timing-sensitive test
    // fail (a watch's renewal taken for a dead stream, since fixed). Three keeps most of the gain with headroom.
    maxWorkers: availableParallelism() + 1,
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts", "test/conformance/**/*.test.ts", "examples/**/*.test.ts"],
          provide: { backend: "mock", mockVersion: "3.4" },
          testTimeout: 10_000,
        },
      },
      mockProject("3.5"),
      mockProject("3.6"),
      mockProject("3.7"),
      // The demo starts the etcd on PATH by itself: it tests the demo script, not a server version. The Go peer
      // (etcd's client/v3/concurrency) is built with the members built from Go, 3.6 and 3.7.
      etcdProject("3.4", ["test/etcd/go-peer-interop.test.ts"]),
      etcdProject("3.5", ["test/etcd/demo.test.ts", "test/etcd/go-peer-interop.test.ts"]),
      etcdProject("3.6", ["test/etcd/demo.test.ts"]),
      etcdProject("3.7", ["test/etcd/demo.test.ts"]),
      ...(["nginx", "haproxy", "caddy"] as const).flatMap((proxy) => [
        proxyProject(proxy, "recommended"),
        proxyProject(proxy, "first"),
      ]),
      {
        test: {
          name: "stores",
          // The fences of etcd-edge/fence on the stores they write to (test/support/stores.ts starts them), worker
          // processes on the built package, one etcd version a day, in turn (as the proxies' projects).
          include: ["test/stores/**/*.test.ts"],
          globalSetup: ["test/etcd/global-setup.ts"],
          provide: { backend: "etcd", etcdVersion: PROXIED_ETCD },
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: "runtimes",
          include: ["test/runtimes/**/*.test.ts"],
          // One etcd member per version, then the built package packed and installed into a temp project.
          globalSetup: ["test/runtimes/global-setup.ts"],
          testTimeout: 120_000,
          hookTimeout: 300_000,
        },
      },
      {
        test: {
          name: "chaos",
          // The fault relay's own tests, and a short chaos run (its own cluster, worker processes, the built
          // package). After the other projects: it loads both cores, and their noise would blur its bounds.
          include: ["test/chaos/**/*.test.ts"],
          sequence: { groupOrder: 1 },
          // One file at a time, whatever the other projects run with.
          maxWorkers: 1,
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
