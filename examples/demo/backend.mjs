// Where the demo's etcd comes from: ETCD_ENDPOINTS, else a local `etcd` started for the run, else the
// in-memory gateway from etcd-edge/testing.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export async function openBackend() {
  if (process.env.ETCD_ENDPOINTS) {
    const endpoints = process.env.ETCD_ENDPOINTS.split(",");
    return { endpoints, description: `etcd at ${endpoints.join(", ")} (from ETCD_ENDPOINTS)`, close: async () => {} };
  }
  if (spawnSync("etcd", ["--version"]).status === 0) return startLocalEtcd();
  const { createMockEtcd } = await import("etcd-edge/testing");
  const mock = createMockEtcd();
  return {
    endpoints: ["http://etcd.mock:2379"],
    fetch: mock.fetch,
    description: "the embedded in-memory gateway (no etcd on PATH; install etcd-server to use a real one)",
    close: async () => {},
  };
}

async function startLocalEtcd() {
  const [client, peer] = [await freePort(), await freePort()];
  // In memory where the machine has it: the demo and the bench measure clients, not the disk's fsync, which
  // every contender would pay alike but which would hide the differences between them.
  const dir = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "etcd-edge-demo-"));
  const url = `http://127.0.0.1:${client}`;
  const child = spawn(
    "etcd",
    [
      "--name=demo",
      `--data-dir=${join(dir, "data")}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-cluster=demo=http://127.0.0.1:${peer}`,
    ],
    { stdio: "ignore" },
  );
  const close = async () => {
    child.kill("SIGTERM");
    await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", resolve)));
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", () => child.kill("SIGKILL"));
  for (let i = 0; i < 100; i++) {
    const healthy = await fetch(`${url}/health`)
      .then((r) => r.json())
      .then(
        (b) => b.health === "true",
        () => false,
      );
    if (healthy) {
      const version =
        spawnSync("etcd", ["--version"])
          .stdout.toString()
          .match(/Version: (\S+)/)?.[1] ?? "";
      return {
        endpoints: [url],
        description: `a local etcd ${version} started on ${url} for this run`,
        close,
        pid: child.pid,
      };
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await close();
  throw new Error("the local etcd did not become healthy within 10 s");
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}
