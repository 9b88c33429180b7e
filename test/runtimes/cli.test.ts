// The packed etcd-edge, imported by name from the temp project (global-setup.ts), run by each command-line
// runtime against real etcd: one row per runtime and etcd version. Every row runs scenario/main.mjs, which
// locks, writes fenced, watches the write, unlocks, closes the session, then does the same with withLock; the
// report it prints is checked against what etcd holds afterwards.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { EtcdVersion } from "../support/etcd-versions.js";
import {
  ensureRuntime,
  expectScenario,
  INSTALL_TIMEOUT_MS,
  installedEntry,
  project,
  RUN_TIMEOUT_MS,
  runCliScenario,
  type RuntimeName,
} from "../support/runtimes.js";

interface Row {
  runtime: RuntimeName;
  etcd: EtcdVersion;
  /** Arguments before the script. */
  args: string[];
  /** Extra environment, given the temp project's directory. */
  env?: (project: string) => Record<string, string>;
}

const rows: Row[] = [
  { runtime: "node22", etcd: "3.4", args: [] },
  { runtime: "node24", etcd: "3.4", args: [] },
  { runtime: "node24", etcd: "3.5", args: [] },
  {
    // With a package.json beside the script, Deno resolves the bare "etcd-edge" from the project's node_modules
    // (no import map, no npm:). --cached-only: fail rather than fetch anything remote; --no-lock: no deno.lock.
    runtime: "deno",
    etcd: "3.4",
    args: ["run", "--cached-only", "--no-lock", "--allow-net", "--allow-read", "--allow-env"],
    env: (dir) => ({ DENO_DIR: join(dir, ".deno"), DENO_NO_UPDATE_CHECK: "1", DENO_NO_PROMPT: "1" }),
  },
  {
    // --no-install: resolve from the temp project's node_modules only, never auto-install from a registry.
    runtime: "bun",
    etcd: "3.4",
    args: ["--no-install"],
    env: () => ({ BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0" }),
  },
];

describe("command-line runtimes", () => {
  // Installing a runtime on a cold cache downloads 30-60 MB; later runs only check `--version`.
  it.for(rows)(
    "$runtime on etcd $etcd runs the scenario from the packed package",
    { timeout: INSTALL_TIMEOUT_MS + RUN_TIMEOUT_MS },
    async (row) => {
      const binary = await ensureRuntime(row.runtime);
      const { report, prefix } = await runCliScenario(row.runtime, binary, row.args, {
        env: row.env?.(project()),
        etcd: row.etcd,
      });
      expect(report.resolved).toBe(installedEntry());
      await expectScenario(report, { runtime: row.runtime, prefix, etcd: row.etcd });
    },
  );
});
