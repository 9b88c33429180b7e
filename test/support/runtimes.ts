/// <reference path="../runtimes/provided.d.ts" />
// For the runtimes project: pinned runtimes installed from the npm registry into .cache/runtimes,
// bounded child processes that never outlive the test process, and the checks every runtime's report
// must pass (against etcd itself, read over the gateway with plain fetch, not with the SDK under test).
import { randomUUID } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createServer, request as httpRequest } from "node:http";
import { arch, platform } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { expect, inject } from "vitest";
import { freePort } from "./ports.js";
import type { EtcdVersion } from "./etcd-versions.js";
import { cleanEnv, runProcess, spawnChild, tail } from "./processes.js";
import { post } from "./raw-gateway.js";
import { sleep } from "./time.js";
import { b64, prefixEnd, unb64 } from "./wire.js";

export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** Where runtimes are installed once and reused by later runs (gitignored). */
export const RUNTIMES_CACHE = process.env.ETCD_EDGE_RUNTIMES_CACHE ?? join(REPO_ROOT, ".cache", "runtimes");

/** Installing one runtime on a cold cache downloads 30-60 MB; later runs only check `--version`. */
export const INSTALL_TIMEOUT_MS = 240_000;
/** One run of the shared scenario, process start and exit included. */
export const RUN_TIMEOUT_MS = 45_000;

// ---------------------------------------------------------------------------------------------
// Runtimes: pinned versions of the npm packages that carry the prebuilt binaries. Only the platform
// package is installed, with --ignore-scripts: the wrappers' postinstall scripts are neither needed nor run.

export type RuntimeName = "node22" | "node24" | "deno" | "bun" | "workerd";

interface RuntimeSpec {
  /** npm package holding the binary for this machine. */
  pkg: string;
  version: string;
  /** Path of the binary inside the package. */
  bin: string;
  /** What `<binary> --version` must print. */
  versionOutput: RegExp;
  /** What the script reports as `engine` when it runs under this runtime (see scenario/main.mjs, worker.mjs). */
  engine: string;
}

function hasAvx2(): boolean {
  try {
    return /\bavx2\b/.test(readFileSync("/proc/cpuinfo", "utf8"));
  } catch {
    return false;
  }
}

export function runtimeSpec(name: RuntimeName): RuntimeSpec {
  if (platform() !== "linux" || (arch() !== "x64" && arch() !== "arm64")) {
    // Never skip: a runtime we cannot test is a failure the reader must see.
    throw new Error(`the runtimes project supports linux x64/arm64 only, not ${platform()} ${arch()}`);
  }
  const x64 = arch() === "x64";
  switch (name) {
    case "node22":
      return {
        pkg: `node-linux-${arch()}`,
        version: "22.23.3",
        bin: "bin/node",
        versionOutput: /^v22\.23\.3$/m,
        engine: "node v22.23.3",
      };
    case "node24":
      return {
        pkg: `node-linux-${arch()}`,
        version: "24.21.0",
        bin: "bin/node",
        versionOutput: /^v24\.21\.0$/m,
        engine: "node v24.21.0",
      };
    case "deno":
      return {
        pkg: `@deno/linux-${arch()}-glibc`,
        version: "2.9.6",
        bin: "deno",
        versionOutput: /^deno 2\.9\.6 /m,
        engine: "deno 2.9.6",
      };
    case "bun":
      // Bun's default x64 build needs AVX2; the baseline build runs everywhere.
      return {
        pkg: x64 ? (hasAvx2() ? "@oven/bun-linux-x64" : "@oven/bun-linux-x64-baseline") : "@oven/bun-linux-aarch64",
        version: "1.4.5",
        bin: "bin/bun",
        versionOutput: /^1\.4\.5$/m,
        engine: "bun 1.4.5",
      };
    case "workerd":
      return {
        pkg: `@cloudflare/workerd-linux-${x64 ? "64" : "arm64"}`,
        version: "1.20261117.1",
        bin: "bin/workerd",
        versionOutput: /^workerd 2026-11-17$/m,
        engine: "Cloudflare-Workers",
      };
  }
}

/**
 * The runtime's binary, installed into RUNTIMES_CACHE/<name>-<version> with `npm install --prefix` when
 * missing. Installs into a private dir and renames it into place, so concurrent runs and interrupted
 * downloads never leave a half-installed runtime behind. Throws (fails the test) when it cannot install.
 */
