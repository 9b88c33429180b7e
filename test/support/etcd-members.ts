// Starts real etcd members of a given version (the directory holding its etcd and etcdctl) on 127.0.0.1 for
// tests, and stops them by PID. Version-agnostic: test files start members of their project's version through
// test/etcd/harness.ts; global setups pass the directory themselves. Imports nothing but Node's modules, ports.ts,
// processes.ts and time.ts, so vitest's main process and plain Node (npm run chaos) load it as well as test files.
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statfsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePorts, releasePorts } from "./ports.ts";
import { isAlive, killedWithParent } from "./processes.ts";
import { sleep } from "./time.ts";

export interface EtcdMember {
  readonly name: string;
  readonly clientUrl: string;
  readonly peerUrl: string;
  readonly dataDir: string;
  /** etcd's combined stdout/stderr. */
  readonly logFile: string;
  /** Pid of the running process; changes on restart(). */
  readonly pid: number;
  /** SIGTERM, SIGKILL after 5 s, waits for exit, then removes the data dir unless keepDataDir. */
  stop(opts?: { keepDataDir?: boolean }): Promise<void>;
  /** SIGKILL and wait for exit; the data dir stays, so restart() works. */
  kill(): Promise<void>;
  /** Starts again with the same data dir and ports (kills the current process first if running). */
  restart(): Promise<void>;
  /** Directory of this member's etcd and etcdctl binaries. */
  readonly binDir: string;
  /**
   * `ETCDCTL_API=3 etcdctl --endpoints=<clientUrl> ...args` with this member's etcdctl;
   * resolves stdout, rejects with stderr.
   */
  etcdctl(...args: string[]): Promise<string>;
}

export interface EtcdOptions {
  /** Directory holding the etcd and etcdctl to run: it decides the version (see test/support/etcd-versions.ts). */
  binDir: string;
  /** Member name; for startCluster, the prefix of `<name>-m0`, `<name>-m1`, ... Default: unique. */
  name?: string;
  heartbeatMs?: number;
  electionMs?: number;
  extraArgs?: string[];
}

export interface EtcdCluster {
  members: EtcdMember[];
  endpoints: string[];
  stop(): Promise<void>;
}

const HEALTH_TIMEOUT_MS = 20_000;
const STOP_GRACE_MS = 5_000;
const HOST = "127.0.0.1";

// ---------------------------------------------------------------------------------------------
// Process registry: no member may outlive the test process, whatever way it ends.

const running = new Set<ChildProcess>();
const tempRoots = new Set<string>();
let exitHooksInstalled = false;

function killEverythingNow(): void {
  for (const child of running) {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
  }
  running.clear();
  for (const dir of tempRoots) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // A dying etcd may still be writing; a stray tmpfs dir is better than a crash on exit.
    }
  }
  tempRoots.clear();
}

function onFatalSignal(signal: NodeJS.Signals): void {
  killEverythingNow();
  process.off(signal, onFatalSignal);
  // Adding a listener cancelled the default "die on signal"; restore it unless someone else
  // (vitest itself) is listening and will decide how to exit.
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on("exit", killEverythingNow);
  process.on("SIGINT", onFatalSignal);
  process.on("SIGTERM", onFatalSignal);
  process.on("SIGHUP", onFatalSignal);
}

// ---------------------------------------------------------------------------------------------
// Directories

const TEMP_PREFIX = "etcd-edge-";
// Each member takes ~130 MB (etcd preallocates 64 MB WAL segments), which on tmpfs is RAM.
const MIN_SHM_FREE_BYTES = 1024 ** 3;
let tempBase: string | undefined;

function pickTempBase(): string {
  // tmpfs makes etcd's fsyncs nearly free, which keeps elections and writes fast.
  try {
    const shm = statfsSync("/dev/shm");
    if (shm.bavail * shm.bsize >= MIN_SHM_FREE_BYTES) return "/dev/shm";
  } catch {
    // No /dev/shm on this machine.
  }
  return tmpdir();
}

