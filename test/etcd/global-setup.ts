// globalSetup of the vitest `etcd-3.4` and `etcd-3.5` projects: finds (or fetches) the project's etcd version
// and starts one member of it, shared by every test file of the project. (Extra members come from
// test/etcd/harness.ts, which reads the same version from ETCD_EDGE_ETCD_VERSION.)
/// <reference path="./provided.d.ts" />
import type { TestProject } from "vitest/node";
import { startEtcd } from "../support/etcd-members.js";
import { etcdBinaries } from "../support/etcd-versions.js";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const version = project.getProvidedContext().etcdVersion;
  if (version === undefined) throw new Error(`project ${project.name} sets no etcdVersion in vitest.config.ts`);
  const { release, binDir } = etcdBinaries(version);
  const member = await startEtcd({ name: `global-${version}`, binDir });
  project.provide("etcdRelease", release);
  project.provide("etcdEndpoint", member.clientUrl);
  return async () => {
    await member.stop();
  };
}