export async function ensureRuntime(name: RuntimeName): Promise<string> {
  const spec = runtimeSpec(name);
  const dir = join(RUNTIMES_CACHE, `${name}-${spec.version}`);
  const binary = (root: string) => join(root, "node_modules", spec.pkg, spec.bin);
  if (!existsSync(binary(dir)) || !(await runsAs(binary(dir), spec))) {
    mkdirSync(RUNTIMES_CACHE, { recursive: true });
    sweepPartials(name);
    const partial = mkdtempSync(join(RUNTIMES_CACHE, `.partial-${name}-`));
    chmodSync(partial, 0o755);
    try {
      const npm = await runProcess(
        "npm",
        [
          "install",
          "--prefix",
          partial,
          "--no-save",
          "--no-package-lock",
          "--no-audit",
          "--no-fund",
          "--ignore-scripts",
          "--loglevel=error",
          `${spec.pkg}@${spec.version}`,
        ],
        {
          cwd: partial,
          env: { ...process.env, npm_config_update_notifier: "false" },
          timeoutMs: INSTALL_TIMEOUT_MS - 10_000,
        },
      );
      if (npm.code !== 0 || !existsSync(binary(partial))) {
        throw new Error(
          `could not install ${name} (npm install ${spec.pkg}@${spec.version}): exit ${npm.code ?? npm.signal}` +
            `${npm.timedOut ? " (timed out)" : ""}\n${tail(npm.stderr)}`,
        );
      }
      // Another run may have installed it meanwhile: theirs is as good as ours, and may be running.
      if (!existsSync(binary(dir))) {
        rmSync(dir, { recursive: true, force: true });
        try {
          renameSync(partial, dir);
        } catch (error) {
          if (!existsSync(binary(dir))) throw error;
        }
      }
    } finally {
      rmSync(partial, { recursive: true, force: true });
    }
    if (!(await runsAs(binary(dir), spec))) {
      throw new Error(`${binary(dir)} was installed but \`--version\` does not print ${spec.versionOutput}`);
    }
  }
  return binary(dir);
}

/** Removes installs that a killed run left half done (older than any install can take). */
function sweepPartials(name: RuntimeName): void {
  for (const entry of readdirSync(RUNTIMES_CACHE)) {
    if (!entry.startsWith(`.partial-${name}-`)) continue;
    const path = join(RUNTIMES_CACHE, entry);
    try {
      if (Date.now() - statSync(path).mtimeMs > 2 * INSTALL_TIMEOUT_MS) rmSync(path, { recursive: true, force: true });
    } catch {
      // Another run removed it first.
    }
  }
}

async function runsAs(binary: string, spec: RuntimeSpec): Promise<boolean> {
  const result = await runProcess(binary, ["--version"], { timeoutMs: 20_000 });
  return result.code === 0 && spec.versionOutput.test(result.stdout.trim());
}

// ---------------------------------------------------------------------------------------------
// The temp project (made once per run by global-setup.ts) and the scenario's report

/** The temp project where the packed etcd-edge is installed and test/runtimes/scenario/ was copied. */
export function project(): string {
  return inject("runtimesProject");
}

/** The member of `version` started by global-setup (3.4 unless a test's row says otherwise). */
export function etcdEndpoint(version: EtcdVersion = "3.4"): string {
  return inject("etcdEndpointByVersion")[version];
}

/** A key prefix no other test uses. */
export function uniquePrefix(runtime: string): string {
  return `runtimes/${runtime}-${randomUUID()}/`;
}

/** What scenario/script.mjs reports (scenario/main.mjs adds `resolved`). */
export interface Report {
  runtime: string;
  /** Which runtime really ran the script, as it reports itself. */
  engine: string;
  version: string;
  resolved?: string;
  lockKey: string;
  leaseId: string;
  revision: number;
  heldWhileLocked: boolean;
  key: string;
  value: string;
  fenced: boolean;
  putRevision: number;
  watched: string;
  watchedRevision: number;
  unlocked: boolean;
  staleFenced: boolean;
  closed: boolean;
  /** What the `etcd.withLock` step observed. */
  withLock: { fenced: boolean; token: number; putRevision: number };
  /**
   * A watch renewed every 300 ms while writes went on: revisions written and delivered, streams the server ended,
   * and how many of those had their successor sent first.
   */
  renewal: { written: number[]; delivered: number[]; ended: number; handedOver: number };
  error?: string;
}

