// The faults a chaos run injects, one at a time on a seeded schedule, each bounded in time. At most one
// member is down, paused or restarting at any moment, so the cluster keeps its quorum: every stall a worker
// sees is the client's to avoid.
import type { EtcdCluster } from "../etcd/harness.ts";
import type { FaultProxy } from "../support/fault-proxy.ts";
import { compact, memberStatus, rangePrefix } from "../support/raw-gateway.ts";
import { sleep, wallNow } from "../support/time.ts";
import type { Monitor } from "./monitor.ts";
import type { Random } from "./random.ts";
import type { WorkerHandle, WorkerPool } from "./workers.ts";

export const FAULT_KINDS = [
  "kill-leader",
  "stop-holder",
  "kill-holder",
  "reset",
  "silence",
  "pause-member",
  "lose-answer",
  "swallow-request",
  "restart-follower",
  "compact",
  "latency",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultRecord {
  kind: FaultKind;
  t0: number;
  t1: number;
  /** What was hit: a member, a proxy, a worker, a path. */
  detail: string;
  /** Set when the fault could not be applied (no holder to kill, no request matched). */
  missed?: string | undefined;
}

/** A holder frozen or killed on purpose: the judge checks how soon its lock became free. */
export interface HolderFault {
  kind: "kill-holder" | "stop-holder";
  at: number;
  /** When a frozen holder was resumed. */
  resumedAt?: number | undefined;
  key: string;
  createRevision: number;
  lease: string;
  worker: string;
}

export interface FaultContext {
  cluster: EtcdCluster;
  proxies: FaultProxy[];
  monitor: Monitor;
  pool: WorkerPool;
  rng: Random;
  /** Session TTL of the workers, in seconds. */
  ttl: number;
  lockPrefix: string;
  log: (line: string) => void;
  /**
   * Set when recipe workers run: each holder fault also hits a recipe holder, picked with this generator (its
   * own, so the mutex's schedule for a seed is the same with or without recipes).
   */
  recipeRng?: Random | undefined;
}

const LOST_PATHS = [
  "/v3/kv/txn",
  "/v3/kv/txn",
  "/v3/lease/revoke",
  "/v3/lease/keepalive",
  "/v3/lease/grant",
  "/v3/kv/range",
];

export class FaultSchedule {
  readonly records: FaultRecord[] = [];
  readonly holderFaults: HolderFault[] = [];
  /** Recipe holders frozen or killed beside the mutex's holder (a lockAll's: one per key). */
  readonly recipeHolderFaults: HolderFault[] = [];
  readonly #ctx: FaultContext;
  readonly #pausedMembers = new Set<number>();
  readonly #frozenWorkers = new Set<WorkerHandle>();
  #compacted = 0;

  readonly #kinds: readonly FaultKind[];

  /** `kinds`: the faults to inject (default: all). */
  constructor(ctx: FaultContext, kinds: readonly FaultKind[] = FAULT_KINDS) {
    this.#ctx = ctx;
    this.#kinds = kinds;
  }

  /**
   * Injects faults until `until` (epoch ms): rounds of every kind in a seeded order, short gaps between.
   * The first round has both holder faults, so even a short run kills and freezes a holder; later rounds have
   * one, a kill or a freeze in turn: each blocks the lock for a whole TTL by design.
   */
  async run(until: number): Promise<void> {
    const { rng } = this.#ctx;
    const holderFaults = this.#kinds.filter((k) => k === "kill-holder" || k === "stop-holder");
    const others = this.#kinds.filter((k) => k !== "kill-holder" && k !== "stop-holder");
    if (this.#kinds.length === 0) return sleep(Math.max(0, until - wallNow()));
    for (let round = 0; wallNow() < until; round++) {
      const kinds =
        round === 0 || holderFaults.length === 0
          ? [...others, ...holderFaults]
          : [...others, holderFaults[round % holderFaults.length]!];
      for (const kind of rng.shuffle(kinds)) {
        if (wallNow() >= until) return;
        await this.inject(kind);
        await sleep(rng.int(500, 2_000));
      }
    }
  }

  async inject(kind: FaultKind): Promise<FaultRecord> {
    const t0 = wallNow();
    const record: FaultRecord = { kind, t0, t1: t0, detail: "" };
    try {
      await this.#apply(kind, record);
    } finally {
      record.t1 = wallNow();
      this.records.push(record);
      this.#ctx.log(`fault ${kind} ${record.detail}${record.missed ? ` (missed: ${record.missed})` : ""}`);
    }
    return record;
  }

  /** Undoes whatever a fault interrupted by an error left behind: paused members, frozen workers, silences. */
  restore(): void {
    for (const index of this.#pausedMembers) this.#signalMember(index, "SIGCONT");
    this.#pausedMembers.clear();
    for (const worker of this.#frozenWorkers) this.#ctx.pool.thaw(worker);
    this.#frozenWorkers.clear();
    for (const proxy of this.#ctx.proxies) {
      proxy.resume();
      proxy.disarm();
      proxy.setLatency(0);
    }
  }

  async #apply(kind: FaultKind, record: FaultRecord): Promise<void> {
    const { rng, proxies, cluster } = this.#ctx;
    switch (kind) {
      case "kill-leader": {
        const leader = await this.#leaderIndex();
        if (leader === undefined) return void (record.missed = "no leader known");
        record.detail = `m${leader}`;
        await this.#downAndUp(leader, rng.int(1_000, 2_500));
        return;
      }
      case "restart-follower": {
        const leader = await this.#leaderIndex();
        const followers = cluster.members.map((_, i) => i).filter((i) => i !== leader);
        const index = rng.pick(followers);
        record.detail = `m${index}`;
        await this.#downAndUp(index, rng.int(500, 1_500));
        return;
      }
      case "pause-member": {
        const index = rng.int(0, cluster.members.length - 1);
        const ms = rng.int(2_000, 6_000);
        const leader = await this.#leaderIndex();
        record.detail = `m${index}${index === leader ? " (leader)" : ""} for ${ms} ms`;
        this.#pausedMembers.add(index);
        this.#signalMember(index, "SIGSTOP");
        await sleep(ms);
        this.#signalMember(index, "SIGCONT");
        this.#pausedMembers.delete(index);
        return;
      }
      case "stop-holder":
      case "kill-holder":
        return this.#holderFault(kind, record);
      case "reset": {
        const all = rng.next() < 0.3;
        const targets = all ? proxies : [rng.pick(proxies)];
        const n = targets.reduce((sum, p) => sum + p.reset(), 0);
        record.detail = `${all ? "every proxy" : `proxy of m${proxies.indexOf(targets[0]!)}`}: ${n} connections`;
        return;
      }
      case "silence": {
        const index = rng.int(0, proxies.length - 1);
        const drop = rng.next() < 0.5;
        const ms = rng.int(2_000, 6_000);
        record.detail = `proxy of m${index}, ${drop ? "dropping (NAT)" : "holding (paused)"}, ${ms} ms`;
        proxies[index]!.silence({ drop });
        await sleep(ms);
        proxies[index]!.resume();
        return;
      }
      case "lose-answer":
      case "swallow-request": {
        const path = rng.pick(LOST_PATHS);
        const then = rng.next() < 0.5 ? "close" : "silence";
        // Armed on every proxy, so the next matching request hits it wherever it goes; the others disarm.
        const armed = proxies.map((proxy) =>
          kind === "lose-answer"
            ? proxy.dropNextAnswer({ path, then, within: 4_000 })
            : proxy.swallowNext({ path, within: 4_000 }),
        );
        const first = await new Promise<number | undefined>((resolve) => {
          let open = armed.length;
          armed.forEach(
            (hit, index) =>
              void hit.then((h) => (h !== undefined ? resolve(index) : --open === 0 && resolve(undefined))),
          );
        });
        for (const proxy of proxies) proxy.disarm();
        record.detail =
          `${path}${kind === "lose-answer" ? `, then ${then}` : ""}` +
          `${first === undefined ? "" : ` on the proxy of m${first}`}`;
        if (first === undefined) record.missed = "no matching request within 4 s";
        return;
      }
      case "compact": {
        const revision = this.#ctx.monitor.safeCompactRevision();
        if (revision <= this.#compacted) return void (record.missed = "nothing new to compact");
        await compact(cluster.endpoints, revision);
        this.#compacted = revision;
        record.detail = `at revision ${revision}`;
        return;
      }
      case "latency": {
        const index = rng.int(0, proxies.length - 1);
        const ms = rng.int(20, 150);
        record.detail = `proxy of m${index}, ${ms} ms each way for 3 s`;
        proxies[index]!.setLatency(ms);
        await sleep(3_000);
        proxies[index]!.setLatency(0);
        return;
      }
    }
  }

  /** Kills a member with SIGKILL (its proxy refusing connections meanwhile, like its port), then restarts it. */
  async #downAndUp(index: number, downMs: number): Promise<void> {
    const member = this.#ctx.cluster.members[index]!;
    const proxy = this.#ctx.proxies[index]!;
    await proxy.refuse();
    await member.kill();
    await sleep(downMs);
    await member.restart();
    await proxy.accept();
  }

  async #holderFault(kind: "stop-holder" | "kill-holder", record: FaultRecord): Promise<void> {
    const { pool, ttl, rng } = this.#ctx;
    const holder = await this.#findHolder();
    if (holder === undefined) return void (record.missed = "no live holder found within 3 s");
    const { kv, worker } = holder;
    const fault: HolderFault = {
      kind,
      at: 0,
      key: kv.key,
      createRevision: kv.createRevision,
      lease: kv.lease,
      worker: worker.id,
    };
    record.detail = `${worker.id} (${worker.kind.mode}/${worker.kind.wait}) holding ${kv.key}@${kv.createRevision}`;
    const beside = this.#recipeHolder(kind);
    if (beside !== undefined) {
      record.detail +=
        `, and ${beside.worker.id} (${beside.worker.kind.recipe}) ` +
        `holding ${beside.faults.map((f) => f.key).join(",")}@${beside.faults[0]!.createRevision}`;
    }
    const hit = (what: (w: WorkerHandle) => void): void => {
      if (beside === undefined) return;
      const at = wallNow();
      what(beside.worker);
      for (const f of beside.faults) this.recipeHolderFaults.push({ ...f, at });
    };
    if (kind === "kill-holder") {
      fault.at = wallNow();
      pool.crash(worker);
      this.holderFaults.push(fault);
      hit((w) => pool.crash(w));
      await sleep(300);
      pool.spawn(worker.slot);
      if (beside !== undefined) pool.spawn(beside.worker.slot);
      return;
    }
    const ms = ttl * 1_000 + rng.int(1_000, 2_000);
    fault.at = wallNow();
    this.#frozenWorkers.add(worker);
    pool.freeze(worker);
    this.holderFaults.push(fault);
    hit((w) => {
      this.#frozenWorkers.add(w);
      pool.freeze(w);
    });
    await sleep(ms);
    pool.thaw(worker);
    this.#frozenWorkers.delete(worker);
    fault.resumedAt = wallNow();
    if (beside !== undefined) {
      pool.thaw(beside.worker);
      this.#frozenWorkers.delete(beside.worker);
      const resumedAt = wallNow();
      for (const f of this.recipeHolderFaults)
        if (f.worker === beside.worker.id && f.resumedAt === undefined) f.resumedAt = resumedAt;
    }
    record.detail += ` for ${ms} ms`;
  }

  /**
   * A live, running recipe worker holding something now, by its own reports (its last acquisition not yet
   * followed by its release), with what it holds; undefined when there is none or recipes are off.
   */
  #recipeHolder(kind: HolderFault["kind"]): { worker: WorkerHandle; faults: HolderFault[] } | undefined {
    const rng = this.#ctx.recipeRng;
    if (rng === undefined) return undefined;
    const holding = this.#ctx.pool.live().flatMap((worker) => {
      if (worker.kind.recipe === undefined || this.#frozenWorkers.has(worker)) return [];
      for (let i = worker.events.length - 1; i >= 0; i--) {
        const last = worker.events[i]!;
        if (last.ev === "acquired") return [{ worker, last }];
        if (last.ev === "released") return [];
      }
      return [];
    });
    if (holding.length === 0) return undefined;
    const { worker, last } = rng.pick(holding);
    const faults = (last.keys ?? [last.key]).map((key) => ({
      kind,
      at: 0,
      key,
      createRevision: last.token,
      lease: last.leaseId,
      worker: worker.id,
    }));
    return { worker, faults };
  }

  /** The oldest key under the lock prefix (etcd's holder) and its live, running worker. */
  async #findHolder(): Promise<
    { kv: { key: string; createRevision: number; lease: string }; worker: WorkerHandle } | undefined
  > {
    const { cluster, pool, lockPrefix } = this.#ctx;
    const deadline = performance.now() + 3_000;
    while (performance.now() < deadline) {
      try {
        const { kvs } = await rangePrefix(cluster.endpoints, lockPrefix, { limit: 1, timeoutMs: 1_000 });
        const kv = kvs[0];
        // A contender's key is `<name>/<lease hex>_<16 hex>`: one key per acquisition, named for its lease.
        const leaseHex = kv?.key.slice(lockPrefix.length).split("_")[0];
        const worker = leaseHex === undefined ? undefined : pool.byLeaseHex(leaseHex);
        if (
          kv !== undefined &&
          worker !== undefined &&
          worker.killedAt === undefined &&
          worker.exitedAt === undefined &&
          !this.#frozenWorkers.has(worker)
        ) {
          return { kv, worker };
        }
      } catch {
        // A member is down: try again.
      }
      await sleep(100);
    }
    return undefined;
  }

  async #leaderIndex(): Promise<number | undefined> {
    const { cluster } = this.#ctx;
    for (const [index, member] of cluster.members.entries()) {
      if (this.#pausedMembers.has(index)) continue;
      try {
        const status = await memberStatus(member.clientUrl, 1_000);
        if (status.leader === "0") continue;
        for (const [other, candidate] of cluster.members.entries()) {
          if (this.#pausedMembers.has(other)) continue;
          const s = await memberStatus(candidate.clientUrl, 1_000).catch(() => undefined);
          if (s?.memberId === status.leader) return other;
        }
      } catch {
        // Down: ask another.
      }
    }
    return this.#ctx.monitor.leaderIndex();
  }

  #signalMember(index: number, signal: "SIGSTOP" | "SIGCONT"): void {
    const pid = this.#ctx.cluster.members[index]!.pid;
    if (pid > 0) {
      try {
        process.kill(pid, signal);
      } catch {
        // Not running.
      }
    }
  }
}
