import { describe, invalidArgument, locked } from "../errors/catalogue.js";
import type { ResponseHeader } from "../api/codec.js";
import { attempt, waitAfterJoin } from "./attempt.js";
import type { LeaseSession } from "./lease-session.js";
import type { LocalTurns } from "./local-turns.js";
import { MultiLock } from "./multi-lock.js";
import { deleteOwnKeys, joinAll, type Line } from "./multi-queue.js";
import type { LockOptions } from "./queue.js";
import { onlyContenders, readLine } from "./queue.js";
import { nameArg } from "./names.js";

/** Two requests per lock in the join (put and read), within etcd's default --max-txn-ops of 128. */
export const MAX_LOCKS = 64;

/**
 * Takes every lock of `names` at once, as one contender: its key in each lock's line (the mutex's key,
 * `<name>/<leaseHex>`, so plain mutex users of any of the names exclude it and are excluded by it) is put
 * in ONE transaction, so one create revision orders it in every line; it holds them all when it is first in
 * every line.
 *
 * Why this cannot deadlock: every contender (a multi-lock or a mutex) has one revision, and waits only for
 * keys with a lower one. A cycle of waits would need revisions that decrease all the way round, which is
 * impossible. Taking the locks one after another instead (lock a, then lock b) deadlocks as soon as
 * another caller takes b then a.
 *
 * It waits in one line at a time (one watch open, not one per name): a line found clear stays clear, since
 * everyone joining later is behind us. Each line is waited in as by a mutex (wait.ts): a watch on the key
 * just ahead, and one read when it goes; lines after the first that had to be waited in are read afresh.
 * The session's callers take local turns on the keys in sorted order, as a mutex does on its one key.
 */
export async function lockAll<S extends LeaseSession>(
  session: S,
  names: readonly string[],
  options: LockOptions = {},
): Promise<MultiLock<S>> {
  const checked = namesArg(names);
  const client = session.client;
  const lines: Line[] = checked.map((name) => ({ name, prefix: `${name}/`, key: `${name}/${session.leaseHex}` }));
  const keys = lines.map((line) => line.key);
  const leave = (revision: number | undefined) => deleteOwnKeys(client, keys, revision);
  return attempt(session, options, { kind: "locks", name: checked.join(", ") }, keys, leave, async (a) => {
    a.local = a.tryOnly ? tryTakeAll(session.turns, keys) : await takeAll(session.turns, keys, a.signal);
    if (a.local === undefined) throw locked(checked.join(", "), "another caller of this session");
    // Refused with LOCKED when keys of another contender of this lease are there: none of them is ours to delete.
    const joined = await a.join((call) => joinAll(client, lines, session.leaseId, call));
    let header: ResponseHeader = joined.header;
    let waited = false;
    for (const [i, line] of lines.entries()) {
      const state = joined.states[i]!;
      if (state.created && state.predecessor === undefined) continue;
      // A line whose join result is stale (we waited meanwhile) is read afresh.
      const start = waited ? { ...state, created: false } : state;
      header = await waitAfterJoin(
        client,
        a,
        line.name,
        (signal) => readLine(client, line.prefix, joined.revision, signal, onlyContenders),
        start,
      );
      waited = true;
    }
    return new MultiLock({ session, names: checked, keys, revision: joined.revision, header, releaseLocal: a.local });
  });
}

/**
 * The names of a multi-lock, checked before anything is sent: 1 to MAX_LOCKS distinct non-empty strings, no
 * one inside another's line (`a` and `a/b`: our key in `a/b`'s line would also be in `a`'s, ahead of us).
 */
export function namesArg(names: unknown): string[] {
  if (!Array.isArray(names) || names.length === 0)
    throw invalidArgument(`lockAll needs a non-empty array of lock names, got ${describe(names)}`);
  if (names.length > MAX_LOCKS)
    throw invalidArgument(`lockAll takes at most ${MAX_LOCKS} locks in one transaction, got ${names.length}`);
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
    if (inside !== undefined)
      throw invalidArgument(`lock ${inside} lies inside the line of lock ${a}: they cannot be taken together`);
  }
  return [...(names as string[])];
}

/** Local turns on every key, taken in sorted order so two multi-locks of one session never wait in a cycle. */
async function takeAll(turns: LocalTurns, keys: readonly string[], signal: AbortSignal): Promise<() => void> {
  const taken: Array<() => void> = [];
  try {
    for (const key of [...keys].sort()) taken.push(await turns.take(key, signal));
  } catch (error) {
    for (const release of taken) release();
    throw error;
  }
  return () => {
    for (const release of taken) release();
  };
}

function tryTakeAll(turns: LocalTurns, keys: readonly string[]): (() => void) | undefined {
  const taken: Array<() => void> = [];
  for (const key of [...keys].sort()) {
    const release = turns.tryTake(key);
    if (release === undefined) {
      for (const r of taken) r();
      return undefined;
    }
    taken.push(release);
  }
  return () => {
    for (const release of taken) release();
  };
}