/** The one JSON line a runtime printed; anything else on stdout is a failure. */
export function parseReport(stdout: string, context: string): Report {
  const lines = stdout.split("\n").filter((line) => line.trim() !== "");
  if (lines.length !== 1)
    throw new Error(`expected exactly one JSON line on stdout, got ${lines.length}:\n${stdout}\n${context}`);
  try {
    return JSON.parse(lines[0]!) as Report;
  } catch {
    throw new Error(`stdout is not JSON: ${lines[0]}\n${context}`);
  }
}

/** How a command-line runtime runs a script of the temp project: arguments before the script, and environment. */
export interface CliInvocation {
  args: string[];
  /** Extra environment, given the temp project's directory. */
  env?: (project: string) => Record<string, string>;
}

export const CLI_INVOCATIONS: Record<"node" | "deno" | "bun", CliInvocation> = {
  node: { args: [] },
  // With a package.json beside the script, Deno resolves the bare "etcd-edge" from the project's node_modules
  // (no import map, no npm:). --cached-only: fail rather than fetch anything remote; --no-lock: no deno.lock.
  deno: {
    args: ["run", "--cached-only", "--no-lock", "--allow-net", "--allow-read", "--allow-env"],
    env: (dir) => ({ DENO_DIR: join(dir, ".deno"), DENO_NO_UPDATE_CHECK: "1", DENO_NO_PROMPT: "1" }),
  },
  // --no-install: resolve from the temp project's node_modules only, never auto-install from a registry.
  bun: { args: ["--no-install"], env: () => ({ BUN_RUNTIME_TRANSPILER_CACHE_PATH: "0" }) },
};

/**
 * Runs scenario/main.mjs (or `script`) with a CLI runtime (Node, Deno, Bun) from the temp project against the
 * member of `etcd`; it must exit 0 by itself.
 */
export async function runCliScenario(
  runtime: RuntimeName,
  command: string,
  args: string[],
  options: {
    env?: Record<string, string>;
    etcd: EtcdVersion;
    script?: string;
    /** Arguments after the key prefix, for a scenario that takes more. */
    more?: string[];
  },
): Promise<{ report: Report; prefix: string }> {
  const prefix = uniquePrefix(runtime);
  const script = options.script ?? "main.mjs";
  const scriptArgs = [script, etcdEndpoint(options.etcd), runtime, prefix, ...(options.more ?? [])];
  const result = await runProcess(command, [...args, ...scriptArgs], {
    cwd: project(),
    env: cleanEnv(options.env),
    timeoutMs: RUN_TIMEOUT_MS,
  });
  const context =
    `${runtime}: exit ${result.code ?? result.signal}` +
    `${result.timedOut ? ` (killed after ${RUN_TIMEOUT_MS} ms: the process did not exit by itself)` : ""}` +
    `\nstderr:\n${tail(result.stderr)}`;
  const report = parseReport(result.stdout, context);
  expect(report.error, context).toBeUndefined();
  expect(result.timedOut, context).toBe(false);
  expect(result.code, context).toBe(0);
  return { report, prefix };
}

/** The packed version of etcd-edge (the repo's package.json version). */
export function packedVersion(): string {
  return (JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { version: string }).version;
}

/** The file a bare `import "etcd-edge"` must load from the temp project. */
export function installedEntry(): string {
  return pathToFileURL(realpathSync(join(project(), "node_modules", "etcd-edge", "dist", "index.js"))).href;
}

/**
 * Checks what the runtime observed and what etcd holds now: the fenced value is stored at the reported
 * revision (the stale write after unlock did not land), the lock's keys are gone, the lease is revoked.
 */
