// The packed etcd-edge, imported by name and bundled with esbuild as for Cloudflare, in a module Worker
// (no nodejs_compat) served by workerd, against real etcd on loopback. Two requests run the scenario in
// the same isolate, as a deployed Worker would.
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bundleWorker,
  ensureRuntime,
  etcdEndpoint,
  expectScenario,
  INSTALL_TIMEOUT_MS,
  parseReport,
  startWorkerd,
  uniquePrefix,
  workDir,
  workerdConfig,
  writeText,
  type WorkerdServer,
} from "../support/runtimes.js";

const COMPATIBILITY_DATE = "2026-11-01";

describe("workerd", () => {
  let server: WorkerdServer | undefined;
  let inputs: string[] = [];

  beforeAll(async () => {
    const workerd = await ensureRuntime("workerd");
    const dir = workDir("workerd");
    ({ inputs } = await bundleWorker(dir));
    const config = join(dir, "config.capnp");
    writeText(config, workerdConfig(etcdEndpoint(), COMPATIBILITY_DATE));
    server = await startWorkerd(workerd, config, dir);
  }, INSTALL_TIMEOUT_MS);

  afterAll(async () => {
    await server?.stop();
  });

  it("bundles etcd-edge from the temp project's node_modules", () => {
    expect(inputs).toContain("node_modules/etcd-edge/dist/index.js");
    expect(inputs.filter((input) => input.startsWith("node:"))).toEqual([]);
  });

  it.each([1, 2])(
    "request %i: locks, writes fenced, watches the write, unlocks, closes the session, then the same with withLock",
    async () => {
      const prefix = uniquePrefix("workerd");
      const response = await fetch(`${server!.url}/run?prefix=${encodeURIComponent(prefix)}`, {
        signal: AbortSignal.timeout(30_000),
      });
      const body = await response.text();
      const context = `HTTP ${response.status}\nworkerd output:\n${server!.output()}`;
      const report = parseReport(body, context);
      expect(report.error, context).toBeUndefined();
      expect(response.status, context).toBe(200);
      await expectScenario(report, { runtime: "workerd", prefix });
      // Nothing the SDK left behind (a timer, an unread body, a rejected promise) made workerd complain.
      expect(server!.output()).not.toMatch(/uncaught|unhandled|hanging promise|exception/i);
    },
  );
});
