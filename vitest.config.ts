import { defineConfig } from "vitest/config";

// Two worlds that never share a process: msw-backed unit tests, and tests against real etcd members
// started by test/etcd/global-setup.ts. Conformance files run in both, told which backend by `provide`.
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts", "test/conformance/**/*.test.ts"],
          provide: { backend: "mock" },
          testTimeout: 10_000,
        },
      },
      {
        test: {
          name: "etcd",
          include: ["test/etcd/**/*.test.ts", "test/conformance/**/*.test.ts"],
          globalSetup: ["test/etcd/global-setup.ts"],
          provide: { backend: "etcd" },
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
