// globalSetup of the vitest `etcd` project: one real member shared by every test file.
/// <reference path="./provided.d.ts" />
import { spawnSync } from "node:child_process";
import type { TestProject } from "vitest/node";
import { startEtcd } from "./harness";

function assertEtcdInstalled(): void {
  const probes: Array<[string, string]> = [
    ["etcd", "--version"],
    ["etcdctl", "version"],
  ];
  for (const [binary, versionArg] of probes) {
    const probe = spawnSync(binary, [versionArg], { stdio: "ignore" });
    if (probe.error || probe.status !== 0) {
      // Never skip: a suite that silently passes without etcd proves nothing.
      throw new Error(
        `${binary} is not installed (or not on PATH), and the etcd test project needs a real etcd. ` +
          `Install it with: sudo apt-get install etcd-server etcd-client (Debian/Ubuntu), ` +
          `or run: bash .ci/run`,
      );
    }
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  assertEtcdInstalled();
  const member = await startEtcd({ name: "global" });
  project.provide("etcdEndpoint", member.clientUrl);
  return async () => {
    await member.stop();
  };
}
