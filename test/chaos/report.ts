// The chaos run's report: what was done to the cluster, what the workers got, and each check's verdict.
import { type Attempt, attempts, type CheckResult, type RunRecord } from "./checks.ts";
import { recipeAttempts } from "./recipe-checks.ts";

export interface Figures {
  /** The mutex's. */
  acquisitions: number;
  acquisitionsByMode: Record<string, number>;
  /**
   * Per recipe (events.ts `Recipe`): acquisitions, its workers' fenced commits (a lockAll's counted once), and
   * the requests that carried joins or releases of several of its locks.
   */
  recipes: Record<
    string,
    { acquisitions: number; commits: Record<Attempt["outcome"], number>; reads: number; batched: number }
  >;
  commits: Record<"ok" | "refused" | "error" | "unreported", number>;
  /** Refused commits whose lock key was gone: stale holders stopped by ifHeld(). */
  fencedOut: number;
  /** Failed calls of the mutex workers, `op code` → count. */
  failures: Record<string, number>;
  /** Failed calls of the recipe workers, `recipe op code` → count. */
  recipeFailures: Record<string, number>;
  faults: Record<string, { injected: number; missed: number }>;
  leaderChanges: number;
  workersSpawned: number;
}

export function figures(record: RunRecord): Figures {
  const acquisitionsByMode: Record<string, number> = {};
  const failures: Record<string, number> = {};
  const recipeFailures: Record<string, number> = {};
  const recipes: Figures["recipes"] = {};
  let acquisitions = 0;
  for (const w of record.workers) {
    const recipe = w.kind.recipe;
    const mine =
      recipe === undefined
        ? undefined
        : (recipes[recipe] ??= {
            acquisitions: 0,
            commits: { ok: 0, refused: 0, error: 0, unreported: 0 },
            reads: 0,
            batched: 0,
          });
    for (const e of w.events) {
      if (mine !== undefined) {
        if (e.ev === "acquired") mine.acquisitions++;
        else if (e.ev === "read" && e.outcome === "ok") mine.reads++;
        else if (e.ev === "sdk" && e.type === "batch") mine.batched++;
        else if (e.ev === "call" && !e.ok) {
          const key = `${recipe} ${e.op} ${e.code ?? "?"}`;
          recipeFailures[key] = (recipeFailures[key] ?? 0) + 1;
        }
        continue;
      }
      if (e.ev === "acquired") {
        acquisitions++;
        acquisitionsByMode[`${w.kind.mode}/${w.kind.wait}`] =
          (acquisitionsByMode[`${w.kind.mode}/${w.kind.wait}`] ?? 0) + 1;
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
  // Each attempt once, with the recipe of the worker that made it.
  const seen = new Set<string>();
  const recipeOf = new Map(record.workers.map((w) => [w.id, w.kind.recipe]));
  for (const list of recipeAttempts(record).values()) {
    for (const a of list) {
      const recipe = recipeOf.get(a.worker);
      if (recipe === undefined || seen.has(`${a.worker}|${a.attempt}`)) continue;
      seen.add(`${a.worker}|${a.attempt}`);
      recipes[recipe]!.commits[a.outcome]++;
    }
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
    recipes,
    commits,
    fencedOut,
    failures,
    recipeFailures,
    faults,
    leaderChanges: record.leaderChanges.length,
    workersSpawned: record.workers.length,
  };
}

export function formatReport(
  record: RunRecord,
  checks: CheckResult[],
  extra: { runDir?: string | undefined } = {},
): string {
  const f = figures(record);
  const s = record.settings;
  const lines: string[] = [];
  const seconds = (record.faultsEndedAt - record.startedAt) / 1000;
  lines.push(
    `chaos: ${seconds.toFixed(0)} s of faults, ` +
      `seed ${s.seed}, ${s.workers} workers (${f.workersSpawned} processes with respawns), TTL ${s.ttl} s`,
  );
  if (s.faultKinds.length === 0) lines.push("faults: none (--faults none)");
  else
    lines.push(
      `faults: ${Object.entries(f.faults)
        .map(([k, v]) => `${k} ${v.injected}${v.missed ? ` (+${v.missed} missed)` : ""}`)
        .join(", ")}; leader changes seen ${f.leaderChanges}`,
    );
  lines.push(
    `mutex acquisitions: ${f.acquisitions} (${(f.acquisitions / seconds).toFixed(1)}/s) — ${Object.entries(
      f.acquisitionsByMode,
    )
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`,
  );
  lines.push(
    `fenced commits: ${f.commits.ok} ok, ${f.commits.refused} refused (${f.fencedOut} stale holders fenced out), ` +
      `${f.commits.error} failed, ${f.commits.unreported} unreported (worker killed or call abandoned)`,
  );
  if (record.recipes !== undefined) {
    lines.push(
      `recipes (semaphore of ${record.recipes.permits} permits): ` +
        Object.entries(f.recipes)
          .map(([recipe, r]) => {
            const c = r.commits;
            const did =
              recipe === "reader"
                ? `${r.reads} fenced reads`
                : `commits ${c.ok} ok, ${c.refused} refused, ${c.error} failed, ${c.unreported} unreported`;
            return (
              `${recipe} ${r.acquisitions} acquisitions ` +
              `(${did}${r.batched > 0 ? `; ${r.batched} requests of joins or releases together` : ""})`
            );
          })
          .join("; "),
    );
  }
  const failures = Object.entries(f.failures).sort((a, b) => b[1] - a[1]);
  lines.push(`failed calls: ${failures.length === 0 ? "none" : failures.map(([k, v]) => `${k} ×${v}`).join(", ")}`);
  if (record.recipes !== undefined) {
    const recipeFailures = Object.entries(f.recipeFailures).sort((a, b) => b[1] - a[1]);
    lines.push(
      `failed recipe ` +
        `calls: ${recipeFailures.length === 0 ? "none" : recipeFailures.map(([k, v]) => `${k} ×${v}`).join(", ")}`,
    );
  }
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
