// On a Node older than 22, a test run stops at once and says which Node it needs (issue 40: Node 20 ran the unit
// tests for four minutes and failed 211 of them on `Map.groupBy`). The machine's Node 20 (Debian's) runs vitest.
import { execFileSync, spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
// @ts-expect-error -- a plain .mjs script without declarations.
import { MIN_NODE_MAJOR, nodeTooOld } from "../../scripts/lib/node-guard.mjs";

/** A Node older than the minimum on this machine: Debian's, at /usr/bin/node. */
function oldNode(): string {
  const version = execFileSync("/usr/bin/node", ["--version"], { encoding: "utf8" }).trim();
  if (Number(version.slice(1).split(".")[0]) >= MIN_NODE_MAJOR) {
    throw new Error(`/usr/bin/node is ${version}: this test needs a Node older than ${MIN_NODE_MAJOR} there`);
  }
  return "/usr/bin/node";
}

describe("a test run on an old Node", () => {
  it("names the Node it needs", () => {
    expect(nodeTooOld("20.20.2")).toMatch(/need Node 22 or newer; this is Node 20\.20\.2/);
    expect(nodeTooOld("22.0.0")).toBeUndefined();
    expect(nodeTooOld("24.1.0")).toBeUndefined();
  });

  it("stops at once with that message, before any test runs", () => {
    const started = performance.now();
    const run = spawnSync(oldNode(), ["node_modules/vitest/vitest.mjs", "run", "--project", "unit", "test/unit"], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/etcd-edge's tests need Node 22 or newer; this is Node 20\./);
    expect(run.stdout).not.toMatch(/Test Files/);
    // "At once": well before the minutes the suite would take.
    expect(performance.now() - started).toBeLessThan(30_000);
  });
});
