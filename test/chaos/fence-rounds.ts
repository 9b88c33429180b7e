// The fence control of issue 39 (test/stores/control.ts) in rounds all through `npm run chaos`'s fault period,
// etcd reached through the same fault proxies as the workers': one round at a time, each store in turn, fenced
// then not. A fenced round must end exact, the frozen victim's write refused with LOCK_LOST; an unfenced one must
// lose the others' updates (the hazard shown, or the round tests nothing). The stores themselves are not faulted:
// what is under test is the lock's token checked where the data lives while etcd fails around it.
import { control, type Outcome, STORES, type StoreName, type Stores } from "../stores/control.ts";
import { wallNow } from "../support/time.ts";
import { type CheckResult, MAX_DETAILS } from "./checks.ts";

/** Two workers after the victim, each this many increments: a round lasts about ten seconds. */
const WORKERS = 2;
const INCREMENTS = 3;

export interface FenceRound {
  store: StoreName;
  fenced: boolean;
  /** When it started (ms since the epoch) and how long it took. */
  at: number;
  ms: number;
  outcome?: Outcome;
  /** Why it could not be carried out. */
  error?: string;
}

/** Rounds one after the other while `going()`, each on a name of its own under `prefix`. */
export async function fenceRounds(
  stores: Stores,
  endpoints: string[],
  prefix: string,
  going: () => boolean,
  log: (line: string) => void,
): Promise<FenceRound[]> {
  const rounds: FenceRound[] = [];
  for (let i = 0; going(); i++) {
    const store = STORES[Math.floor(i / 2) % STORES.length]!;
    const fenced = i % 2 === 0;
    const at = wallNow();
    const round: FenceRound = { store, fenced, at, ms: 0 };
    try {
      const name = `${prefix}r${i}`;
      const setting = { store, conn: stores.conns[store], fenced, endpoints, name };
      round.outcome = await control({ ...setting, workers: WORKERS, increments: INCREMENTS });
    } catch (error) {
      round.error = error instanceof Error ? error.message : String(error);
    }
    round.ms = wallNow() - at;
    rounds.push(round);
    log(`fence round ${i}: ${describe(round)}`);
  }
  return rounds;
}

function describe(round: FenceRound): string {
  const what = `${round.store}, ${round.fenced ? "fenced" : "unfenced"}, ${(round.ms / 1000).toFixed(1)} s`;
  if (round.error !== undefined) return `${what}: not carried out: ${round.error.split("\n")[0]}`;
  const { victim, incremented, final, lost } = round.outcome!;
  const said = victim.event === "refused" ? `refused (${victim.code})` : "wrote";
  return `${what}: ${incremented} increments acknowledged, the victim's write ${said}, final ${final}, lost ${lost}`;
}

/** Why a round fails the check, if it does. */
function fault(round: FenceRound): string | undefined {
  if (round.error !== undefined) return "it could not be carried out";
  const { victim, incremented, lost } = round.outcome!;
  if (round.fenced) {
    if (lost !== 0) return `the fenced store lost ${lost} acknowledged update(s)`;
    // Its token is the newest only when nobody incremented after it: then its write rightly lands.
    if (incremented > 0 && !(victim.event === "refused" && victim.code === "LOCK_LOST"))
      return "the victim's stale write was not refused with LOCK_LOST";
    return undefined;
  }
  if (incremented > 0 && lost === 0) return "without a fence nothing was lost: the control showed no hazard";
  return undefined;
}

export function fenceCheck(rounds: FenceRound[]): CheckResult {
  const name = "Fenced stores (issue 39's control)";
  const done = rounds.filter((r) => r.error === undefined);
  const fenced = done.filter((r) => r.fenced);
  const stores = new Set(fenced.map((r) => r.store)).size;
  const failing = rounds.flatMap((r) => {
    const why = fault(r);
    return why === undefined ? [] : [`${describe(r)}: ${why}`];
  });
  const lost = done.filter((r) => !r.fenced).reduce((sum, r) => sum + r.outcome!.lost, 0);
  const summary =
    `${rounds.length} rounds (${fenced.length} fenced, on ${stores} of ${STORES.length} stores): fenced ones lost ` +
    `${fenced.reduce((sum, r) => sum + r.outcome!.lost, 0)} updates, unfenced ones ${lost}`;
  const details = failing.slice(0, MAX_DETAILS);
  if (fenced.length === 0) details.push("no fenced round completed");
  return { name, ok: failing.length === 0 && fenced.length > 0, summary, details };
}
