import { configDefaults, defineConfig } from "vitest/config";

// The suites `npm run mutate` (StrykerJS, stryker.config.mjs) runs against each mutant of the lock core: the
// fast mock-backed ones, on the in-memory gateway in its first dialect, as the `unit` project runs them. No
// real etcd, no child processes; the model search runs a short fixed budget (ETCD_EDGE_MODEL_RUNS below).
export default defineConfig({
  test: {
    include: ["test/unit/**/*.test.ts", "test/conformance/**/*.test.ts"],
    // Tests of the source's shape (bundles, layers, helpers) read files that Stryker's instrumentation rewrites;
    // those that bundle or load the built package need what its sandbox does not copy (dist/). None runs the locks.
    exclude: [
      ...configDefaults.exclude,
      "test/unit/bundle-neutral.test.ts",
      "test/unit/mock-bundle-neutral.test.ts",
      "test/unit/mock-clock-server.test.ts",
      "test/unit/memory-caps.test.ts",
      "test/unit/wire-schemas.test.ts",
      "test/unit/layers.test.ts",
      "test/unit/test-helpers.test.ts",
    ],
    provide: { backend: "mock", mockVersion: "3.4" },
    testTimeout: 30_000,
    // Stryker tells which test covers a mutant by the test running when it ran: the suites that run their tests
    // side by side (describe.concurrent, to shorten their real-time waits) run them one at a time here.
    maxConcurrency: 1,
  },
});
