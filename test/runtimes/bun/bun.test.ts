// The packed etcd-edge, imported by name, against real etcd under Bun.
import { beforeAll, describe, expect, it } from "vitest";
import { ensureRuntime, expectScenario, INSTALL_TIMEOUT_MS, installedEntry, runCliScenario } from "../support";

describe("bun", () => {
  let bun: string;
  beforeAll(async () => {
    bun = await ensureRuntime("bun");
  }, INSTALL_TIMEOUT_MS);

  it("locks, writes fenced, watches the write, unlocks, closes the session, then the same with withLock", async () => {
    // --no-install: resolve from the temp project's node_modules only, never auto-install from a registry.
    const { report, prefix } = await runCliScenario("bun", bun, ["--no-install"], {
      env: { BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0" },
    });
    expect(report.resolved).toBe(installedEntry());
    await expectScenario(report, { runtime: "bun", prefix });
  });
});