/** Removes dirs left by test processes that were SIGKILLed (their etcd died with them, by pdeathsig). */
function sweepOrphanedRoots(base: string): void {
  for (const entry of readdirSync(base)) {
    const owner = new RegExp(`^${TEMP_PREFIX}(\\d+)-`).exec(entry)?.[1];
    if (owner === undefined || isAlive(Number(owner))) continue;
    try {
      rmSync(join(base, entry), { recursive: true, force: true });
    } catch {
      // Not ours to remove (another user's); leave it.
    }
  }
}

function makeTempRoot(): string {
  if (tempBase === undefined) {
    tempBase = pickTempBase();
    sweepOrphanedRoots(tempBase);
  }
  const dir = mkdtempSync(join(tempBase, `${TEMP_PREFIX}${process.pid}-`));
  tempRoots.add(dir);
  return dir;
}

function removeTempRoot(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  tempRoots.delete(dir);
}

function logTail(logFile: string, lines = 30): string {
  try {
    return readFileSync(logFile, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

// ---------------------------------------------------------------------------------------------
// Members

interface MemberSpec {
  name: string;
  clientPort: number;
  peerPort: number;
  /** `name=peerUrl,...` for every member of the cluster, this one included. */
  initialCluster: string;
  clusterToken: string;
  inCluster: boolean;
  opts: EtcdOptions;
}

const url = (port: number) => `http://${HOST}:${port}`;

function etcdArgs(spec: MemberSpec, dataDir: string, state: "new" | "existing"): string[] {
  const clientUrl = url(spec.clientPort);
  const peerUrl = url(spec.peerPort);
  return [
    "--name",
    spec.name,
    "--data-dir",
    dataDir,
    "--listen-client-urls",
    clientUrl,
    "--advertise-client-urls",
    clientUrl,
    "--listen-peer-urls",
    peerUrl,
    "--initial-advertise-peer-urls",
    peerUrl,
    "--initial-cluster",
    spec.initialCluster,
    "--initial-cluster-token",
    spec.clusterToken,
    "--initial-cluster-state",
    state,
    "--heartbeat-interval",
    String(spec.opts.heartbeatMs ?? 100),
    "--election-timeout",
    String(spec.opts.electionMs ?? 1000),
    "--logger",
    "zap",
    "--log-outputs",
    "stderr",
    ...(spec.opts.extraArgs ?? []),
  ];
}

function spawnEtcd(binDir: string, args: string[], logFile: string): ChildProcess {
  installExitHooks();
  const log = openSync(logFile, "a");
  try {
    const etcd = join(binDir, "etcd");
    const [command, argv] = killedWithParent(etcd, args);
    // ETCD_* variables in the caller's environment would silently override our flags.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("ETCD_")));
    const child = spawn(command, argv, { stdio: ["ignore", log, log], env });
    running.add(child);
    child.once("exit", () => running.delete(child));
    child.once("error", () => running.delete(child));
    return child;
  } finally {
    closeSync(log);
  }
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.once("error", () => resolve());
  });
}

async function isHealthy(clientUrl: string): Promise<boolean> {
  try {
    const res = await fetch(`${clientUrl}/health`, { signal: AbortSignal.timeout(2_000) });
    const body = (await res.json()) as { health?: unknown };
    return body.health === "true";
  } catch {
    return false;
  }
}

async function waitHealthy(child: ChildProcess, clientUrl: string, logFile: string, name: string): Promise<void> {
  const deadline = Date.now() + HEALTH_TIMEOUT_MS;
  let spawnError: Error | undefined;
  child.once("error", (err) => (spawnError = err));
  while (Date.now() < deadline) {
    if (spawnError) throw new Error(`etcd ${name} could not start: ${spawnError.message}`);
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `etcd ${name} exited (${child.exitCode ?? child.signalCode}) before becoming healthy:\n${logTail(logFile)}`,
      );
    }
    if (await isHealthy(clientUrl)) return;
    await sleep(100);
  }
  child.kill("SIGKILL");
  throw new Error(`etcd ${name} not healthy at ${clientUrl} after ${HEALTH_TIMEOUT_MS} ms:\n${logTail(logFile)}`);
}

