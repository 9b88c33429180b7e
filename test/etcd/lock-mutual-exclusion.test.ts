// Mutual exclusion under real contention: many sessions hammering one lock, each doing a fenced
// read-modify-write. Any overlap of holders, lost update, or non-monotonic fencing token fails the test.
import { describe, expect, it } from "vitest";
import { op, type Session } from "../../src/index.js";
import { client, uniqueName, useSessions } from "../support/etcd.js";

const etcd = client();
const newSession = useSessions(etcd, { ttl: 10 });

describe("mutual exclusion", () => {
  it("20 sessions x 10 acquisitions: never two holders, no lost update, fencing tokens strictly increase", async () => {
    const SESSIONS = 20;
    const ROUNDS = 10;
    const name = uniqueName();
    const counter = `${name}-counter`;
    await etcd.put(counter, "0");

    let holders = 0;
    let maxHolders = 0;
    const tokens: number[] = [];
    const failedWrites: string[] = [];

    const worker = async (session: Session) => {
      const mutex = session.mutex(name);
      for (let round = 0; round < ROUNDS; round++) {
        const lock = await mutex.lock({ timeout: 50_000 });
        holders++;
        maxHolders = Math.max(maxHolders, holders);
        tokens.push(lock.revision);
        try {
          const current = await etcd.get(counter);
          const n = Number(current?.value);
          // Yield to the event loop so an overlapping holder, if any, would interleave here.
          await new Promise((resolve) => setImmediate(resolve));
          const result = await etcd
            .txn()
            .if(lock.ifHeld())
            .then(op.put(counter, String(n + 1)))
            .commit();
          if (!result.succeeded) failedWrites.push(`${lock.key}@${lock.revision}`);
          expect(lock.held).toBe(true);
        } finally {
          holders--;
          await lock.unlock();
        }
      }
    };

    const all = await Promise.all(Array.from({ length: SESSIONS }, () => newSession()));
    const started = performance.now();
    await Promise.all(all.map(worker));
    const elapsed = performance.now() - started;

    expect(maxHolders).toBe(1);
    expect(failedWrites).toEqual([]);
    expect(Number((await etcd.get(counter))?.value)).toBe(SESSIONS * ROUNDS);
    expect(tokens).toHaveLength(SESSIONS * ROUNDS);
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!);
    // Nothing left behind: every waiter's key was deleted on unlock.
    expect((await etcd.range({ prefix: `${name}/` })).count).toBe(0);
    console.info(`mutual exclusion: ${SESSIONS * ROUNDS} acquisitions in ${Math.round(elapsed)} ms`);
  });

  it("inventory: 30 buyers drain a stock of 100 to exactly 0, 100 sales, never negative", async () => {
    const BUYERS = 30;
    const STOCK = 100;
    const name = uniqueName();
    const stockKey = `${name}-stock`;
    await etcd.put(stockKey, String(STOCK));

    const sales: number[] = [];
    const observed: number[] = [];
    let holders = 0;
    let maxHolders = 0;
    let failedWrites = 0;

    const buyer = async (session: Session, id: number) => {
      const mutex = session.mutex(name);
      // Bounded: a buyer can never need more than STOCK + 1 turns.
      for (let turn = 0; turn <= STOCK; turn++) {
        const lock = await mutex.lock({ timeout: 50_000 });
        holders++;
        maxHolders = Math.max(maxHolders, holders);
        try {
          const stock = Number((await etcd.get(stockKey))?.value);
          observed.push(stock);
          if (stock <= 0) return;
          await new Promise((resolve) => setImmediate(resolve));
          const result = await etcd
            .txn()
            .if(lock.ifHeld())
            .then(op.put(stockKey, String(stock - 1)))
            .commit();
          if (result.succeeded) sales.push(id);
          else failedWrites++;
        } finally {
          holders--;
          await lock.unlock();
        }
      }
      throw new Error(`buyer ${id} never saw the stock run out`);
    };

    const all = await Promise.all(Array.from({ length: BUYERS }, () => newSession()));
    await Promise.all(all.map((s, i) => buyer(s, i)));

    expect(maxHolders).toBe(1);
    expect(failedWrites).toBe(0);
    expect(Number((await etcd.get(stockKey))?.value)).toBe(0);
    expect(sales).toHaveLength(STOCK);
    expect(Math.min(...observed)).toBe(0);
    // Every read saw the previous holder's write: the stock values read are 100, 99, ..., 1, then 0s.
    const positive = observed.filter((s) => s > 0);
    expect(positive).toEqual(Array.from({ length: STOCK }, (_, i) => STOCK - i));
    expect(observed.filter((s) => s === 0)).toHaveLength(BUYERS);
  });
});
