// The chaos worker processes: spawn, freeze, kill, respawn, drain, and collect what each reports.
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { WORKER_KINDS, type WorkerConfig, type WorkerEvent, type WorkerKind } from "./events.ts";
import { killedWithParent } from "../support/processes.ts";
import { sleep, wallNow } from "../support/time.ts";

const WORKER_SCRIPT = fileURLToPath(new URL("./worker.ts", import.meta.url));

export interface Interval {
  from: number;
  /** Undefined while still going. */
  to?: number | undefined;
}

export interface WorkerHandle {
  /** `w<slot>` for the first incarnation, `w<slot>#<n>` for respawns. */
  readonly id: string;
  readonly slot: number;
  readonly kind: WorkerKind;
  readonly pid: number;
  readonly events: WorkerEvent[];
  /** Decimal lease IDs this worker was granted. */
  readonly leases: Set<string>;
  /** SIGSTOP..SIGCONT intervals. */
  readonly stops: Interval[];
  killedAt: number | undefined;
  exitedAt: number | undefined;
  /** Killed at the end because it did not finish its round in time. */
  hungAtEnd: boolean;
  /** The last lines of its stderr, for the report. */
  readonly stderr: string[];
}

export type BaseConfig = Omit<WorkerConfig, "kind" | "seed" | "endpoints"> & { endpoints: readonly string[] };

export class WorkerPool {
  readonly #base: BaseConfig;
  readonly #seed: number;
  readonly #all: WorkerHandle[] = [];
  readonly #children = new Map<WorkerHandle, ChildProcess>();
  readonly #byLease = new Map<string, WorkerHandle>();
  readonly #onEvent: (worker: WorkerHandle, event: WorkerEvent) => void;
  readonly #kindOf: (slot: number) => WorkerKind;
  #spawned = 0;

  /** `kindOf(slot)`: what the worker of a slot does, the same for its respawns (default: the mutex mix). */
  constructor(
    base: BaseConfig,
    seed: number,
    onEvent: (worker: WorkerHandle, event: WorkerEvent) => void = () => {},
    kindOf: (slot: number) => WorkerKind = (slot) => WORKER_KINDS[slot % WORKER_KINDS.length]!,
  ) {
    this.#base = base;
    this.#seed = seed;
    this.#onEvent = onEvent;
    this.#kindOf = kindOf;
  }

  all(): readonly WorkerHandle[] {
    return this.#all;
  }

  live(): WorkerHandle[] {
    return this.#all.filter((w) => w.exitedAt === undefined && w.killedAt === undefined);
  }

  /** The worker whose lease, in the lowercase hex of lock keys, is `hex`. */
  byLeaseHex(hex: string): WorkerHandle | undefined {
    return this.#byLease.get(hex);
  }

  spawn(slot: number): WorkerHandle {
    const incarnation = this.#all.filter((w) => w.slot === slot).length;
    const kind = this.#kindOf(slot);
    // Each worker starts on a different member, as clients of a real service would.
    const rotated = [...this.#base.endpoints.slice(slot % 3), ...this.#base.endpoints.slice(0, slot % 3)];
    const id = incarnation === 0 ? `w${slot}` : `w${slot}#${incarnation}`;
    const config: WorkerConfig & { id: string } = {
      ...this.#base,
      endpoints: rotated,
      kind,
      seed: (this.#seed * 31 + ++this.#spawned) >>> 0,
      id,
    };
    const args = ["--disable-warning=ExperimentalWarning", WORKER_SCRIPT, JSON.stringify(config)];
    const child = spawn(...killedWithParent(process.execPath, args), { stdio: ["ignore", "pipe", "pipe"] });
    const handle: WorkerHandle = {
      id,
      slot,
      kind,
      pid: child.pid ?? -1,
      events: [],
      leases: new Set(),
      stops: [],
      killedAt: undefined,
      exitedAt: undefined,
      hungAtEnd: false,
      stderr: [],
    };
    this.#all.push(handle);
    this.#children.set(handle, child);
    createInterface({ input: child.stdout! }).on("line", (line) => this.#line(handle, line));
    createInterface({ input: child.stderr! }).on("line", (line) => {
      handle.stderr.push(line);
      if (handle.stderr.length > 20) handle.stderr.shift();
    });
    child.once("exit", () => {
      handle.exitedAt ??= wallNow();
      this.#children.delete(handle);
    });
    return handle;
  }

  /** Resolves once every worker spawned so far has said it is ready (or `timeoutMs` passes). */
  async ready(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (!this.#all.every((w) => w.events.some((e) => e.ev === "ready") || w.exitedAt !== undefined)) {
      if (performance.now() > deadline) return false;
      await sleep(50);
    }
    return true;
  }

  freeze(worker: WorkerHandle): void {
    this.#signal(worker, "SIGSTOP");
    worker.stops.push({ from: wallNow() });
  }

  thaw(worker: WorkerHandle): void {
    const open = worker.stops.at(-1);
    if (open !== undefined && open.to === undefined) open.to = wallNow();
    this.#signal(worker, "SIGCONT");
  }

  /** SIGKILL, as a crash: the worker's leases are left to expire. */
  crash(worker: WorkerHandle): void {
    worker.killedAt = wallNow();
    this.#signal(worker, "SIGKILL");
  }

  /**
   * Asks every live worker to finish its round and exit (SIGTERM); kills those still running after
   * `timeoutMs` and marks them hung. Resolves when all have exited.
   */
  async drain(timeoutMs: number): Promise<void> {
    for (const worker of this.#all)
      if (worker.stops.at(-1)?.to === undefined && worker.stops.length > 0) this.thaw(worker);
    const running = [...this.#children.keys()];
    for (const worker of running) this.#signal(worker, "SIGTERM");
    const deadline = performance.now() + timeoutMs;
    while (this.#children.size > 0 && performance.now() < deadline) await sleep(50);
    for (const worker of this.#children.keys()) {
      worker.hungAtEnd = true;
      this.#signal(worker, "SIGKILL");
    }
    while (this.#children.size > 0) await sleep(20);
  }

  /** Kills every child now (the runner is failing). */
  killAll(): void {
    for (const worker of this.#children.keys()) this.#signal(worker, "SIGKILL");
  }

  #signal(worker: WorkerHandle, signal: NodeJS.Signals): void {
    const child = this.#children.get(worker);
    if (child === undefined) return;
    try {
      child.kill(signal);
    } catch {
      // Already gone.
    }
  }

  #line(worker: WorkerHandle, line: string): void {
    let event: WorkerEvent;
    try {
      event = JSON.parse(line) as WorkerEvent;
    } catch {
      worker.stderr.push(`stdout: ${line.slice(0, 200)}`);
      return;
    }
    worker.events.push(event);
    if (event.ev === "lease") {
      worker.leases.add(event.leaseId);
      this.#byLease.set(BigInt(event.leaseId).toString(16), worker);
    }
    this.#onEvent(worker, event);
  }
}
