// The fenced counter's history, checked for linearizability by porcupine (github.com/anishathalye/porcupine,
// the checker etcd's own robustness tests use; scripts/etcd-go/cmd/linearizable runs it): besides the judge's
// own counting (checks.ts), a checker the field trusts says whether every read and write of the counter fits
// one order that respects real time. The counter is a compare-and-set register: a worker reads it under the
// lock (a read op: the value it saw, while its get was out), then writes value + 1 fenced by the lock and by
// the counter's mod revision (a cas op). What each op's outcome says:
//   landed                  the counter went from the value read to value + 1 inside the call;
//   refused, own key held   the lock was ours, so the counter had moved: it was not the value read;
//   refused, key gone       the fence refused it: says nothing of the counter, left out;
//   no answer (an error, or the worker killed): landed if its log key exists (then it may have taken effect
//                           any time after it was sent: its return is past every op's), else left out.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { etcdBinaries } from "../support/etcd-versions.ts";
import type { CheckResult, RunRecord } from "./checks.ts";

export interface RegisterOp {
  client: number;
  kind: "read" | "cas";
  /** A read's value. */
  value?: number | undefined;
  from?: number | undefined;
  to?: number | undefined;
  /** A cas: whether it took effect. */
  ok?: boolean | undefined;
  /** µs since the epoch: when the op was sent, and when its answer came. */
  call: number;
  return: number;
}

const micros = (ms: number) => Math.round(ms * 1_000);

/** The mutex workers' reads and writes of their counter, as porcupine's operations. */
export function counterHistory(record: RunRecord): RegisterOp[] {
  const landed = new Set(record.logs.map((log) => log.attempt));
  const ops: RegisterOp[] = [];
  const unanswered: RegisterOp[] = [];
  for (const [client, worker] of record.workers.entries()) {
    if (worker.kind.recipe !== undefined) continue;
    let get: { t0: number; t: number } | undefined;
    let txn: { t0: number; t: number } | undefined;
    const sent = new Map<string, { t: number; value: number }>();
    for (const event of worker.events) {
      if (event.ev === "call" && event.op === "get") get = event.ok ? event : undefined;
      else if (event.ev === "call" && event.op === "txn") txn = event;
      else if (event.ev === "commit-sent") {
        if (get !== undefined)
          ops.push({ client, kind: "read", value: event.value - 1, call: micros(get.t0), return: micros(get.t) });
        get = undefined;
        txn = undefined;
        sent.set(event.attempt, { t: event.t, value: event.value });
      } else if (event.ev === "commit") {
        const commit = sent.get(event.attempt);
        sent.delete(event.attempt);
        if (commit === undefined) continue;
        const cas = { client, kind: "cas" as const, from: commit.value - 1, to: commit.value };
        const call = micros(txn?.t0 ?? commit.t);
        if (event.outcome === "ok") ops.push({ ...cas, ok: true, call, return: micros(txn?.t ?? event.t) });
        else if (event.outcome === "refused" && event.ownKeyHeld) {
          ops.push({ ...cas, ok: false, call, return: micros(txn?.t ?? event.t) });
        } else if (event.outcome === "error" && landed.has(event.attempt)) {
          unanswered.push({ ...cas, ok: true, call, return: 0 });
        }
      }
    }
    // Sent, never answered: the worker was killed or stopped with it out.
    for (const [attempt, commit] of sent) {
      if (landed.has(attempt)) {
        unanswered.push({
          client,
          kind: "cas",
          from: commit.value - 1,
          to: commit.value,
          ok: true,
          call: micros(commit.t),
          return: 0,
        });
      }
    }
  }
  const end = Math.max(0, ...ops.map((op) => op.return), ...unanswered.map((op) => op.call)) + 1;
  return [...ops, ...unanswered.map((op) => ({ ...op, return: end }))];
}

/** The checker's binary: built with the Go-built members (scripts/lib/etcd-versions.sh), whatever the run's version. */
export function linearizableChecker(): string {
  return join(etcdBinaries("3.7").binDir, "linearizable");
}

/** Runs porcupine over `ops`; `visualization`: where it draws an illegal history. */
export function checkRegister(ops: RegisterOp[], visualization: string, checker = linearizableChecker()) {
  const run = spawnSync(checker, [visualization], {
    input: JSON.stringify({ ops }),
    encoding: "utf8",
    timeout: 120_000,
    maxBuffer: 1 << 20,
  });
  if (run.status !== 0) throw new Error(`${checker} failed (${run.status ?? run.signal}): ${run.stderr}`);
  return JSON.parse(run.stdout) as { result: "Ok" | "Illegal" | "Unknown"; ops: number };
}

/** The check the report lists beside checks.ts's. */
export function linearizableCheck(record: RunRecord, runDir: string): CheckResult {
  const name = "Linearizable counter (porcupine)";
  const ops = counterHistory(record);
  const count = (kind: string, ok?: boolean) =>
    ops.filter((op) => op.kind === kind && (ok === undefined || op.ok === ok)).length;
  const landed = count("cas", true);
  const shape = `${count("read")} reads, ${landed} writes landed, ${count("cas", false)} refused while held`;
  const visualization = join(runDir, "porcupine.html");
  try {
    const { result } = checkRegister(ops, visualization);
    const details =
      result === "Illegal"
        ? [`porcupine drew the history: ${visualization}`]
        : result === "Unknown"
          ? ["porcupine ran out of time"]
          : [];
    return { name, ok: result === "Ok", summary: `${shape}: ${result}`, details };
  } catch (error) {
    return { name, ok: false, summary: `${shape}: the checker did not run`, details: [String(error)] };
  }
}
