// The README's known-good OpenTelemetry package set (issue 40: the obvious `npm i` of the SDK packages fails on
// their own peer ranges): its `npm i` line, run as written in a fresh project beside the packed etcd-edge, installs;
// then a script traces a `withLock` against real etcd through etcd-edge/otel with those packages.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { codeBlocks } from "../support/doc-blocks.js";
import { runProcess } from "../support/processes.js";
import { etcdEndpoint, project } from "../support/runtimes.js";

// Outside the runtimes project: a project of its own, as a user's.
const work = mkdtempSync(join(tmpdir(), "etcd-edge-otel-packages-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The README's `npm i` line, continuation lines joined. */
function installLine(): string[] {
  const [block] = codeBlocks("README.md", "### OpenTelemetry", "sh");
  const line = block!.replace(/\\\n\s*/g, " ").trim();
  expect(line).toMatch(/^npm i @opentelemetry\//);
  return line.split(/\s+/).slice(1);
}

const SCRIPT = `
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { Etcd } from "etcd-edge";
import { instrument } from "etcd-edge/otel";

class Reader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const exporter = new InMemorySpanExporter();
const tracerProvider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
const reader = new Reader();
const meterProvider = new MeterProvider({ readers: [reader] });
const otel = instrument({ tracerProvider, meterProvider });
const etcd = new Etcd({ endpoints: process.env.ETCD_ENDPOINT });
await etcd.withLock("otel-packages/" + Date.now(), () => "done");
await etcd.close();
otel.disable();
const metrics = (await reader.collect()).resourceMetrics.scopeMetrics.flatMap((s) => s.metrics);
console.log(JSON.stringify({
  spans: exporter.getFinishedSpans().map((span) => span.name),
  metrics: metrics.map((metric) => metric.descriptor.name),
}));
`;

describe("the README's OpenTelemetry package set", () => {
  it("installs as written beside the packed package, and traces a withLock", { timeout: 240_000 }, async () => {
    writeFileSync(join(work, "package.json"), JSON.stringify({ name: "otel-packages", private: true, type: "module" }));
    const npm = (args: string[]) =>
      runProcess("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], {
        cwd: work,
        env: { ...process.env, npm_config_update_notifier: "false" },
        timeoutMs: 180_000,
      });
    // The tarball global-setup packed, beside the runtimes project: installed as a user installs it.
    const root = dirname(project());
    const tarball = readdirSync(root).find((file) => /^etcd-edge-.*\.tgz$/.test(file));
    expect(tarball, `no packed etcd-edge in ${root}`).toBeDefined();
    const etcdEdge = await npm(["install", join(root, tarball!)]);
    expect(etcdEdge.code, etcdEdge.stderr).toBe(0);
    const otelSet = await npm(installLine());
    expect(otelSet.code, otelSet.stderr).toBe(0);

    writeFileSync(join(work, "trace.mjs"), SCRIPT);
    const run = await runProcess("node", ["trace.mjs"], {
      cwd: work,
      env: { ...process.env, ETCD_ENDPOINT: etcdEndpoint("3.4") },
      timeoutMs: 60_000,
    });
    expect(run.code, run.stderr).toBe(0);
    const report = JSON.parse(run.stdout.trim().split("\n").at(-1)!);
    expect(report.spans).toEqual(expect.arrayContaining(["mutex.acquire", "mutex.release", "mutex.with_lock"]));
    expect(report.metrics).toEqual(expect.arrayContaining(["etcd_edge.lock.wait.duration"]));
  });
});
