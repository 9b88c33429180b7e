// The packed etcd-edge, imported by name from the temp project (global-setup.ts), run by each command-line
// runtime against real etcd: one row per runtime and etcd version. Every row runs scenario/main.mjs, which
// locks, writes fenced, watches the write, unlocks, closes the session, then does the same with withLock; the
// report it prints is checked against what etcd holds afterwards.
import { describe, expect, it } from "vitest";
import type { EtcdVersion } from "../support/etcd-versions.js";
import {
  CLI_INVOCATIONS,
  type CliInvocation,
  ensureRuntime,
  expectScenario,
  INSTALL_TIMEOUT_MS,
  installedEntry,
  project,
  RUN_TIMEOUT_MS,
  runCliScenario,
  type RuntimeName,
} from "../support/runtimes.js";

interface Row extends CliInvocation {
  runtime: RuntimeName;
  etcd: EtcdVersion;
}

const rows: Row[] = [
  { runtime: "node22", etcd: "3.4", ...CLI_INVOCATIONS.node },
  { runtime: "node24", etcd: "3.4", ...CLI_INVOCATIONS.node },
  { runtime: "node24", etcd: "3.5", ...CLI_INVOCATIONS.node },
  { runtime: "node24", etcd: "3.6", ...CLI_INVOCATIONS.node },
  { runtime: "node24", etcd: "3.7", ...CLI_INVOCATIONS.node },
  { runtime: "deno", etcd: "3.4", ...CLI_INVOCATIONS.deno },
  { runtime: "bun", etcd: "3.4", ...CLI_INVOCATIONS.bun },
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
