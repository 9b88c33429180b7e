// The judge: pure functions from what a chaos run recorded to pass/fail checks with figures. Kept apart from
// the runner so checks.test.ts can prove each check fails on a record that breaks it.
import type { CallEvent, WorkerEvent, WorkerKind } from "./events.ts";
import type { FaultRecord, HolderFault } from "./faults.ts";
import type { LeaderChange, LockEvent } from "./monitor.ts";

export interface Settings {
  durationMs: number;
  /** The fault kinds injected. */
  faultKinds: string[];
  seed: number;
  workers: number;
  /** Worker session TTL, seconds. */
  ttl: number;
  /** etcd's election timeout (ms): a new leader extends every lease by it plus the TTL. */
  electionTimeoutMs: number;
  pollInterval: number;
  /** Longest a live, running contender may sit first in line without holding the lock (ms). */
  freeWaitBoundMs: number;
  /** How far past its own budget a call may settle (timer lateness on a loaded machine), ms. */
  callSlackMs: number;
  /** How long after the fault period the run may take to end (every worker finishing its round), ms. */
  drainBoundMs: number;
}

export interface WorkerRecord {
  id: string;
  kind: WorkerKind;
  events: WorkerEvent[];
  /** Decimal lease IDs granted to it. */
  leases: string[];
  stops: Array<{ from: number; to?: number | undefined }>;
  killedAt?: number | undefined;
  hungAtEnd: boolean;
}

export interface LogEntry {
  key: string;
  modRevision: number;
  token: number;
  value: number;
  attempt: string;
}

export interface RunRecord {
  settings: Settings;
  startedAt: number;
  /** When the fault period ended (workers were then asked to stop). */
  faultsEndedAt: number;
  /** When the last worker had exited. */
  workersEndedAt: number;
  workers: WorkerRecord[];
  lockEvents: LockEvent[];
  /** The monitor's merged watch streams delivered every lock event of the run. */
  historyComplete: boolean;
  leaderChanges: LeaderChange[];
  faults: FaultRecord[];
  holderFaults: HolderFault[];
  counter: number;
  logs: LogEntry[];
  /** What the recipe workers did to the recipes' keys and counters; absent in a run without them. */
  recipes?: RecipeRecord | undefined;
}

/** A counter written by fenced read-modify-writes, as read at the end of the run. */
export interface GuardedRecord {
  /** The lock name protecting it, for the report. */
  name: string;
  counterKey: string;
  counter: number;
  logs: LogEntry[];
}

/** The recipes' part of a run: their lines (`<name>/`), their counters, and what the monitor saw of their keys. */
export interface RecipeRecord {
  permits: number;
  semaphore: GuardedRecord & { prefix: string };
  /** `writers`: `<name>/write/`, where the writers' keys live (readers' under `<name>/read/`). */
  rwlock: GuardedRecord & { prefix: string; writers: string };
  /** The names shared by lockAll holders and plain mutex holders, each with its own counter. */
  names: Array<GuardedRecord & { prefix: string }>;
  /** Every change to a recipe key, from the monitor (the mutex's are in `lockEvents`). */
  lineEvents: LockEvent[];
  /** Recipe holders frozen or killed on purpose (a lockAll's: one per key). */
  holderFaults: HolderFault[];
  /** How long after a failed acquisition its key may still stand (the SDK deletes it: up to two calls). */
  leaveBoundMs: number;
}

export interface CheckResult {
  name: string;
  ok: boolean;
  /** One line with the figures that decide it. */
  summary: string;
  /** The failing cases, worst first (bounded). */
  details: string[];
}

export const MAX_DETAILS = 12;

// ---------------------------------------------------------------------------------------------------
// Attempts: every fenced commit a worker sent, with how it ended.

export interface Attempt {
  worker: string;
  attempt: string;
  token: number;
  logKey: string;
  outcome: "ok" | "refused" | "error" | "unreported";
  code?: string | undefined;
  ownKeyHeld?: boolean | undefined;
  counterMoved?: boolean | undefined;
}

