// Ports for the servers tests start on 127.0.0.1 (etcd members, proxies, stores, runtimes). Not the ports the OS
// hands out for listen(0): those come from the kernel's ephemeral range, which every outgoing connection of every
// process on the machine draws its local port from too, so a member killed for an outage could find its port
// taken when it restarts on it (seen once in a fresh clone's CI: a 20 s outage's restart lost its peer port,
// "bind: address already in use"). These come from below that range, where only a bind asks for a port by
// number, and each is claimed by a file naming this process, so two test processes never pick one port while
// both live. Imports nothing but Node's modules and processes.ts (npm run chaos loads it in plain Node).
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isAlive } from "./processes.ts";

const HOST = "127.0.0.1";
const CLAIMS = join(tmpdir(), "etcd-edge-ports");
/** Below this, ports that system services are configured on by number. */
const LOWEST = 10_000;
/** A range this small would make draws collide: the OS's free ports instead (a machine we do not know). */
const FEWEST = 2_000;
const ATTEMPTS = 500;

/** This process's claims, removed at exit (a claim of a dead process is stale anyway: it is taken over). */
const ours = new Set<number>();
let range: [low: number, high: number] | null | undefined;

export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port!;
}

/** `count` distinct ports, each claimed for this process until `releasePorts` or its exit. */
export async function freePorts(count: number): Promise<number[]> {
  if (range === undefined) range = belowEphemeral();
  if (range === null) return osPorts(count);
  const ports: number[] = [];
  for (let attempt = 0; ports.length < count; attempt++) {
    if (attempt === ATTEMPTS) {
      releasePorts(ports);
      throw new Error(`no free port in ${range[0]}-${range[1]} after ${ATTEMPTS} draws (claims in ${CLAIMS})`);
    }
    const port = range[0] + Math.floor(Math.random() * (range[1] - range[0] + 1));
    if (ours.has(port) || !claim(port)) continue;
    if (await bindable(port)) ports.push(port);
    else release(port);
  }
  return ports;
}

/** Gives ports back once nothing will bind them again (a member stopped for good). */
export function releasePorts(ports: Iterable<number>): void {
  for (const port of ports) if (ours.has(port)) release(port);
}

/** The ports below the kernel's ephemeral range (Linux), or null where that range is unknown or leaves too few. */
function belowEphemeral(): [number, number] | null {
  try {
    const [low] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (low === undefined || !Number.isInteger(low) || low - 1 - LOWEST < FEWEST) return null;
    mkdirSync(CLAIMS, { recursive: true });
    process.once("exit", () => releasePorts([...ours]));
    return [LOWEST, low - 1];
  } catch {
    return null;
  }
}

/** Claims `port` for this process: false if a live process holds its claim. */
function claim(port: number, takeOver = true): boolean {
  const file = join(CLAIMS, String(port));
  try {
    const fd = openSync(file, "wx");
    writeSync(fd, String(process.pid));
    closeSync(fd);
    ours.add(port);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST" || !takeOver) return false;
  }
  // A claim of a process that died (or one half written a moment ago: read as no pid, and left alone; or one
  // released since: drawn again some other time).
  let owner: number;
  try {
    owner = Number(readFileSync(file, "utf8").trim() || Number.NaN);
  } catch {
    return false;
  }
  if (!Number.isInteger(owner) || isAlive(owner)) return false;
  rmSync(file, { force: true });
  return claim(port, false);
}

function release(port: number): void {
  ours.delete(port);
  rmSync(join(CLAIMS, String(port)), { force: true });
}

/** Nobody (of any process, claimed or not) listens on `port` now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/** The OS's free ports, held open together until all are known, so they are distinct. */
async function osPorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once("error", reject);
          server.listen(0, HOST, () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((s) => {
    const address = s.address();
    if (address === null || typeof address === "string") throw new Error("no TCP address");
    return address.port;
  });
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  return ports;
}
