/// <reference path="./provided.d.ts" />
// Extra etcd members for the test files of the etcd-3.4 and etcd-3.5 projects, always of the project's own
// version: test/support/etcd-members.ts with the project's binaries filled in. A test never names a version.
import { inject } from "vitest";
import * as members from "../support/etcd-members.js";

export { addUser, enableAuth, makeLeader, type EtcdCluster, type EtcdMember } from "../support/etcd-members.js";

/** Options of a member; the binaries are the project's. */
export type EtcdOptions = Omit<members.EtcdOptions, "binDir">;

/** Directory of the project's etcd and etcdctl. */
export function etcdBinDir(): string {
  const dir = inject("etcdBinDir");
  if (dir === undefined) throw new Error("no etcdBinDir: this runs only in an etcd-3.x vitest project");
  return dir;
}

export function startEtcd(opts: EtcdOptions = {}): Promise<members.EtcdMember> {
  return members.startEtcd({ ...opts, binDir: etcdBinDir() });
}

export function startCluster(size = 3, opts: EtcdOptions = {}): Promise<members.EtcdCluster> {
  return members.startCluster(size, { ...opts, binDir: etcdBinDir() });
}