export async function expectScenario(
  report: Report,
  expected: { runtime: RuntimeName; prefix: string; etcd?: EtcdVersion },
): Promise<void> {
  const { runtime, prefix } = expected;
  expect(report.error).toBeUndefined();
  expect(report).toMatchObject({
    runtime,
    engine: runtimeSpec(runtime).engine,
    version: packedVersion(),
    heldWhileLocked: true,
    key: `${prefix}data`,
    fenced: true,
    watched: report.value,
    unlocked: true,
    staleFenced: false,
    closed: true,
  });
  expect(report.value).toMatch(new RegExp(`^${runtime}:[0-9a-f-]{36}$`));
  expect(report.lockKey).toMatch(new RegExp(`^${prefix}lock/${BigInt(report.leaseId).toString(16)}_[0-9a-f]{16}$`));
  expect(report.revision).toBeGreaterThan(0);
  expect(report.putRevision).toBeGreaterThan(report.revision);
  expect(report.watchedRevision).toBe(report.putRevision);

  const endpoint = etcdEndpoint(expected.etcd);
  const stored = await gatewayRange(endpoint, report.key);
  expect(stored.kvs.map((kv) => ({ value: kv.value, modRevision: kv.modRevision }))).toEqual([
    { value: report.value, modRevision: report.putRevision },
  ]);
  const lockKeys = await gatewayRange(endpoint, `${prefix}lock/`, { prefix: true });
  expect(lockKeys.kvs.map((kv) => kv.key)).toEqual([]);
  expect(await gatewayLeaseTtl(endpoint, report.leaseId)).toBe(-1);

  // withLock: its fenced write landed after the first lock's close, and it left no lock key behind.
  expect(report.withLock.fenced).toBe(true);
  expect(report.withLock.token).toBeGreaterThan(report.putRevision);
  expect(report.withLock.putRevision).toBeGreaterThan(report.withLock.token);
  const guarded = await gatewayRange(endpoint, `${prefix}with-lock-data`);
  expect(guarded.kvs.map((kv) => ({ value: kv.value, modRevision: kv.modRevision }))).toEqual([
    { value: report.value, modRevision: report.withLock.putRevision },
  ]);
  expect((await gatewayRange(endpoint, `${prefix}with-lock/`, { prefix: true })).kvs).toEqual([]);

  // The watch renewed at least twice (its streams live 300 ms), each successor sent before the server's end of the
  // stream before it, and nothing lost or repeated.
  expect(report.renewal.delivered).toEqual(report.renewal.written);
  expect(report.renewal.written).toHaveLength(24);
  expect(report.renewal.ended).toBeGreaterThanOrEqual(2);
  expect(report.renewal.handedOver).toBe(report.renewal.ended);
}

// ---------------------------------------------------------------------------------------------
// etcd read over the JSON gateway with plain fetch: independent of the SDK under test.

export async function gatewayRange(endpoint: string, key: string, options: { prefix?: boolean } = {}) {
  const body: Record<string, string> = { key: b64(key) };
  if (options.prefix) body.range_end = prefixEnd(key);
  const json = await post<{ kvs?: Array<{ key: string; value?: string; mod_revision?: string }> }>(
    endpoint,
    "/v3/kv/range",
    body,
    5_000,
  );
  return {
    kvs: (json.kvs ?? []).map((kv) => ({
      key: unb64(kv.key),
      value: unb64(kv.value),
      modRevision: Number(kv.mod_revision ?? 0),
    })),
  };
}

/** The lease's remaining TTL in seconds; -1 once it has expired or been revoked. */
export async function gatewayLeaseTtl(endpoint: string, leaseId: string): Promise<number> {
  const json = await post<{ TTL?: string }>(endpoint, "/v3/lease/timetolive", { ID: leaseId }, 5_000);
  return Number(json.TTL ?? 0);
}

// ---------------------------------------------------------------------------------------------
// workerd

/**
 * Builds a module Worker (scenario/worker.mjs by default) in the temp project, resolving
 * "etcd-edge" from its node_modules.
 */
export async function bundleWorker(outDir: string, entry = "worker.mjs"): Promise<{ file: string; inputs: string[] }> {
  const { build } = await import("esbuild");
  const file = join(outDir, "worker.js");
  const result = await build({
    entryPoints: [join(project(), entry)],
    absWorkingDir: project(),
    outfile: file,
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    // No `mainFields`: the package bundles its dependencies, so a neutral build resolves it by `exports` alone.
    metafile: true,
    logLevel: "silent",
  });
  if (result.errors.length > 0) throw new Error(`esbuild: ${JSON.stringify(result.errors)}`);
  return { file, inputs: Object.keys(result.metafile!.inputs) };
}

