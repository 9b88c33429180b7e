// `npm run chaos`: a 3-member loopback etcd cluster behind fault proxies, worker processes doing fenced
// read-modify-writes under one lock with the built package, beside them workers doing the same under the
// recipes (a semaphore, a read-write lock, lockAll and plain mutexes on shared names), and rounds of the fence
// control on each store (fence-rounds.ts: Postgres, SQLite, D1, R2, S3, DynamoDB), faults on a seeded schedule,
// then the checks.
//
// Usage: node test/chaos/run.ts [--duration 450] [--seed N] [--workers 6] [--ttl 8] [--sdk dist]
//                               [--json report.json] [--free-wait-bound 4550] [--faults kill-leader,silence|none]
//                               [--no-recipes] [--no-fence] [--permits 2|3] [--etcd 3.4|3.5|3.6|3.7]
// Exit code: 0 when every check passes, 1 when one fails, 2 when the run itself could not be carried out.
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type EtcdCluster, etcdVersion, startCluster } from "../etcd/harness.ts";
import { ETCD_VERSIONS, isEtcdVersion } from "../support/etcd-versions.ts";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import {
  type GuardedRecord,
  type LogEntry,
  type RecipeRecord,
  type RunRecord,
  runChecks,
  type Settings,
} from "./checks.ts";
import { type Guarded, type RecipeNames, recipeKinds, WORKER_KINDS } from "./events.ts";
import { FAULT_KINDS, type FaultKind, FaultSchedule } from "./faults.ts";
import { putKey, rangePrefix } from "../support/raw-gateway.ts";
import { sleep, wallNow } from "../support/time.ts";
import { Monitor } from "./monitor.ts";
import { seeded } from "./random.ts";
import { linearizableCheck } from "./linearizable.ts";
import { recipeChecks } from "./recipe-checks.ts";
import { type FenceRound, fenceCheck, fenceRounds } from "./fence-rounds.ts";
import { figures, formatReport } from "./report.ts";
import { type Stores, startStores } from "../stores/control.ts";
import { WorkerPool } from "./workers.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

const { values: args } = parseArgs({
  options: {
    duration: { type: "string", default: "450" },
    seed: { type: "string" },
    workers: { type: "string", default: "6" },
    ttl: { type: "string", default: "8" },
    sdk: { type: "string", default: "dist" },
    json: { type: "string" },
    "free-wait-bound": { type: "string" },
    faults: { type: "string" },
    // The recipe workers run by default; this leaves them out (the mutex alone, as before they existed).
    "no-recipes": { type: "boolean", default: false },
    // The fence control's rounds run by default (the stores' workers use dist/, which chaos.sh builds).
    "no-fence": { type: "boolean", default: false },
    permits: { type: "string" },
    // The cluster's etcd version (test/etcd/harness.ts reads it from ETCD_EDGE_ETCD_VERSION; 3.4 by default).
    etcd: { type: "string" },
  },
});
if (args.etcd !== undefined) {
  if (!isEtcdVersion(args.etcd)) throw new Error(`--etcd takes ${ETCD_VERSIONS.join(", ")}, got ${args.etcd}`);
  process.env.ETCD_EDGE_ETCD_VERSION = args.etcd;
}

