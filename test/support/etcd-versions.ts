// The etcd versions the real-etcd projects run against, and where their binaries are. How to get them lives in
// scripts/lib/etcd-versions.sh: scripts/test.sh exports ETCD_34_BIN_DIR to ETCD_37_BIN_DIR; run without it
// (vitest directly), 3.4 is the `etcd` on PATH and the others come from that script, which fetches 3.5 and
// builds 3.6 and 3.7 (with the Go peer) into .cache/etcd once. Node-only, no vitest import: vitest's main
// process and plain Node use it too.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export type EtcdVersion = "3.4" | "3.5" | "3.6" | "3.7";

/** Every version the `etcd-<version>` projects cover, oldest first. */
export const ETCD_VERSIONS: readonly EtcdVersion[] = ["3.4", "3.5", "3.6", "3.7"];

export function isEtcdVersion(value: string): value is EtcdVersion {
  return (ETCD_VERSIONS as readonly string[]).includes(value);
}

export interface EtcdBinaries {
  version: EtcdVersion;
  /** What `etcd --version` reports, e.g. "3.5.16". */
  release: string;
  /** Directory holding etcd and etcdctl (and, for the versions built from Go, `peer`: Go's concurrency). */
  binDir: string;
}

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

const envName = (version: EtcdVersion) => `ETCD_${version.replace(".", "")}_BIN_DIR`;

/** The system's etcd: the directory of `etcd` on PATH. Tests never install packages (scripts/test.sh may). */
function etcdOnPath(): string {
  const found = spawnSync("bash", ["-c", "command -v etcd"], { encoding: "utf8" }).stdout?.trim() ?? "";
  if (found === "") {
    // Never skip: a suite that passes without the etcd it claims to test proves nothing.
    throw new Error(
      "etcd is not on PATH: install etcd-server and etcd-client (Debian/Ubuntu), or run `bash scripts/test.sh`",
    );
  }
  return dirname(found);
}

/** Asks scripts/lib/etcd-versions.sh for the version's directory (fetching it once); throws with its reasons. */
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

const found = new Map<EtcdVersion, EtcdBinaries>();

/**
 * The binaries of `version`: ETCD_<NN>_BIN_DIR when set, else found as above. Checked,
 * never guessed; once per process.
 */
export function etcdBinaries(version: EtcdVersion): EtcdBinaries {
  const known = found.get(version);
  if (known !== undefined) return known;
  const binDir = process.env[envName(version)] || (version === "3.4" ? etcdOnPath() : ensureWithScript(version));
  const release = reportedRelease(binDir);
  if (!release.startsWith(`${version}.`)) {
    throw new Error(`${join(binDir, "etcd")} is etcd ${release}, but the etcd-${version} tests need ${version}.x`);
  }
  if (!existsSync(join(binDir, "etcdctl"))) throw new Error(`no etcdctl in ${binDir}`);
  const binaries = { version, release, binDir };
  found.set(version, binaries);
  return binaries;
}