/**
 * A workerd config: the Worker (with `flags`, none by default) with ETCD_ENDPOINTS and `vars` as text bindings, and
 * an outbound network that may reach loopback (workerd's default `internet` service allows public addresses only).
 */
export function workerdConfig(
  endpoints: string,
  compatibilityDate: string,
  flags: string[] = [],
  vars: Record<string, string> = {},
): string {
  const bindings = Object.entries({ ETCD_ENDPOINTS: endpoints, ...vars })
    .map(([name, text]) => `(name = ${JSON.stringify(name)}, text = ${JSON.stringify(text)})`)
    .join(", ");
  return `using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "worker", worker = .worker),
    (name = "loopback", network = (allow = ["local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "worker")],
);

const worker :Workerd.Worker = (
  modules = [(name = "worker", esModule = embed "worker.js")],
  compatibilityDate = ${JSON.stringify(compatibilityDate)},
  compatibilityFlags = ${JSON.stringify(flags)},
  bindings = [${bindings}],
  globalOutbound = "loopback",
);
`;
}

export interface WorkerdServer {
  url: string;
  /** workerd's stderr and stdout so far. */
  output(): string;
  stop(): Promise<void>;
}

/** Serves `configFile` on a free loopback port and waits (bounded) until GET /ping answers as `ready` says. */
export async function startWorkerd(
  binary: string,
  configFile: string,
  cwd: string,
  ready: (status: number, body: string) => boolean = (_, body) => body === "pong",
): Promise<WorkerdServer> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const child = spawnChild(binary, ["serve", configFile, "--socket-addr", `http=127.0.0.1:${port}`, "--verbose"], {
      cwd,
      env: cleanEnv(),
    });
    let output = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      child.once("exit", () => resolve());
      child.once("error", () => resolve());
    });
    const stop = async () => {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 3_000);
      await exited;
      clearTimeout(timer);
    };
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline && child.exitCode === null && child.signalCode === null) {
      try {
        const response = await fetch(`${url}/ping`, { signal: AbortSignal.timeout(1_000) });
        if (ready(response.status, await response.text())) return { url, output: () => output, stop };
      } catch {
        // Not listening yet.
      }
      await sleep(100);
    }
    await stop();
    // The port was free when we looked; someone may have taken it before workerd bound it.
    if (attempt < 3 && /address already in use/i.test(output)) continue;
    throw new Error(`workerd did not serve ${url}/ping within 20 s:\n${tail(output)}`);
  }
}

/** What a {@link recordingRelay} saw. */
export interface RecordingRelay {
  /** `http://127.0.0.1:<port>`: give it to the Worker in place of the member. */
  readonly url: string;
  /** The path of every request relayed so far, in arrival order. */
  paths(): string[];
  /** Requests whose answer has not ended yet (an open watch counts until it is cut). */
  inFlight(): number;
  /**
   * The next request to `path` is recorded and never forwarded nor answered: its sender waits until it gives
   * up. Resolves when it arrives.
   */
  swallowNext(path: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * A loopback HTTP relay in front of an etcd member that records every gateway request it forwards: what a
 * Worker really sent, counted at etcd's side. Bodies are piped both ways, so streams (watches) flow as sent.
 */
export async function recordingRelay(target: string): Promise<RecordingRelay> {
  const paths: string[] = [];
  const swallow = new Map<string, () => void>();
  let inFlight = 0;
  const server = createServer((incoming, outgoing) => {
    const path = incoming.url ?? "";
    paths.push(path);
    inFlight++;
    outgoing.once("close", () => inFlight--);
    const swallowed = swallow.get(path);
    if (swallowed !== undefined) {
      swallow.delete(path);
      incoming.resume();
      return swallowed();
    }
    const upstream = httpRequest(
      new URL(incoming.url ?? "/", target),
      { method: incoming.method, headers: incoming.headers },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    upstream.once("error", () => outgoing.destroy());
    outgoing.once("close", () => upstream.destroy());
    incoming.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    paths: () => [...paths],
    inFlight: () => inFlight,
    swallowNext: (path) => new Promise<void>((resolve) => swallow.set(path, resolve)),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A fresh dir inside the temp project. */
export function workDir(name: string): string {
  const dir = mkdtempSync(join(project(), `${name}-`));
  return dir;
}

export function writeText(file: string, text: string): void {
  writeFileSync(file, text);
}