export function attempts(record: RunRecord): Attempt[] {
  const out: Attempt[] = [];
  for (const worker of record.workers) {
    const byAttempt = new Map<string, Attempt>();
    for (const event of worker.events) {
      if (event.ev === "commit-sent") {
        const a: Attempt = {
          worker: worker.id,
          attempt: event.attempt,
          token: event.token,
          logKey: event.logKey,
          outcome: "unreported",
        };
        byAttempt.set(event.attempt, a);
        out.push(a);
      } else if (event.ev === "commit") {
        const a = byAttempt.get(event.attempt);
        if (a === undefined) continue;
        a.outcome = event.outcome;
        a.code = event.code;
        a.ownKeyHeld = event.ownKeyHeld;
        a.counterMoved = event.counterMoved;
      }
    }
  }
  return out;
}

/** counter == successful commits + indeterminate ones that landed == log keys; every value written once. */
export function checkCounter(record: RunRecord): CheckResult {
  return {
    name: "counter matches the commits (no lost update)",
    ...counterVerdict(record.counter, record.logs, attempts(record)),
  };
}

/**
 * The counter check for one counter: its final value, its log keys, and every attempt that wrote (or tried
 * to write) it, each naming the log key it would have put beside the counter.
 */
export function counterVerdict(
  counter: number,
  logs: readonly LogEntry[],
  all: readonly Attempt[],
): Omit<CheckResult, "name"> {
  const logKeys = new Set(logs.map((l) => l.key));
  const ok = all.filter((a) => a.outcome === "ok");
  const indeterminate = all.filter((a) => a.outcome === "error" || a.outcome === "unreported");
  const landed = indeterminate.filter((a) => logKeys.has(a.logKey));
  const details: string[] = [];
  for (const a of ok)
    if (!logKeys.has(a.logKey)) details.push(`${a.attempt}: reported committed, but its log key is missing`);
  for (const a of all)
    if (a.outcome === "refused" && logKeys.has(a.logKey))
      details.push(`${a.attempt}: reported refused, but its log key exists`);
  const known = new Set(all.map((a) => a.logKey));
  for (const l of logs) if (!known.has(l.key)) details.push(`${l.key}: a log key no worker sent`);
  const values = logs.map((l) => l.value).sort((a, b) => a - b);
  const firstBad = values.findIndex((v, i) => v !== i + 1);
  if (firstBad >= 0)
    details.push(
      `counter values written are not exactly 1..${values.length}: ` +
        `position ${firstBad + 1} holds ${values[firstBad]} (a lost or doubled update)`,
    );
  const expected = ok.length + landed.length;
  if (counter !== expected || counter !== logs.length) {
    details.unshift(
      `counter ${counter}, successful commits ${ok.length} ` +
        `+ indeterminate that landed ${landed.length} = ${expected}, log keys ${logs.length}`,
    );
  }
  return {
    ok: details.length === 0,
    summary:
      `counter ${counter} = ${ok.length} committed + ${landed.length} ` +
      `indeterminate that landed (of ${indeterminate.length}) = ${logs.length} log keys`,
    details: details.slice(0, MAX_DETAILS),
  };
}

/**
 * Fencing tokens strictly increase from one holder to the next, in commit order. A token is its lock key's
 * create revision, so two commits with the same token come from one key incarnation: one unbroken hold (a
 * session that takes its own key again, left behind by a failed unlock). Those are counted, not failed; a
 * smaller token after a larger one is a stale holder's write that fencing should have refused.
 */
export function checkFencing(record: RunRecord): CheckResult {
  const { logs, details, sameKey } = tokenOrder(record.logs);
  const backwards = details.length;
  // Our key was still there with our token, yet the counter had moved since we read it: someone else wrote
  // while we held the lock, so two contenders held it at once.
  const overlaps = attempts(record).filter(
    (a) => a.outcome === "refused" && a.ownKeyHeld === true && a.counterMoved === true,
  );
  for (const a of overlaps)
    details.push(`${a.attempt} (token ${a.token}): the counter moved while its lock key was still held`);
  return {
    name: "fencing tokens increase in commit order",
    ok: details.length === 0,
    summary:
      `${logs.length} commits in revision order: ${backwards} with a smaller token than the one before, ` +
      `${sameKey} under the same key as the one before ` +
      `(re-taken after a failed unlock); ${overlaps.length} writes under another live holder`,
    details: details.slice(0, MAX_DETAILS),
  };
}

/**
 * The commits of one counter in revision order, with each one whose token is smaller than the one before
 * (`details`) and the count of those with the same token as the one before (`sameKey`).
 */
