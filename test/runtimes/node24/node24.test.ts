// The packed etcd-edge, imported by name, against real etcd under Node 24.
import { beforeAll, describe, expect, it } from "vitest";
import { ensureRuntime, expectScenario, INSTALL_TIMEOUT_MS, installedEntry, runCliScenario } from "../support";

describe("node24", () => {
  let node: string;
  beforeAll(async () => {
    node = await ensureRuntime("node24");
  }, INSTALL_TIMEOUT_MS);

  it("locks, writes fenced, watches the write, unlocks, closes the session, then the same with withLock", async () => {
    const { report, prefix } = await runCliScenario("node24", node, []);
    expect(report.resolved).toBe(installedEntry());
    await expectScenario(report, { runtime: "node24", prefix });
  });
});