function runEtcdctl(binDir: string, endpoint: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      join(binDir, "etcdctl"),
      [`--endpoints=${endpoint}`, ...args],
      { env: { ...process.env, ETCDCTL_API: "3" }, timeout: 30_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`etcdctl ${args.join(" ")} failed: ${stderr.trim() || err.message}`));
        else resolve(stdout);
      },
    );
  });
}

class Member implements EtcdMember {
  readonly clientUrl: string;
  readonly peerUrl: string;
  readonly dataDir: string;
  readonly logFile: string;
  private readonly spec: MemberSpec;
  private readonly root: string;
  private child: ChildProcess | undefined;
  private removed = false;

  constructor(spec: MemberSpec, root: string) {
    this.spec = spec;
    this.root = root;
    this.clientUrl = url(spec.clientPort);
    this.peerUrl = url(spec.peerPort);
    this.dataDir = join(root, "data");
    this.logFile = join(root, "etcd.log");
  }

  get name(): string {
    return this.spec.name;
  }

  get binDir(): string {
    return this.spec.opts.binDir;
  }

  get pid(): number {
    return this.child?.pid ?? -1;
  }

  /** Spawns without waiting for health: cluster members must all be up before any is healthy. */
  launch(state: "new" | "existing"): ChildProcess {
    this.child = spawnEtcd(this.binDir, etcdArgs(this.spec, this.dataDir, state), this.logFile);
    return this.child;
  }

  waitHealthy(): Promise<void> {
    if (!this.child) throw new Error(`etcd ${this.name} is not running`);
    return waitHealthy(this.child, this.clientUrl, this.logFile, this.name);
  }

  async stop(opts: { keepDataDir?: boolean } = {}): Promise<void> {
    const child = this.child;
    if (child) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
      await exited(child);
      clearTimeout(timer);
    }
    if (!opts.keepDataDir) {
      removeTempRoot(this.root);
      this.removed = true;
      // Never restarted now: its ports may serve another server.
      releasePorts([this.spec.clientPort, this.spec.peerPort]);
    }
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    child.kill("SIGKILL");
    await exited(child);
  }

  async restart(): Promise<void> {
    if (this.removed) {
      throw new Error(
        `etcd ${this.name} was stopped and its data dir removed; ` +
          `use kill() or stop({ keepDataDir: true }) before restart()`,
      );
    }
    await this.kill();
    // With a data dir, etcd ignores the initial-cluster flags; "existing" keeps a wiped member from re-bootstrapping.
    this.launch(this.spec.inCluster ? "existing" : "new");
    await this.waitHealthy();
  }

  etcdctl(...args: string[]): Promise<string> {
    return runEtcdctl(this.binDir, this.clientUrl, args);
  }
}

function isPortClash(err: unknown): boolean {
  return err instanceof Error && /address already in use/i.test(err.message);
}

// Ports come from freePorts() and are unbound until etcd binds them, so a process that asks for a port by number
// can take one in between: rare, and fixed by trying again with new ports.
async function withPortRetry<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (attempt >= 3 || !isPortClash(err)) throw err;
    }
  }
}

let memberCounter = 0;
const uniqueName = (prefix: string) => `${prefix}-${process.pid}-${++memberCounter}`;

export function startEtcd(opts: EtcdOptions): Promise<EtcdMember> {
  return withPortRetry(async () => {
    const name = opts.name ?? uniqueName("etcd");
    const [clientPort, peerPort] = (await freePorts(2)) as [number, number];
    const member = new Member(
      {
        name,
        clientPort,
        peerPort,
        initialCluster: `${name}=${url(peerPort)}`,
        clusterToken: uniqueName("token"),
        inCluster: false,
        opts,
      },
      makeTempRoot(),
    );
    member.launch("new");
    try {
      await member.waitHealthy();
    } catch (err) {
      await member.stop();
      throw err;
    }
    return member;
  });
}