function positive(name: string, text: string | undefined): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, got ${text}`);
  return n;
}

// Timeouts of the workers' calls, and the bounds the checks hold them to.
const CALL_TIMEOUT_MS = 5_000;
const LOCK_TIMEOUT_MS = 15_000;
// Short enough that polling waiters, served in line like the others, do not set the pace of the whole line.
const POLL_INTERVAL_MS = 50;
// Short holds: the line's pace is then set by handoffs, which is what the suite exercises.
const MAX_HOLD_MS = 10;
// The harness's election timeout (etcd's --election-timeout), which also extends leases on a leader change.
const ELECTION_TIMEOUT_MS = 1_000;
/**
 * The longest a running contender may sit first in line without taking the lock. A fair client needs at
 * most: a new leader elected (etcd notices the old one gone after one election timeout and may need one more
 * randomized round: 2 × 1 s), one poll interval for a polling waiter (0.05 s), the cost of one silent or
 * paused member (a request: one bounded attempt of at most timeout / 3 = 1.7 s before moving on; a waiter's
 * watch: the SDK's watchdog, its quiet period plus 1 s of grace, then a reopen elsewhere: the quiet period is
 * 2 s plus 0.1 s per key that was ahead of the waiter when it last looked, at most `contenders - 1`), and
 * scheduling delay on two loaded cores (0.5 s).
 */
function freeWaitBound(contenders: number): number {
  const watchdog = 2_000 + 100 * Math.max(0, contenders - 2) + 1_000;
  return 2 * ELECTION_TIMEOUT_MS + POLL_INTERVAL_MS + watchdog + 500;
}

function faultKinds(text: string | undefined): readonly FaultKind[] {
  if (text === undefined) return FAULT_KINDS;
  if (text === "none") return [];
  const kinds = text.split(",").map((k) => k.trim());
  for (const kind of kinds) {
    if (!(FAULT_KINDS as readonly string[]).includes(kind))
      throw new Error(`--faults: unknown fault ${kind}; known: ${FAULT_KINDS.join(", ")}, or none`);
  }
  return kinds as FaultKind[];
}

const kinds = faultKinds(args.faults);
const durationMs = positive("duration", args.duration) * 1_000;
const seed = args.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Math.floor(positive("seed", args.seed));
const workerCount = Math.floor(positive("workers", args.workers));
const ttl = positive("ttl", args.ttl);
const withRecipes = !args["no-recipes"];
const withFence = !args["no-fence"];
// 2 or 3 permits, drawn from the seed unless given (on a stream of its own, so the schedule does not move).
const permits =
  args.permits === undefined
    ? 2 + Math.floor(seeded(seed ^ 0x5e4a).next() * 2)
    : Math.floor(positive("permits", args.permits));
const settings: Settings = {
  durationMs,
  faultKinds: [...kinds],
  seed,
  workers: workerCount,
  ttl,
  electionTimeoutMs: ELECTION_TIMEOUT_MS,
  pollInterval: POLL_INTERVAL_MS,
  freeWaitBoundMs:
    args["free-wait-bound"] === undefined
      ? freeWaitBound(workerCount)
      : positive("free-wait-bound", args["free-wait-bound"]),
  // Timers fire late on two cores shared by three etcd members and the workers; a second is generous.
  callSlackMs: 1_000,
  // The longest round a worker can be in when asked to stop (withLock: grant, wait, fn, revoke), its
  // session's close, and a margin.
  drainBoundMs: LOCK_TIMEOUT_MS + 5 * CALL_TIMEOUT_MS + MAX_HOLD_MS + 5_000,
};

const runId = `${new Date().toISOString().replace(/[:.]/g, "-")}-seed${seed}`;
const runDir = join(ROOT, ".cache", "chaos", runId);
mkdirSync(runDir, { recursive: true });
const t0 = wallNow();
function log(line: string): void {
  const text = `[chaos +${((wallNow() - t0) / 1000).toFixed(1)}s] ${line}`;
  console.log(text);
  appendFileSync(join(runDir, "log.txt"), `${text}\n`);
}

const prefix = `chaos/${runId}/`;
// Every lock line (the mutex's and the recipes') lives under one prefix, which the monitor watches.
const linesPrefix = `${prefix}locks/`;
const lockName = `${linesPrefix}mutex`;
const lockPrefix = `${lockName}/`;
const counterKey = `${prefix}counter`;
const logPrefix = `${prefix}log/`;
// In no line: written after the workers are done, so the monitor's history is complete once it sees it.
const SENTINEL = `${linesPrefix}~end`;
const guarded = (name: string): Guarded => ({
  counterKey: `${prefix}${name}/counter`,
  logPrefix: `${prefix}${name}/log/`,
});
const recipeNames: RecipeNames | undefined = withRecipes
  ? {
      semaphore: { name: `${linesPrefix}sem`, permits, ...guarded("sem") },
      rwlock: { name: `${linesPrefix}rw`, ...guarded("rw") },
      names: [0, 1, 2].map((i) => ({ name: `${linesPrefix}n${i}`, ...guarded(`n${i}`) })),
    }
  : undefined;
const recipeWorkers = withRecipes ? recipeKinds(permits) : [];

let cluster: EtcdCluster | undefined;
let proxies: FaultProxy[] = [];
let monitor: Monitor | undefined;
let pool: WorkerPool | undefined;
let schedule: FaultSchedule | undefined;
let stores: Stores | undefined;
let exitCode = 2;

try {
  log(
    `seed ${seed}, ${workerCount} workers, ${durationMs / 1000} s, TTL ${ttl} s, faults: ${kinds.join(", ") || "none"}`,
  );
  log(
    withRecipes
      ? `recipes: ${recipeWorkers.length} workers (${recipeWorkers.map((k) => k.recipe).join(", ")}), ` +
          `semaphore of ${permits} permits`
      : "recipes: none",
  );
  log(`run dir ${runDir}; etcd ${etcdVersion()}`);
  log(withFence ? "fence: rounds on every store (starting them)" : "fence: none");
  [cluster, stores] = await Promise.all([
    startCluster(3, { electionMs: ELECTION_TIMEOUT_MS }),
    withFence ? startStores() : undefined,
  ]);
  proxies = await Promise.all(cluster.members.map((m) => startFaultProxy(m.clientUrl)));
  const { revision } = await rangePrefix(cluster.endpoints, linesPrefix);
  monitor = new Monitor(cluster.endpoints, linesPrefix, revision + 1);
  const eventsFile = join(runDir, "events.ndjson");
  pool = new WorkerPool(
    {
      sdk: resolve(ROOT, args.sdk!),
      endpoints: proxies.map((p) => p.url),
      name: lockName,
      counterKey,
      logPrefix,
      ttl,
      callTimeout: CALL_TIMEOUT_MS,
      lockTimeout: LOCK_TIMEOUT_MS,
      pollInterval: POLL_INTERVAL_MS,
      maxHold: MAX_HOLD_MS,
      recipes: recipeNames,
    },
    seed,
    (worker, event) => appendFileSync(eventsFile, `${JSON.stringify({ w: worker.id, ...event })}\n`),
    // The mutex workers first (so their seeds are as without recipes), then the recipe workers.
    (slot) => (slot < workerCount ? WORKER_KINDS[slot % WORKER_KINDS.length]! : recipeWorkers[slot - workerCount]!),
  );
  for (let slot = 0; slot < workerCount + recipeWorkers.length; slot++) pool.spawn(slot);
  if (!(await pool.ready(30_000))) throw new Error("workers did not start within 30 s");
  const livePool = pool;
  const startedAt = wallNow();
  const progress = setInterval(() => {
    const byRole = new Map<string, number>();
    for (const w of livePool.all()) {
      const role = w.kind.recipe ?? "mutex";
      byRole.set(role, (byRole.get(role) ?? 0) + w.events.filter((e) => e.ev === "acquired").length);
    }
    const counts = [...byRole].map(([role, n]) => `${role} ${n}`).join(", ");
    log(`progress: acquisitions ${counts}; ${livePool.live().length} workers running`);
  }, 15_000);
  const recipeRng = withRecipes ? seeded(seed ^ 0x7ec1) : undefined;
  schedule = new FaultSchedule(
    { cluster, proxies, monitor, pool, rng: seeded(seed), ttl, lockPrefix, log, recipeRng },
    kinds,
  );
  let faulting = true;
  const fenceAt = proxies.map((p) => p.url);
  const fencing: Promise<FenceRound[]> | undefined =
    stores === undefined ? undefined : fenceRounds(stores, fenceAt, `${prefix}fence/`, () => faulting, log);
  try {
    await sleep(2_000);
    await schedule.run(startedAt + durationMs);
  } finally {
    faulting = false;
    schedule.restore();
    clearInterval(progress);
  }
  // The round under way when the faults ended finishes before the workers are asked to.
  const fences = await fencing;
  const faultsEndedAt = wallNow();
  log("fault period over; asking workers to finish their round");
  await pool.drain(settings.drainBoundMs + 5_000);
  const workersEndedAt = Math.max(faultsEndedAt, ...pool.all().map((w) => w.exitedAt ?? 0));
  log(`workers done after ${((workersEndedAt - faultsEndedAt) / 1000).toFixed(1)} s`);

  // Crashed workers' keys go when their leases expire; wait for that, so their frees are on record.
  const linger = ttl * 1_000 + ELECTION_TIMEOUT_MS + 5_000;
  const lingerEnd = performance.now() + linger;
  while (performance.now() < lingerEnd && (await rangePrefix(cluster.endpoints, linesPrefix)).kvs.length > 0)
    await sleep(200);
  // The monitor has the whole history once some stream delivered this sentinel (streams deliver in order).
  const sentinelRevision = await putKey(cluster.endpoints, SENTINEL, "end");
  const historyComplete = await monitor.waitCovered(sentinelRevision, 15_000);

  const endpoints = cluster.endpoints;
  const readCounter = async (key: string) =>
    Number((await rangePrefix(endpoints, key, { limit: 1 })).kvs.find((kv) => kv.key === key)?.value ?? 0);
  const readLogs = async (logKeys: string): Promise<LogEntry[]> =>
    (await rangePrefix(endpoints, logKeys, { timeoutMs: 20_000 })).kvs.map((kv) => {
      const body = JSON.parse(kv.value) as { token: number; value: number; attempt: string };
      return { key: kv.key, modRevision: kv.modRevision, token: body.token, value: body.value, attempt: body.attempt };
    });
  const counter = await readCounter(counterKey);
  const logs = await readLogs(logPrefix);
  const readGuarded = async (g: Guarded & { name: string }): Promise<GuardedRecord & { prefix: string }> => ({
    name: g.name,
    prefix: `${g.name}/`,
    counterKey: g.counterKey,
    counter: await readCounter(g.counterKey),
    logs: await readLogs(g.logPrefix),
  });
  const allEvents = monitor.events().filter((e) => e.key !== SENTINEL);
  const recipes: RecipeRecord | undefined =
    recipeNames === undefined
      ? undefined
      : {
          permits,
          semaphore: await readGuarded(recipeNames.semaphore),
          rwlock: { ...(await readGuarded(recipeNames.rwlock)), writers: `${recipeNames.rwlock.name}/write/` },
          names: await Promise.all(recipeNames.names.map(readGuarded)),
          lineEvents: allEvents.filter((e) => !e.key.startsWith(lockPrefix)),
          holderFaults: schedule.recipeHolderFaults,
          // A failed acquisition's join may still be in flight (it settles within one call),
          // then its leave is one call.
          leaveBoundMs: 2 * CALL_TIMEOUT_MS + settings.callSlackMs,
        };

  const record: RunRecord = {
    settings,
    startedAt,
    faultsEndedAt,
    workersEndedAt,
    workers: pool.all().map((w) => ({
      id: w.id,
      kind: w.kind,
      events: w.events,
      leases: [...w.leases],
      stops: w.stops,
      killedAt: w.killedAt,
      hungAtEnd: w.hungAtEnd,
    })),
    lockEvents: allEvents.filter((e) => e.key.startsWith(lockPrefix)),
    historyComplete,
    leaderChanges: monitor.leaderChanges(),
    faults: schedule.records,
    holderFaults: schedule.holderFaults,
    counter,
    logs,
    recipes,
  };
  writeFileSync(join(runDir, "record.json"), JSON.stringify(record));
  if (fences !== undefined) writeFileSync(join(runDir, "fence.json"), JSON.stringify(fences));
  const checks = [
    ...runChecks(record),
    ...recipeChecks(record),
    linearizableCheck(record, runDir),
    ...(fences === undefined ? [] : [fenceCheck(fences)]),
  ];
  console.log(`\n${formatReport(record, checks, { runDir })}`);
  for (const w of pool.all()) {
    if (w.stderr.length > 0) log(`stderr of ${w.id}:\n  ${w.stderr.join("\n  ")}`);
  }
  if (args.json !== undefined) {
    writeFileSync(args.json, JSON.stringify({ settings, figures: figures(record), checks, runDir }, null, 2));
  }
  exitCode = checks.every((c) => c.ok) ? 0 : 1;
} catch (error) {
  log(`the run could not be completed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  exitCode = 2;
} finally {
  schedule?.restore();
  pool?.killAll();
  await monitor?.stop();
  await Promise.all(proxies.map((p) => p.close()));
  await cluster?.stop();
  await stores?.stop();
}
process.exit(exitCode);