export function tokenOrder(unsorted: readonly LogEntry[]): { logs: LogEntry[]; details: string[]; sameKey: number } {
  const logs = [...unsorted].sort((a, b) => a.modRevision - b.modRevision);
  const details: string[] = [];
  let sameKey = 0;
  for (let i = 1; i < logs.length; i++) {
    const [before, after] = [logs[i - 1]!, logs[i]!];
    if (after.token === before.token) sameKey++;
    else if (after.token < before.token) {
      details.push(
        `commit at revision ${after.modRevision} (token ${after.token}, ${after.attempt}) ` +
          `after commit at ${before.modRevision} (token ${before.token}, ${before.attempt})`,
      );
    }
  }
  return { logs, details, sameKey };
}

/**
 * While the cluster keeps its quorum (every fault here leaves two members of three), a running worker never
 * loses its session or its lock: renewals fail over in time, releases are honest, waits renew. A worker
 * frozen (SIGSTOP) after its lease was granted may lose it, as it should; that is not counted.
 */
export function checkSessionsSurvive(record: RunRecord): CheckResult {
  const details: string[] = [];
  let excused = 0;
  let revokedByEtcd = 0;
  let outrun = 0;
  const resumes = staleLeaderResumes(record);
  const ttlMs = record.settings.ttl * 1_000;
  for (const worker of record.workers) {
    const granted = new Map<string, number>();
    for (const e of worker.events) {
      if (e.ev === "lease") granted.set(e.leaseId, e.t);
      if (e.ev !== "lost") continue;
      const since = e.leaseId === undefined ? undefined : granted.get(e.leaseId);
      if (since !== undefined && frozenDuring(worker, since, e.t)) {
        excused++;
        continue;
      }
      if (resumes.some((t) => e.t >= t && e.t <= t + STALE_LEADER_WINDOW_MS)) {
        revokedByEtcd++;
        continue;
      }
      if (manualLeaseOutrun(worker, e.t, ttlMs)) {
        outrun++;
        continue;
      }
      details.push(
        `${worker.id} (${worker.kind.mode}/${worker.kind.wait}/${worker.kind.fetch}) ${e.op}: ${e.code} ` +
          `at +${((e.t - record.startedAt) / 1000).toFixed(1)} s`,
      );
      const trace = sdkTrace(worker, e.t - (record.settings.ttl + 2) * 1_000, e.t, record.startedAt);
      if (trace !== "") details.push(`  its SDK events before: ${trace}`);
    }
  }
  return {
    name: "a running worker never loses its session or lock while the cluster has quorum",
    ok: details.length === 0,
    summary:
      `${details.length} losses by running workers; ${excused} more by workers frozen past their TTL (expected)` +
      (revokedByEtcd > 0
        ? `; ${revokedByEtcd} right after a long-paused leader resumed (etcd's own revocation, etcd-io/etcd#15247)`
        : "") +
      (outrun > 0 ? `; ${outrun} by manual withLocks whose fn and release outlasted the lease (as documented)` : ""),
    details: details.slice(0, MAX_DETAILS),
  };
}

/**
 * What the worker's SDK told about its sessions and endpoints between `from` and `to` (renewals, failed
 * renewals, losses, failovers), so that a loss printed in CI's log can be traced without the run record.
 */
export function sdkTrace(worker: WorkerRecord, from: number, to: number, startedAt: number, most = 16): string {
  const port = (url: string | undefined) => url?.replace(/^https?:\/\/[^:]+:/, ":") ?? "?";
  const items = worker.events
    .filter((e) => e.ev === "sdk" && e.t >= from && e.t <= to)
    .map((e) => {
      const event = e as Extract<WorkerEvent, { ev: "sdk" }>;
      const at = `+${((event.t - startedAt) / 1000).toFixed(1)}`;
      const what =
        event.type === "failover"
          ? `failover ${port(event.from)}→${port(event.to)}`
          : event.type.replace(/^session\./, "");
      return `${at} ${what}${event.code ? ` ${event.code}` : ""}`;
    });
  return items.length > most
    ? [...items.slice(0, 4), `… ${items.length - most} more …`, ...items.slice(-(most - 4))].join(", ")
    : items.join(", ");
}

// ---------------------------------------------------------------------------------------------------
// Lock key incarnations, from the monitor's events.

