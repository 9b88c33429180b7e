// The chaos run's report: what was done to the cluster, what the workers got, and each check's verdict.
import { attempts, type CheckResult, type RunRecord } from "./checks.ts";

export interface Figures {
  acquisitions: number;
  acquisitionsByMode: Record<string, number>;
  commits: Record<"ok" | "refused" | "error" | "unreported", number>;
  /** Refused commits whose lock key was gone: stale holders stopped by ifHeld(). */
  fencedOut: number;
  /** Failed calls, `op code` → count. */
  failures: Record<string, number>;
  faults: Record<string, { injected: number; missed: number }>;
  leaderChanges: number;
  workersSpawned: number;
}

export function figures(record: RunRecord): Figures {
  const acquisitionsByMode: Record<string, number> = {};
  const failures: Record<string, number> = {};
  let acquisitions = 0;
  for (const w of record.workers) {
    for (const e of w.events) {
      if (e.ev === "acquired") {
        acquisitions++;
        acquisitionsByMode[`${w.kind.mode}/${w.kind.wait}`] = (acquisitionsByMode[`${w.kind.mode}/${w.kind.wait}`] ?? 0) + 1;
      } else if (e.ev === "call" && !e.ok) {
        const key = `${e.op} ${e.code ?? "?"}`;
        failures[key] = (failures[key] ?? 0) + 1;
      }
    }
  }
  const commits = { ok: 0, refused: 0, error: 0, unreported: 0 };
  let fencedOut = 0;
  for (const a of attempts(record)) {
    commits[a.outcome]++;
    if (a.outcome === "refused" && a.ownKeyHeld === false) fencedOut++;
  }
  const faults: Figures["faults"] = {};
  for (const f of record.faults) {
    const entry = (faults[f.kind] ??= { injected: 0, missed: 0 });
    if (f.missed === undefined) entry.injected++;
    else entry.missed++;
  }
  return {
    acquisitions,
    acquisitionsByMode,
    commits,
    fencedOut,
    failures,
    faults,
    leaderChanges: record.leaderChanges.length,
    workersSpawned: record.workers.length,
  };
}

export function formatReport(record: RunRecord, checks: CheckResult[], extra: { runDir?: string | undefined } = {}): string {
  const f = figures(record);
  const s = record.settings;
  const lines: string[] = [];
  const seconds = (record.faultsEndedAt - record.startedAt) / 1000;
  lines.push(`chaos: ${seconds.toFixed(0)} s of faults, seed ${s.seed}, ${s.workers} workers (${f.workersSpawned} processes with respawns), TTL ${s.ttl} s`);
  if (s.faultKinds.length === 0) lines.push("faults: none (--faults none)");
  else lines.push(
    `faults: ${Object.entries(f.faults)
      .map(([k, v]) => `${k} ${v.injected}${v.missed ? ` (+${v.missed} missed)` : ""}`)
      .join(", ")}; leader changes seen ${f.leaderChanges}`,
  );
  lines.push(
    `acquisitions: ${f.acquisitions} (${(f.acquisitions / seconds).toFixed(1)}/s) — ${Object.entries(f.acquisitionsByMode)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`,
  );
  lines.push(
    `fenced commits: ${f.commits.ok} ok, ${f.commits.refused} refused (${f.fencedOut} stale holders fenced out), ` +
      `${f.commits.error} failed, ${f.commits.unreported} unreported (worker killed or call abandoned)`,
  );
  const failures = Object.entries(f.failures).sort((a, b) => b[1] - a[1]);
  lines.push(`failed calls: ${failures.length === 0 ? "none" : failures.map(([k, v]) => `${k} ×${v}`).join(", ")}`);
  lines.push("");
  for (const check of checks) {
    lines.push(`${check.ok ? "PASS" : "FAIL"}  ${check.name}`);
    lines.push(`      ${check.summary}`);
    for (const detail of check.details) lines.push(`      - ${detail}`);
  }
  lines.push("");
  const failed = checks.filter((c) => !c.ok).length;
  lines.push(failed === 0 ? "all checks passed" : `${failed} of ${checks.length} checks failed`);
  if (extra.runDir) lines.push(`run record: ${extra.runDir}`);
  return lines.join("\n");
}
