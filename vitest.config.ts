import { defineConfig } from "vitest/config";

// Two worlds that never share a process: msw-backed unit tests, and tests against real etcd members
// started by test/etcd/global-setup.ts. Conformance files run in both, told which backend by `provide`.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts", "test/conformance/**/*.test.ts", "examples/**/*.test.ts"],
          provide: { backend: "mock" },
          testTimeout: 10_000,
        },
      },
      {
        test: {
          name: "etcd",
          include: ["test/etcd/**/*.test.ts", "test/conformance/**/*.test.ts", "test/lambda/**/*.test.ts"],
          globalSetup: ["test/etcd/global-setup.ts"],
          provide: { backend: "etcd" },
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: "runtimes",
          include: ["test/runtimes/**/*.test.ts"],
          // etcd first (provides etcdEndpoint), then pack the built package and install it into a temp project.
          globalSetup: ["test/etcd/global-setup.ts", "test/runtimes/global-setup.ts"],
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
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
