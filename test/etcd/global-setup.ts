// globalSetup of the vitest `etcd-3.4` and `etcd-3.5` projects: finds (or fetches) the project's etcd version
// and starts the shared members of the project: one per vitest worker, so that files running at the same time
// never share a member (a file's revisions and request counts then see only its own writes).
// (Extra members come from test/etcd/harness.ts, which reads the same version from ETCD_EDGE_ETCD_VERSION.)
/// <reference path="./provided.d.ts" />
import type { TestProject } from "vitest/node";
import { startEtcd, type EtcdMember } from "../support/etcd-members.js";
import { etcdBinaries } from "../support/etcd-versions.js";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const version = project.getProvidedContext().etcdVersion;
  if (version === undefined) throw new Error(`project ${project.name} sets no etcdVersion in vitest.config.ts`);
  const { release, binDir } = etcdBinaries(version);
  const workers = Math.max(1, project.config.maxWorkers);
  const started = await Promise.allSettled(
    Array.from({ length: workers }, (_, i) => startEtcd({ name: `shared-${version}-${i + 1}`, binDir })),
  );
  const members = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  const stop = async () => {
    await Promise.all(members.map((m: EtcdMember) => m.stop()));
  };
  const failed = started.find((s) => s.status === "rejected");
  if (failed !== undefined) {
    await stop();
    throw failed.reason;
  }
  project.provide("etcdRelease", release);
  project.provide(
    "etcdEndpoints",
    members.map((m) => m.clientUrl),
  );
  return stop;
}
