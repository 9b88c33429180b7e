// lockAll under real contention on real etcd: many contenders taking overlapping sets of names, beside plain
// mutex users of single names, never deadlock (every call bounded by a timeout that would fail the test) and
// never hold a name twice (an overlap detector, and per-name counters written only by fenced compare-and-swap
// transactions), with requests per acquisition counted and nothing left behind.
import { describe, expect, it } from "vitest";
import { cmp, type Compare, op } from "../../src/index.js";
import { sleep, within } from "../support/async.js";
import { client, recordingFetch, uniqueName, useSessions } from "../support/etcd.js";

const etcd = client();
const newSession = useSessions(etcd, { ttl: 20 });

/** A small seeded generator, so a failing mix of name sets can be replayed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("lockAll on real etcd", () => {
  it(
    "10 contenders x 6 rounds on overlapping sets of 5 names, " +
      "beside 3 mutex users: no deadlock, no name held twice, no lost update",
    async () => {
      const CONTENDERS = 10;
      const MUTEX_USERS = 3;
      const ROUNDS = 6;
      const seed = Date.now() % 100_000;
      const next = random(seed);
      const base = uniqueName("all");
      const names = Array.from({ length: 5 }, (_, i) => `${base}-${i}`);
      const counter = (name: string) => `${name}-counter`;

      const holding = new Map<string, number>();
      const expected = new Map<string, number>();
      const violations: string[] = [];
      const requests: number[] = [];

      /** Under the locks: each name's counter + 1, in one transaction fenced by every lock and a CAS per counter. */
      const work = async (held: string[], fences: Compare[]) => {
        for (const name of held) {
          holding.set(name, (holding.get(name) ?? 0) + 1);
          if (holding.get(name)! > 1) violations.push(`${name} held twice`);
          expected.set(name, (expected.get(name) ?? 0) + 1);
        }
        try {
          const current = await Promise.all(held.map((name) => etcd.get(counter(name))));
          await sleep(2);
          const result = await etcd
            .txn()
            .if(...fences, ...held.map((name, i) => cmp.modRevision(counter(name), "==", current[i]?.modRevision ?? 0)))
            .then(...held.map((name, i) => op.put(counter(name), String(Number(current[i]?.value ?? "0") + 1))))
            .commit();
          if (!result.succeeded) violations.push(`fenced write on ${held.join(",")} refused`);
        } finally {
          for (const name of held) holding.set(name, holding.get(name)! - 1);
        }
      };

      const sets = Array.from({ length: CONTENDERS }, () =>
        Array.from({ length: ROUNDS }, () => {
          const size = 2 + Math.floor(next() * 2);
          return [...names].sort(() => next() - 0.5).slice(0, size);
        }),
      );
      const singles = Array.from({ length: MUTEX_USERS }, () =>
        Array.from({ length: ROUNDS }, () => names[Math.floor(next() * names.length)]!),
      );

      const contenders = await Promise.all(
        Array.from({ length: CONTENDERS }, async () => {
          const fetch = recordingFetch();
          return { fetch, session: await newSession({}, client({ fetch })) };
        }),
      );
      const mutexUsers = await Promise.all(Array.from({ length: MUTEX_USERS }, () => newSession()));
      const started = performance.now();
      await within(
        60_000,
        `every contender (seed ${seed})`,
        Promise.all([
          ...contenders.map(async ({ session, fetch }, c) => {
            for (const set of sets[c]!) {
              const mark = fetch.mark();
              // A deadlock would leave this waiting: the timeout turns it into a failure.
              const locks = await session.lockAll(set, { timeout: 30_000 });
              requests.push(fetch.since(mark).length);
              expect(locks.ifHeld()).toHaveLength(set.length);
              try {
                await work(set, locks.ifHeld());
              } finally {
                await locks.unlock();
              }
            }
          }),
          ...mutexUsers.map(async (session, m) => {
            for (const name of singles[m]!) {
              const lock = await session.mutex(name).lock({ timeout: 30_000 });
              try {
                await work([name], [lock.ifHeld()]);
              } finally {
                await lock.unlock();
              }
            }
          }),
        ]),
      );
      const elapsed = performance.now() - started;

      expect(violations).toEqual([]);
      for (const name of names) {
        expect(Number((await etcd.get(counter(name)))?.value ?? "0")).toBe(expected.get(name) ?? 0);
        expect((await etcd.range({ prefix: `${name}/`, countOnly: true })).count).toBe(0);
      }
      const sorted = [...requests].sort((a, b) => a - b);
      console.info(
        `lockAll (seed ${seed}): ${CONTENDERS * ROUNDS} ` +
          `multi-locks of 2-3 of 5 names and ${MUTEX_USERS * ROUNDS} mutex locks in ${Math.round(elapsed)} ms; ` +
          `requests per lockAll: ${sorted.filter((r) => r === 1).length} took 1, ` +
          `median ${sorted[sorted.length >> 1]}, max ${sorted[sorted.length - 1]}`,
      );
    },
  );
});
