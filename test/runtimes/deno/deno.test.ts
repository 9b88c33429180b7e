// The packed etcd-edge, imported by name, against real etcd under Deno. With a package.json beside the
// script, Deno resolves the bare "etcd-edge" from the project's node_modules (no import map, no npm:).
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureRuntime, expectScenario, INSTALL_TIMEOUT_MS, installedEntry, project, runCliScenario } from "../support";

describe("deno", () => {
  let deno: string;
  beforeAll(async () => {
    deno = await ensureRuntime("deno");
  }, INSTALL_TIMEOUT_MS);

  it("locks, writes fenced, watches the write, unlocks, closes the session, then the same with withLock", async () => {
    // --cached-only: fail rather than fetch anything remote; --no-lock: write no deno.lock.
    const { report, prefix } = await runCliScenario(
      "deno",
      deno,
      ["run", "--cached-only", "--no-lock", "--allow-net", "--allow-read", "--allow-env"],
      { env: { DENO_DIR: join(project(), ".deno"), DENO_NO_UPDATE_CHECK: "1", DENO_NO_PROMPT: "1" } },
    );
    expect(report.resolved).toBe(installedEntry());
    await expectScenario(report, { runtime: "deno", prefix });
  });
});
