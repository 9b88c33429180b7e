// `npm run mutate`: how much of the lock core the fast mock-backed suites can see (docs/mutation.md). Each
// mutant of src/lock runs the tests that cover it (vitest.mutate.config.ts); a mutant no test fails survives.
// Incremental: a rerun tests only the mutants whose code or covering tests changed since the last run.
/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutate.config.ts", related: false },
  coverageAnalysis: "perTest",
  mutate: ["src/lock/**/*.ts"],
  ignoreStatic: true,
  incremental: true,
  incrementalFile: ".cache/stryker/incremental.json",
  tempDirName: ".cache/stryker/tmp",
  // What the mock-backed suites never read: caches (etcd builds, Python venvs with symlinked dirs), builds, tools.
  ignorePatterns: ["/.cache", "/.tools", "/dist", "/examples/**/node_modules"],
  cleanTempDir: "always",
  concurrency: 3,
  timeoutMS: 10_000,
  reporters: ["clear-text", "progress", "json", "html"],
  jsonReporter: { fileName: ".cache/stryker/mutation.json" },
  htmlReporter: { fileName: ".cache/stryker/mutation.html" },
  thresholds: { high: 95, low: 90, break: null },
};