export interface Incarnation {
  key: string;
  create: number;
  lease: string;
  putT: number;
  deleteRevision?: number | undefined;
  deleteT?: number | undefined;
}

export function incarnations(events: readonly LockEvent[]): Incarnation[] {
  const byId = new Map<string, Incarnation>();
  for (const e of events) {
    const id = `${e.key}@${e.createRevision}`;
    if (e.type === "put") {
      if (!byId.has(id)) byId.set(id, { key: e.key, create: e.createRevision, lease: e.lease, putT: e.t });
    } else {
      const inc = byId.get(id);
      if (inc !== undefined) Object.assign(inc, { deleteRevision: e.revision, deleteT: e.t });
    }
  }
  return [...byId.values()].sort((a, b) => a.create - b.create);
}

/**
 * A crashed or frozen holder's lock is free (its key deleted) within TTL + 1 s. etcd 3.4's new leader
 * re-arms every lease to now + election timeout + TTL (lessor.Promote), so after a leader change the
 * deadline counts from that change plus the election timeout instead, whichever is later.
 */
/** How many holder faults a run must plan before none landing fails the check (see checkCrashedHolders). */
const MIN_HOLDER_FAULTS = 3;

export function checkCrashedHolders(record: RunRecord): CheckResult {
  const { ttl, electionTimeoutMs } = record.settings;
  const ttlMs = ttl * 1_000;
  const byId = new Map(incarnations(record.lockEvents).map((i) => [`${i.key}@${i.create}`, i]));
  const details: string[] = [];
  const figures: string[] = [];
  let measured = 0;
  let releasedFirst = 0;
  for (const fault of record.holderFaults) {
    const inc = byId.get(`${fault.key}@${fault.createRevision}`);
    const freedAt = inc?.deleteT;
    if (freedAt !== undefined && inc!.deleteT! < fault.at) {
      releasedFirst++; // It let go between our read and the signal.
      continue;
    }
    const promotion = record.leaderChanges.filter((c) => c.t < (freedAt ?? Infinity)).at(-1);
    const from = Math.max(fault.at, promotion === undefined ? -Infinity : promotion.t + electionTimeoutMs);
    const deadline = from + ttlMs + 1_000;
    const label = `${fault.kind} of ${fault.worker} (${fault.key}@${fault.createRevision})`;
    if (freedAt === undefined) {
      details.push(`${label}: never freed`);
      continue;
    }
    measured++;
    const took = freedAt - fault.at;
    const extended =
      from > fault.at
        ? `, leader change at +${((promotion!.t - fault.at) / 1000).toFixed(1)} s ` +
          `allows until +${((deadline - fault.at) / 1000).toFixed(1)} s`
        : "";
    figures.push(`${(took / 1000).toFixed(2)} s`);
    if (freedAt > deadline) details.push(`${label}: freed after ${(took / 1000).toFixed(2)} s${extended}`);
  }
  // A check that judged nothing passes nothing: several holder faults were planned and none found a holder. One may
  // miss (no lock held during an outage); every one of several missing is the harness not finding holders at all.
  const planned = record.faults.filter((f) => f.kind === "kill-holder" || f.kind === "stop-holder").length;
  if (planned >= MIN_HOLDER_FAULTS && record.holderFaults.length === 0) {
    details.push(`none of the ${planned} holder faults found a holder: nothing was measured`);
  }
  return {
    name: "a crashed or frozen holder's lock is free within TTL + 1 s",
    ok: details.length === 0,
    summary:
      `${measured} measured (${releasedFirst} released before the signal): ` +
      `freed after ${figures.join(", ") || "-"} (TTL ${ttl} s)`,
    details: details.slice(0, MAX_DETAILS),
  };
}

/** Whether a worker was frozen at any time in [from, to]. */
/** How long after a paused leader resumes its stale revocations may still surface as losses, ms. */
const STALE_LEADER_WINDOW_MS = 2_000;

/** How much earlier than its answer a renewal may have been sent: the session's deadline counts from the send. */
const RENEWAL_SEND_SLACK_MS = 1_000;

/**
 * A manual `withLock` renews nothing while its `fn` and release run (its documented contract, for runtimes that
 * freeze between invocations): a holding whose `fn` and release outlast the lease left when it was taken loses
 * it, and the SDK says so. True when the worker took the lock after its lease's last renewal (or grant) and the
 * loss comes at that renewal's deadline, not before.
 */
