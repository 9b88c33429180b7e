// The stores the fence tests write to, each started by the test on 127.0.0.1 with a free port and a temp dir and
// stopped by PID, as etcd is: Postgres (Debian's packages: initdb, then postgres in the foreground), moto (an S3
// and DynamoDB emulator from PyPI, installed by scripts/lib/env.sh's ensure_stores) and Miniflare (workerd with
// D1 and R2 bindings, from npm). SQLite needs no server: node:sqlite opens a file.
import type { ChildProcess } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { freePort } from "./ports.ts";
import { runProcess, spawnChild, tail } from "./processes.ts";

/** A started store: where it listens, and how to stop it. */
export interface Store {
  url: string;
  stop(): Promise<void>;
}

const ROOT = new URL("../../", import.meta.url).pathname;

/** Debian's newest Postgres: /usr/lib/postgresql/<major>/bin. */
function postgresBin(): string {
  const base = "/usr/lib/postgresql";
  const majors = existsSync(base) ? readdirSync(base).sort((a, b) => Number(b) - Number(a)) : [];
  const bin = majors.map((major) => join(base, major, "bin")).find((dir) => existsSync(join(dir, "initdb")));
  if (bin === undefined) {
    throw new Error("Postgres is not installed (apt-get install postgresql; scripts/lib/env.sh ensure_stores)");
  }
  return bin;
}

/**
 * Postgres refuses to run as root: as root, its data dir belongs to the `postgres` user the package made, and
 * initdb and postgres run as that user (setpriv).
 */
function asPostgresUser(command: string, args: string[]): [string, string[]] {
  if (process.getuid?.() !== 0) return [command, args];
  return ["/usr/bin/setpriv", ["--reuid=postgres", "--regid=postgres", "--clear-groups", "--", command, ...args]];
}

function postgresIds(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const passwd = readFileSync("/etc/passwd", "utf8");
  const line = passwd.split("\n").find((l) => l.startsWith("postgres:"));
  if (line === undefined) throw new Error("running as root, and the postgres user does not exist");
  const [, , uid, gid] = line.split(":");
  return { uid: Number(uid), gid: Number(gid) };
}

/** A fresh Postgres cluster (trust auth on 127.0.0.1) with its `postgres` database: `postgres://postgres@…`. */
export async function startPostgres(): Promise<Store> {
  const bin = postgresBin();
  const dir = mkdtempSync(join(tmpdir(), "etcd-edge-pg-"));
  const ids = postgresIds();
  if (ids !== undefined) {
    chmodSync(dir, 0o700);
    chownSync(dir, ids.uid, ids.gid);
  }
  const data = join(dir, "data");
  const [initdb, initArgs] = asPostgresUser(join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", "postgres"]);
  const init = await runProcess(initdb, initArgs, { timeoutMs: 60_000, env: { ...process.env, LC_ALL: "C" } });
  if (init.code !== 0) throw new Error(`initdb failed:\n${tail(init.stdout + init.stderr)}`);
  const port = await freePort();
  const [postgres, args] = asPostgresUser(join(bin, "postgres"), [
    "-D",
    data,
    "-p",
    String(port),
    "-h",
    "127.0.0.1",
    "-k",
    dir,
    "-c",
    "fsync=off",
  ]);
  const child = spawnChild(postgres, args, { env: { ...process.env, LC_ALL: "C" } });
  let log = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (log += chunk));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  await waitFor(
    "Postgres",
    child,
    () => log,
    async () => {
      const ready = await runProcess(join(bin, "pg_isready"), ["-h", "127.0.0.1", "-p", String(port)], {
        timeoutMs: 5_000,
      });
      return ready.code === 0;
    },
  );
  return { url, stop: () => stopChild(child, () => rmSync(dir, { recursive: true, force: true })) };
}

/** moto's server (S3 and DynamoDB on one port), from the venv ensure_stores made. */
export async function startMoto(): Promise<Store> {
  const server = join(ROOT, ".cache/stores/moto/bin/moto_server");
  if (!existsSync(server)) throw new Error(`moto is not installed at ${server} (scripts/lib/env.sh ensure_stores)`);
  const port = await freePort();
  const child = spawnChild(server, ["-H", "127.0.0.1", "-p", String(port)], {
    env: { ...process.env, MOTO_ALLOW_NONEXISTENT_REGION: "true" },
  });
  let log = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (log += chunk));
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (log += chunk));
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    "moto",
    child,
    () => log,
    async () => {
      const answer = await fetch(`${url}/moto-api/`).catch(() => undefined);
      return answer !== undefined && answer.status < 500;
    },
  );
  return { url, stop: () => stopChild(child) };
}

/**
 * Miniflare running `entry` (bundled with esbuild, so it can import the built package's fence entry) with a D1
 * database `DB` and an R2 bucket `BUCKET`, in memory, on a free port.
 */
export async function startMiniflare(entry: string): Promise<Store> {
  const bundled = await build({ entryPoints: [entry], bundle: true, format: "esm", write: false, platform: "neutral" });
  const port = await freePort();
  const mf = new Miniflare({
    modules: true,
    script: bundled.outputFiles[0]!.text,
    compatibilityDate: "2025-01-01",
    d1Databases: ["DB"],
    r2Buckets: ["BUCKET"],
    host: "127.0.0.1",
    port,
  });
  const url = (await mf.ready).toString().replace(/\/$/, "");
  return { url, stop: () => mf.dispose() };
}

async function waitFor(
  what: string,
  child: ChildProcess,
  log: () => string,
  ready: () => Promise<boolean>,
): Promise<void> {
  const deadline = performance.now() + 30_000;
  while (performance.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} exited:\n${tail(log())}`);
    if (await ready()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill("SIGKILL");
  throw new Error(`${what} did not start within 30 s:\n${tail(log())}`);
}

async function stopChild(child: ChildProcess, then?: () => void): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const gone = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    await Promise.race([gone, new Promise((resolve) => setTimeout(resolve, 5_000))]);
    child.kill("SIGKILL");
  }
  then?.();
}
