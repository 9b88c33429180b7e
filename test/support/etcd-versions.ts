// The etcd versions the real-etcd projects run against, and where their binaries are. The versions and how to
// get them live in one place, scripts/lib/etcd-versions.sh: scripts/test.sh exports ETCD_34_BIN_DIR and
// ETCD_35_BIN_DIR; when a developer runs vitest directly, this asks that script (which fetches 3.5 into
// .cache/etcd once). Node-only, no vitest import: global setups use it in vitest's main process.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export type EtcdVersion = "3.4" | "3.5";

/** Every version the `etcd-<version>` projects cover, oldest first. */
export const ETCD_VERSIONS: readonly EtcdVersion[] = ["3.4", "3.5"];

export interface EtcdBinaries {
  version: EtcdVersion;
  /** What `etcd --version` reports, e.g. "3.5.16". */
  release: string;
  /** Directory holding etcd and etcdctl. */
  binDir: string;
}

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

const envName = (version: EtcdVersion) => `ETCD_${version.replace(".", "")}_BIN_DIR`;

/** Asks scripts/lib/etcd-versions.sh for the version's directory (finding or fetching it); throws with its reasons. */
function ensureWithScript(version: EtcdVersion): string {
  const fn = `ensure_etcd_${version.replace(".", "")}`;
  const result = spawnSync("bash", ["-c", `source scripts/lib/env.sh && ${fn}`], {
    cwd: REPO_ROOT,
    encoding: "utf8",
    timeout: 300_000,
  });
  const dir = result.stdout?.trim().split("\n").at(-1) ?? "";
  if (result.status !== 0 || dir === "") {
    // Never skip: a suite that passes without the etcd it claims to test proves nothing.
    throw new Error(
      `etcd ${version} is not available (${fn} in scripts/lib/etcd-versions.sh failed` +
        `${result.error ? `: ${result.error.message}` : ""}):\n${result.stderr?.trim() ?? ""}\n` +
        `Run \`bash scripts/test.sh\` (or \`bash .ci/run\` on a fresh machine), or set ${envName(version)}.`,
    );
  }
  return dir;
}

function reportedRelease(binDir: string): string {
  const probe = spawnSync(join(binDir, "etcd"), ["--version"], { encoding: "utf8", timeout: 20_000 });
  const release = /^etcd Version: (\S+)/m.exec(probe.stdout ?? "")?.[1];
  if (probe.status !== 0 || release === undefined) {
    throw new Error(`${join(binDir, "etcd")} --version failed: ${probe.error?.message ?? probe.stderr}`);
  }
  return release;
}

/** The binaries of `version`: from ETCD_<NN>_BIN_DIR when set, else from the script. Checked, never guessed. */
export function etcdBinaries(version: EtcdVersion): EtcdBinaries {
  const binDir = process.env[envName(version)] || ensureWithScript(version);
  const release = reportedRelease(binDir);
  if (!release.startsWith(`${version}.`)) {
    throw new Error(`${join(binDir, "etcd")} is etcd ${release}, but the etcd-${version} tests need ${version}.x`);
  }
  if (!existsSync(join(binDir, "etcdctl"))) throw new Error(`no etcdctl in ${binDir}`);
  return { version, release, binDir };
}
