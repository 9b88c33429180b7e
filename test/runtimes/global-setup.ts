// globalSetup of the vitest `runtimes` project: starts one etcd member of every version the tests cover,
// then packs the BUILT package once, the way it is published, and installs the tarball into
// a temp project outside the repo, next to the scenario scripts (test/runtimes/scenario/).
// Every runtime then imports "etcd-edge" by name from there.
/// <reference path="./provided.d.ts" />
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";
import { DIST_ENTRY, distIsCurrent } from "../support/build.js";
import { startEtcd, type EtcdMember } from "../support/etcd-members.js";
import { etcdBinaries, ETCD_VERSIONS, type EtcdVersion } from "../support/etcd-versions.js";
import { runProcess } from "../support/processes.js";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

function assertBuilt(): void {
  if (!existsSync(DIST_ENTRY)) {
    throw new Error(
      "dist/index.js is missing: the runtimes project tests the built package; run `npm run build` first",
    );
  }
  if (!distIsCurrent()) {
    throw new Error(
      "dist/ is older than src/: the runtimes project would test a stale build; run `npm run build` first",
    );
  }
}

async function npm(args: string[], cwd: string): Promise<string> {
  const result = await runProcess("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd,
    // The whole environment: npm may need its proxy and CA settings to reach the registry.
    env: { ...process.env, npm_config_update_notifier: "false" },
    timeoutMs: 120_000,
  });
  if (result.code !== 0) {
    throw new Error(
      `npm ${args.join(" ")} failed ` +
        `(exit ${result.code ?? result.signal}${result.timedOut ? ", timed out" : ""}):\n${result.stderr}`,
    );
  }
  return result.stdout;
}

/** One member per version, so a runtime's row in the table can name the version it runs against. */
async function startMembers(): Promise<{ endpoints: Record<EtcdVersion, string>; stop(): Promise<void> }> {
  const members: EtcdMember[] = [];
  const stop = async () => {
    await Promise.all(members.map((m) => m.stop()));
  };
  try {
    for (const version of ETCD_VERSIONS) {
      members.push(await startEtcd({ name: `runtimes-${version}`, binDir: etcdBinaries(version).binDir }));
    }
  } catch (error) {
    await stop();
    throw error;
  }
  const endpoints = Object.fromEntries(ETCD_VERSIONS.map((v, i) => [v, members[i]!.clientUrl])) as Record<
    EtcdVersion,
    string
  >;
  return { endpoints, stop };
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  assertBuilt();
  const etcd = await startMembers();
  project.provide("etcdEndpointByVersion", etcd.endpoints);
  const root = mkdtempSync(join(tmpdir(), "etcd-edge-runtimes-"));
  try {
    // `npm pack` applies `files` and `exports` exactly as a publish would.
    const packed = JSON.parse(
      await npm(["pack", "--ignore-scripts", "--json", "--pack-destination", root], REPO_ROOT),
    ) as Array<{ filename: string }>;
    const tarball = join(root, packed[0]!.filename);
    const dir = join(root, "project");
    mkdirSync(dir);
    writeFileSync(
      join(dir, "package.json"),
      `${JSON.stringify({ name: "etcd-edge-runtimes", private: true, type: "module" }, null, 2)}\n`,
    );
    // The package has no runtime dependency (zod/mini and base64-js are bundled into dist/): nothing else is fetched.
    await npm(["install", "--ignore-scripts", "--no-package-lock", tarball], dir);
    cpSync(join(REPO_ROOT, "test", "runtimes", "scenario"), dir, { recursive: true });
    project.provide("runtimesProject", dir);
  } catch (error) {
    rmSync(root, { recursive: true, force: true });
    await etcd.stop();
    throw error;
  }
  return async () => {
    rmSync(root, { recursive: true, force: true });
    await etcd.stop();
  };
}