function manualLeaseOutrun(worker: WorkerRecord, lostAt: number, ttlMs: number): boolean {
  if (worker.kind.mode !== "withlock-manual") return false;
  let renewed: number | undefined;
  let acquired: number | undefined;
  for (const e of worker.events) {
    if (e.t > lostAt) break;
    if (e.ev === "lease" || (e.ev === "sdk" && e.type === "session.renewed")) renewed = e.t;
    else if (e.ev === "acquired") acquired = e.t;
  }
  if (renewed === undefined || acquired === undefined || acquired < renewed) return false;
  return lostAt >= renewed + ttlMs - RENEWAL_SEND_SLACK_MS;
}

/**
 * When a leader paused long enough to miss a whole renewal slack (2/3 of the TTL: sessions renew every third)
 * resumed. Its lessor, still primary in its own view, finds leases expired and revokes them; the revocation
 * is forwarded to the new leader and applied although every session renewed through it. This is etcd's bug
 * (etcd-io/etcd#12528, #15247; fixed upstream by ignoring an old leader's revocations), not the client's: no
 * client can keep a lease the server revokes. Losses right after such a resume are counted apart.
 */
function staleLeaderResumes(record: RunRecord): number[] {
  const slackMs = (2 * record.settings.ttl * 1000) / 3;
  return record.faults
    .filter((f) => f.kind === "pause-member" && f.detail.includes("(leader)") && f.t1 - f.t0 > slackMs)
    .map((f) => f.t1);
}

export function frozenDuring(worker: WorkerRecord, from: number, to: number): boolean {
  return worker.stops.some((s) => s.from <= to && (s.to ?? Infinity) >= from);
}

export interface FreeWait {
  worker: string;
  key: string;
  token: number;
  /** When the lock became free for this contender (see freeWaits). */
  freeAt: number;
  /** When the key it waited for last was deleted, as the monitor saw it; undefined for a key that never waited. */
  deletedAt?: number | undefined;
  /** When its worker had the lock, if it ever did. */
  acquiredAt?: number | undefined;
  waitMs: number;
}

/** Times of one event kind per key incarnation (`key@createRevision`), in order. */
function timesByIncarnation(record: RunRecord, ev: "acquired" | "released"): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const w of record.workers) {
    for (const e of w.events) {
      if (e.ev !== ev) continue;
      const id = `${e.key}@${e.token}`;
      out.set(id, [...(out.get(id) ?? []), e.t]);
    }
  }
  for (const times of out.values()) times.sort((a, b) => a - b);
  return out;
}

/**
 * How long each contender waited on a free lock. A contender's key K is first in line once every older key
 * is gone; the last of those to go, P, freed the lock when its owner finished with it (reported just before
 * unlock(), or when withLock's fn returned) or when P's key was deleted, whichever came first (P's owner
 * frozen or killed in between: the delete; the crash check judges that). So the lock is free for K from the
 * later of K's own put and that moment, and K waits until its lock() resolves, or until its key goes if it
 * never does. This counts a waiter that does not notice its turn (a silent watch) and a release that does
 * not remove the key (an unlock or revoke that timed out or was never resent) alike. Times are the
 * monitor's first delivery of each event. Excluded: contenders whose own process was frozen or killed.
 */
