// Extra etcd members for tests, always of the version the run is about: the etcd-3.x vitest project's
// (vitest.config.ts sets ETCD_EDGE_ETCD_VERSION in each), or 3.4 outside those projects (the chaos project,
// `npm run chaos`). A test never names a version. Plain Node loads this file too (node test/chaos/run.ts):
// no vitest import, and `.ts` import paths.
import * as members from "../support/etcd-members.ts";
import { etcdBinaries, type EtcdVersion, isEtcdVersion } from "../support/etcd-versions.ts";

export {
  addUser,
  enableAuth,
  makeLeader,
  memberStatus,
  type EtcdCluster,
  type EtcdMember,
} from "../support/etcd-members.ts";

/** Options of a member; the binaries are the run's version. */
export type EtcdOptions = Omit<members.EtcdOptions, "binDir">;

/** The etcd version of the run: ETCD_EDGE_ETCD_VERSION (set per etcd-3.x project), else 3.4. */
export function etcdVersion(): EtcdVersion {
  const version = process.env.ETCD_EDGE_ETCD_VERSION ?? "3.4";
  if (!isEtcdVersion(version)) throw new Error(`ETCD_EDGE_ETCD_VERSION=${version} is not a version the tests know`);
  return version;
}

/** Directory of the run's etcd and etcdctl. */
export function etcdBinDir(): string {
  return etcdBinaries(etcdVersion()).binDir;
}

/**
 * The flag that sets how often a member sends progress notifications: `--experimental-` until 3.5, plain from 3.6
 * (3.7 no longer knows the experimental one).
 */
export function progressNotifyFlag(interval: string): string {
  const version = etcdVersion();
  const experimental = version === "3.4" || version === "3.5" ? "experimental-" : "";
  return `--${experimental}watch-progress-notify-interval=${interval}`;
}

export function startEtcd(opts: EtcdOptions = {}): Promise<members.EtcdMember> {
  return members.startEtcd({ ...opts, binDir: etcdBinDir() });
}

export function startCluster(size = 3, opts: EtcdOptions = {}): Promise<members.EtcdCluster> {
  return members.startCluster(size, { ...opts, binDir: etcdBinDir() });
}
