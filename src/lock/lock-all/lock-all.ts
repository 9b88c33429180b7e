import { describe, invalidArgument, locked } from "../../errors/catalogue.js";
import { traceLock } from "../../events/channels.js";
import { Acquisition, type LockOptions } from "../acquire/acquisition.js";
import { nameArg, newKey } from "../line/keys.js";
import { lineReader } from "../line/read.js";
import { waitForTurn } from "../line/wait.js";
import type { LeaseSession } from "../lease/lease-session.js";
import { JoinAll, type MultiLine } from "./join-all.js";
import { MultiLock } from "./multi-lock.js";

/** Two requests per lock in the join (put and read), within etcd's default --max-txn-ops of 128. */
export const MAX_LOCKS = 64;

/**
 * Takes every lock of `names` at once, as one contender: its key in each lock's line (a mutex's key, so plain
 * mutex users of any of the names exclude it and are excluded by it) is put in ONE transaction, so one create
 * revision orders it in every line; it holds them all when it is first in every line.
 *
 * Why this cannot deadlock: every contender (a multi-lock or a mutex) has one revision, and waits only for
 * keys with a lower one. A cycle of waits would need revisions that decrease all the way round, which is
 * impossible. Taking the locks one after another instead (lock a, then lock b) deadlocks as soon as
 * another caller takes b then a.
 *
 * It waits in one line at a time (one watch open, not one per name): a line found clear stays clear, since
 * everyone joining later is behind us. Each line is waited in as by a mutex (line/wait.ts): a watch on the key
 * just ahead, and one read when it goes; lines after the first that had to be waited in are read afresh.
 */
export async function lockAll<S extends LeaseSession>(
  session: S,
  names: readonly string[],
  options: LockOptions = {},
): Promise<MultiLock<S>> {
  const checked = namesArg(names);
  return traceLock("locks", checked, options, () => takeAll(session, checked, options));
}

async function takeAll<S extends LeaseSession>(
  session: S,
  checked: string[],
  options: LockOptions,
): Promise<MultiLock<S>> {
  const client = session.client;
  const lines: MultiLine[] = checked.map((name) => {
    const prefix = `${name}/`;
    return { name, prefix, key: newKey(prefix, session.leaseId, "mutex") };
  });
  const keys = lines.map((line) => line.key);
  const puts = keys.map((key) => ({ key, value: "" }));
  const acquisition = new Acquisition(session, options, { kind: "locks", name: checked.join(", ") }, puts);
  try {
    const joined = await acquisition.join(new JoinAll(client, lines, session.leaseId));
    const { revision } = joined;
    let header = joined.header;
    let waited = false;
    for (const [i, line] of lines.entries()) {
      const read = lineReader(client, line.prefix, revision, "mutex");
      // A line whose join result is stale (we waited meanwhile, or an earlier send made our keys) is read afresh,
      // and that read is the latest that shows where we stand.
      const stale = !joined.created || waited;
      const start = stale ? await read({ signal: acquisition.signal }) : joined.standings[i]!;
      if (stale) header = start.header;
      if (start.present && start.predecessor === undefined) continue;
      if (start.present && acquisition.tryOnly) throw locked(line.name, start.predecessor!.key);
      if (!waited) acquisition.waiting();
      header = await waitForTurn(client, read, start, acquisition, { key: line.key, createRevision: revision });
      waited = true;
    }
    return acquisition.hold(new MultiLock({ session, names: checked, keys, revision, header }));
  } catch (error) {
    throw await acquisition.fail(error);
  } finally {
    acquisition.dispose();
  }
}

/**
 * The names of a multi-lock, checked before anything is sent: 1 to MAX_LOCKS distinct non-empty strings, no
 * one inside another's line (`a` and `a/b`: our key in `a/b`'s line would also be in `a`'s, ahead of us).
 */
export function namesArg(names: unknown): string[] {
  if (!Array.isArray(names) || names.length === 0) {
    throw invalidArgument(`lockAll needs a non-empty array of lock names, got ${describe(names)}`);
  }
  if (names.length > MAX_LOCKS) {
    throw invalidArgument(`lockAll takes at most ${MAX_LOCKS} locks in one transaction, got ${names.length}`);
  }
  for (const name of names) {
    nameArg(name, "a lock");
  }
  const sorted = [...(names as string[])].sort();
  for (let i = 1; i < sorted.length; i++) {
    const [before, name] = [sorted[i - 1]!, sorted[i]!];
    if (before === name) throw invalidArgument(`lockAll got lock ${name} twice`);
  }
  for (const a of sorted) {
    const inside = sorted.find((b) => b.startsWith(`${a}/`));
    if (inside !== undefined) {
      throw invalidArgument(`lock ${inside} lies inside the line of lock ${a}: they cannot be taken together`);
    }
  }
  return [...(names as string[])];
}