export function freeWaits(record: RunRecord): { waits: FreeWait[]; excluded: number; unknown: number } {
  const incs = incarnations(record.lockEvents);
  const ownerByLease = new Map<string, WorkerRecord>();
  for (const w of record.workers) for (const lease of w.leases) ownerByLease.set(lease, w);
  const acquired = timesByIncarnation(record, "acquired");
  const released = timesByIncarnation(record, "released");
  const pausedOrKilled = (owner: WorkerRecord | undefined, from: number, to: number) =>
    owner === undefined || (owner.killedAt !== undefined && owner.killedAt <= to) || frozenDuring(owner, from, to);
  const waits: FreeWait[] = [];
  let excluded = 0;
  let unknown = 0;
  /** Of the keys created so far, the one deleted last: it is what the next key waits for. */
  let lastOut: Incarnation | undefined;
  let blocked = false;
  for (const inc of incs) {
    if (blocked) break;
    let freeAt = inc.putT;
    let deletedAt: number | undefined;
    if (lastOut !== undefined && lastOut.deleteRevision! > inc.create) {
      const deleted = lastOut.deleteT!;
      deletedAt = deleted;
      const before = ownerByLease.get(lastOut.lease);
      const finished = (released.get(`${lastOut.key}@${lastOut.create}`) ?? []).filter((t) => t <= deleted).at(-1);
      const freedAt = finished === undefined || pausedOrKilled(before, finished, deleted) ? deleted : finished;
      freeAt = Math.max(inc.putT, freedAt);
    }
    const owner = ownerByLease.get(inc.lease);
    const acquiredAt = acquired.get(`${inc.key}@${inc.create}`)?.[0];
    const end = acquiredAt ?? inc.deleteT ?? record.workersEndedAt;
    if (owner === undefined) unknown++;
    else if (pausedOrKilled(owner, freeAt, end)) excluded++;
    else
      waits.push({
        worker: owner.id,
        key: inc.key,
        token: inc.create,
        freeAt,
        deletedAt,
        acquiredAt,
        waitMs: Math.max(0, end - freeAt),
      });
    if (inc.deleteRevision === undefined) blocked = true;
    else if (lastOut === undefined || inc.deleteRevision > lastOut.deleteRevision!) lastOut = inc;
  }
  return { waits, excluded, unknown };
}

/** The waits over `bound`, worst first, and their spread: "p50 …, p99 …, max …". */
export function waitSpread<W extends { waitMs: number }>(
  waits: readonly W[],
  bound: number,
): { over: W[]; spread: string } {
  const sorted = waits.map((w) => w.waitMs).sort((a, b) => a - b);
  const over = waits.filter((w) => w.waitMs > bound).sort((a, b) => b.waitMs - a.waitMs);
  return {
    over,
    spread:
      `p50 ${fmtMs(quantile(sorted, 0.5))}, ` +
      `p99 ${fmtMs(quantile(sorted, 0.99))}, max ${fmtMs(sorted.at(-1) ?? 0)}`,
  };
}

export function checkFreeWait(record: RunRecord): CheckResult {
  const bound = record.settings.freeWaitBoundMs;
  const { waits, excluded, unknown } = freeWaits(record);
  const { over, spread } = waitSpread(waits, bound);
  const workers = new Map(record.workers.map((w) => [w.id, w]));
  const details = over.map((w) => {
    const kind = workers.get(w.worker)?.kind;
    const how = w.acquiredAt === undefined ? "never took it (its key went)" : "then took it";
    return (
      `${w.worker} (${kind?.mode}/${kind?.wait}/${kind?.fetch}) ` +
      `first in line with ${w.key}@${w.token} for ${(w.waitMs / 1000).toFixed(2)} s, ${how}`
    );
  });
  if (!record.historyComplete) details.unshift("the monitor's history is incomplete: free waits cannot be judged");
  return {
    name: `no contender waits on a free lock longer than ${bound / 1000} s`,
    ok: details.length === 0,
    summary:
      `${waits.length} times first in line: ${spread}; ${over.length} ` +
      `over the bound; ${excluded} excluded (frozen or killed), ${unknown} of unknown owner`,
    details: details.slice(0, MAX_DETAILS),
  };
}

/** What a follower's pause may cost a watching waiter on a free lock (issue 23), and scheduling on 2 loaded cores. */
export const PAUSED_FOLLOWER_WAIT_MS = 1_500;
const SCHEDULING_MS = 500;

/**
 * A member that stalls without closing its connections costs a waiter that watches at most 1.5 s on a free lock:
 * its second watch, opened on another endpoint once its wait has lasted a second, hears the release. Judged on
 * the waits of watching contenders that lie inside a follower's pause and overlap no other fault (a paused
 * leader brings an election, which the free-wait bound covers; a polling waiter's read pays an attempt), from
 * the moment the release landed: a watch hears a delete once etcd made it, and a holder whose own release went
 * to the paused member first pays one request attempt (the attemptTimeout, 1.7 s here) before it fails over, a
 * cost of the holder's request that the free-wait bound covers. Each wait over the bound is printed with both.
 */