export function startCluster(size: number, opts: EtcdOptions): Promise<EtcdCluster> {
  return withPortRetry(async () => {
    const prefix = opts.name ?? uniqueName("cluster");
    const ports = await freePorts(size * 2);
    const names = Array.from({ length: size }, (_, i) => `${prefix}-m${i}`);
    const initialCluster = names.map((n, i) => `${n}=${url(ports[2 * i + 1]!)}`).join(",");
    const clusterToken = uniqueName("token");
    const members = names.map(
      (name, i) =>
        new Member(
          {
            name,
            clientPort: ports[2 * i]!,
            peerPort: ports[2 * i + 1]!,
            initialCluster,
            clusterToken,
            inCluster: true,
            opts,
          },
          makeTempRoot(),
        ),
    );
    const stop = async () => {
      await Promise.all(members.map((m) => m.stop()));
    };
    for (const m of members) m.launch("new");
    try {
      await Promise.all(members.map((m) => m.waitHealthy()));
    } catch (err) {
      await stop();
      throw err;
    }
    return { members, endpoints: members.map((m) => m.clientUrl), stop };
  });
}

// ---------------------------------------------------------------------------------------------
// Leadership

/** The member's ID and the leader's ID as the member knows it (uint64 decimal strings, as on the wire). */
export async function memberStatus(endpoint: string): Promise<{ id: string; leader: string }> {
  const res = await fetch(`${endpoint}/v3/maintenance/status`, {
    method: "POST",
    body: "{}",
    signal: AbortSignal.timeout(5_000),
  });
  const body = (await res.json()) as { header: { member_id: string }; leader: string };
  return { id: body.header.member_id, leader: body.leader };
}

/** Makes `cluster.members[index]` the raft leader, with the current leader's `etcdctl move-leader` (hex IDs). */
export async function makeLeader(cluster: EtcdCluster, index: number): Promise<void> {
  const target = await memberStatus(cluster.endpoints[index]!);
  if (target.leader === target.id) return;
  const statuses = await Promise.all(cluster.endpoints.map(memberStatus));
  const leader = cluster.members[statuses.findIndex((s) => s.id === s.leader)]!;
  await leader.etcdctl("move-leader", BigInt(target.id).toString(16));
  const now = await memberStatus(cluster.endpoints[index]!);
  if (now.leader !== target.id)
    throw new Error(`member ${index} is not the leader after move-leader (leader ${now.leader})`);
}

// ---------------------------------------------------------------------------------------------
// Auth

export async function enableAuth(member: EtcdMember, { rootPassword }: { rootPassword: string }): Promise<void> {
  await member.etcdctl("user", "add", "root", `--new-user-password=${rootPassword}`, "--interactive=false");
  await member.etcdctl("role", "add", "root");
  await member.etcdctl("user", "grant-role", "root", "root");
  await member.etcdctl("auth", "enable");
}

export interface AddUserOptions {
  rootPassword: string;
  user: string;
  password: string;
  /** Key prefix the user may touch; default: the whole keyspace. */
  prefix?: string;
  readOnly?: boolean;
}

/** Creates `user` with a role `<user>-role` granting readwrite (or read) on `prefix`. */
export async function addUser(member: EtcdMember, opts: AddUserOptions): Promise<void> {
  const asRoot = `--user=root:${opts.rootPassword}`;
  const role = `${opts.user}-role`;
  const permission = opts.readOnly ? "read" : "readwrite";
  // An empty key with --from-key is etcd's spelling of "every key".
  const range = opts.prefix === undefined ? ["", "--from-key"] : [opts.prefix, "--prefix"];
  await member.etcdctl(asRoot, "user", "add", opts.user, `--new-user-password=${opts.password}`, "--interactive=false");
  await member.etcdctl(asRoot, "role", "add", role);
  await member.etcdctl(asRoot, "role", "grant-permission", role, permission, ...range);
  await member.etcdctl(asRoot, "user", "grant-role", opts.user, role);
}
