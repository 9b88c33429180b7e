import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sharedEndpoint } from "../support/etcd.js";

// `npm run demo` runs examples/demo/inventory.mjs on the built package (the test command builds first).
const script = join(import.meta.dirname, "../../examples/demo/inventory.mjs");
const noEtcdDir = mkdtempSync(join(tmpdir(), "etcd-edge-demo-path-"));
symlinkSync(process.execPath, join(noEtcdDir, "node"));
afterAll(() => rmSync(noEtcdDir, { recursive: true, force: true }));

function runDemo(env: Record<string, string | undefined>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

function expectCorrectNumbers(output: string): void {
  expect(output).toMatch(/without a lock: sold (\d+) from a stock of 100/);
  expect(output).toMatch(/with the lock: +sold 100, refused 50, stock left 0, fencing tokens strictly increasing/);
  expect(output).toContain("OK: no oversell under the lock");
}

describe("npm run demo", () => {
  it("runs on the embedded in-memory gateway when no etcd is on PATH", async () => {
    const { code, output } = await runDemo({ PATH: noEtcdDir, ETCD_ENDPOINTS: undefined });
    expect(output).toContain("backend: the embedded in-memory gateway");
    expectCorrectNumbers(output);
    expect(code).toBe(0);
  });

  it("uses ETCD_ENDPOINTS when it is set", async () => {
    const endpoint = sharedEndpoint();
    const { code, output } = await runDemo({ ETCD_ENDPOINTS: endpoint });
    expect(output).toContain(`backend: etcd at ${endpoint} (from ETCD_ENDPOINTS)`);
    expectCorrectNumbers(output);
    expect(code).toBe(0);
  });

  it("starts a local etcd when one is on PATH", async () => {
    const { code, output } = await runDemo({
      PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
      ETCD_ENDPOINTS: undefined,
    });
    expect(output).toMatch(/backend: a local etcd 3\.\d+\.\d+ started on http:\/\/127\.0\.0\.1:\d+ for this run/);
    expectCorrectNumbers(output);
    expect(code).toBe(0);
  });
});