export function checkPausedFollowerWaits(record: RunRecord): CheckResult {
  const bound = PAUSED_FOLLOWER_WAIT_MS + SCHEDULING_MS;
  const workers = new Map(record.workers.map((w) => [w.id, w]));
  const overlaps = (f: FaultRecord, from: number, to: number) => f.t0 <= to && f.t1 >= from && f.missed === undefined;
  const pauses = record.faults.filter((f) => f.kind === "pause-member" && !f.detail.includes("(leader)"));
  const judged = freeWaits(record)
    .waits.filter((wait) => {
      const end = wait.freeAt + wait.waitMs;
      if (workers.get(wait.worker)?.kind.wait !== "watch") return false;
      const during = pauses.filter((p) => p.t0 <= wait.freeAt && p.t1 >= end);
      return during.length > 0 && record.faults.every((f) => during.includes(f) || !overlaps(f, wait.freeAt, end));
    })
    .map((wait) => {
      const releaseMs = Math.max(0, (wait.deletedAt ?? wait.freeAt) - wait.freeAt);
      return { ...wait, releaseMs, waitMs: Math.max(0, wait.waitMs - releaseMs) };
    });
  const { over, spread } = waitSpread(judged, bound);
  const slowReleases = judged.filter((w) => w.releaseMs > PAUSED_FOLLOWER_WAIT_MS).length;
  return {
    name: `a follower's pause costs a watching waiter at most ${PAUSED_FOLLOWER_WAIT_MS / 1000} s on a free lock`,
    ok: over.length === 0,
    summary:
      `${judged.length} waits inside a follower's pause alone, from the release: ${spread}; ` +
      `${over.length} over ${bound / 1000} s (${SCHEDULING_MS / 1000} s of it scheduling); ` +
      `${slowReleases} releases that landed over ${PAUSED_FOLLOWER_WAIT_MS / 1000} s after their holder finished`,
    details: over
      .map(
        (w) =>
          `${w.worker} first in line with ${w.key}@${w.token} for ${(w.waitMs / 1000).toFixed(2)} s after the ` +
          `release landed (${(w.releaseMs / 1000).toFixed(2)} s after its holder finished)`,
      )
      .slice(0, MAX_DETAILS),
  };
}

/** Every call settles within its own budget (+ slack) unless its process was frozen; the run ends in time. */
export function checkNoHang(record: RunRecord): CheckResult {
  const { callSlackMs, drainBoundMs } = record.settings;
  const details: string[] = [];
  let calls = 0;
  for (const worker of record.workers) {
    for (const e of worker.events) {
      if (e.ev !== "call") continue;
      calls++;
      if (frozenDuring(worker, e.t0, e.t)) continue;
      const took = e.t - e.t0;
      if (e.abandoned || took > e.budget + callSlackMs) details.push(overrun(worker.id, e, took));
    }
    if (worker.hungAtEnd)
      details.push(`${worker.id}: still running ${drainBoundMs / 1000} s after it was asked to stop; killed`);
  }
  const drainMs = record.workersEndedAt - record.faultsEndedAt;
  if (drainMs > drainBoundMs)
    details.push(
      `the run ended ${(drainMs / 1000).toFixed(1)} s after the fault period (bound ${drainBoundMs / 1000} s)`,
    );
  return {
    name: "nothing hangs: every call ends within its timeout, the run within duration + bound",
    ok: details.length === 0,
    summary:
      `${calls} calls, ${details.length} overruns; ` +
      `workers done ${(drainMs / 1000).toFixed(1)} s after the fault period (bound ${drainBoundMs / 1000} s)`,
    details: details.sort().slice(0, MAX_DETAILS),
  };
}

function overrun(worker: string, e: CallEvent, took: number): string {
  const what = e.abandoned ? "abandoned, still pending after" : "took";
  return (
    `${worker} ${e.op}: ${what} ${(took / 1000).toFixed(2)} s ` +
    `(budget ${(e.budget / 1000).toFixed(1)} s)${e.code ? ` → ${e.code}` : ""}`
  );
}

export function runChecks(record: RunRecord): CheckResult[] {
  return [
    checkCounter(record),
    checkFencing(record),
    checkCrashedHolders(record),
    checkFreeWait(record),
    checkPausedFollowerWaits(record),
    checkNoHang(record),
    checkSessionsSurvive(record),
  ];
}

export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export function fmtMs(ms: number): string {
  return ms >= 1_000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`;
}
