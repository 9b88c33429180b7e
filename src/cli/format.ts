import type { Revoked } from "../lock/operate/revoke.js";
import type { EntryView, LockSummary, LockView } from "./lines.js";

/** Text for a person; `--json` prints the same data as JSON instead. */

export function formatList(locks: readonly LockSummary[]): string {
  if (locks.length === 0) return "no locks";
  const rows = locks.map((lock) => [
    lock.name,
    lock.kind,
    String(lock.holders),
    String(lock.waiters),
    lock.token === undefined ? "-" : String(lock.token),
  ]);
  const lines = table([["NAME", "KIND", "HOLDERS", "WAITERS", "TOKEN"], ...rows]);
  const problems = locks.filter((lock) => lock.problem !== undefined).map((lock) => `${lock.name}: ${lock.problem}`);
  return [...lines, ...problems].join("\n");
}

export function formatLock(name: string, view: LockView | undefined): string {
  if (view === undefined) return `${name}: free (no holder, nobody waiting)`;
  const kind = view.kind === "semaphore" ? `semaphore of ${view.permits} permits` : view.kind;
  const out = [`${name}: ${kind}, read at revision ${view.revision}`];
  for (const holder of view.holders) out.push(`  holder  ${describe(holder, view.revision)}`);
  for (const [i, waiter] of view.waiters.entries()) {
    out.push(`  waiter ${i + 1}  ${describe(waiter, view.revision)}`);
  }
  return out.join("\n");
}

export function formatAsked(verb: "revoke" | "request-release", name: string, done: Revoked | undefined): string {
  if (done === undefined) return `${name}: nothing held, nothing ${verb === "revoke" ? "revoked" : "asked"}`;
  const what = verb === "revoke" ? "revoked" : "asked to release";
  const lease = BigInt(done.leaseId).toString(16);
  return `${name}: ${what} ${done.key} (token ${done.token}, lease ${lease}): ${done.reason}`;
}

function describe(entry: EntryView, revision: number): string {
  const ttl = entry.ttl === undefined ? "" : `, ${entry.ttl} s left`;
  const ago = revision - entry.token;
  return `${entry.key}  token ${entry.token} (${ago} revision${ago === 1 ? "" : "s"} ago)  lease ${entry.lease}${ttl}`;
}

function table(rows: readonly string[][]): string[] {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map((row) =>
    row
      .map((cell, column) => cell.padEnd(widths[column]!))
      .join("  ")
      .trimEnd(),
  );
}
