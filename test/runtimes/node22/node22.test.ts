// The packed etcd-edge, imported by name, against real etcd under Node 22.
import { beforeAll, describe, expect, it } from "vitest";
import { ensureRuntime, expectScenario, INSTALL_TIMEOUT_MS, installedEntry, runCliScenario } from "../support";

describe("node22", () => {
  let node: string;
  beforeAll(async () => {
    node = await ensureRuntime("node22");
  }, INSTALL_TIMEOUT_MS);

  it("locks, writes fenced, watches the write, unlocks, closes the session, then the same with withLock", async () => {
    const { report, prefix } = await runCliScenario("node22", node, []);
    expect(report.resolved).toBe(installedEntry());
    await expectScenario(report, { runtime: "node22", prefix });
  });
});
