// The recipes' judge fails each check on a record that breaks it, and passes a clean one, as checks.test.ts
// shows for the mutex's.
import { describe, expect, it } from "vitest";
import type { GuardedRecord, LogEntry, RecipeRecord, RunRecord, WorkerRecord } from "./checks.ts";
import type { Recipe, WorkerEvent } from "./events.ts";
import type { LockEvent } from "./monitor.ts";
import {
  checkRecipeCounters,
  checkOrphanKeys,
  checkRecipeHolders,
  checkRecipeTokens,
  checkRecipeWaits,
  checkRWLock,
  checkSemaphore,
  checkSharedNames,
  entitlements,
  olderAlive,
  recipeChecks,
} from "./recipe-checks.ts";

const T0 = 1_000_000;
const L = "locks/";
const counters = { sem: "sem/counter", rw: "rw/counter", n0: "n0/counter", n1: "n1/counter" } as const;
type Counter = keyof typeof counters;

/**
 * Builds a record step by step as a run would: every store change takes the next revision and 10 ms, and the
 * monitor's events, the workers' reports, the log keys and the counters agree.
 */
class Scenario {
  revision = 100;
  t = T0;
  readonly lineEvents: LockEvent[] = [];
  readonly workers = new Map<string, WorkerRecord>();
  readonly logs: Record<Counter, LogEntry[]> = { sem: [], rw: [], n0: [], n1: [] };
  readonly leases = new Map<string, string>();
  #seq = 0;

  worker(id: string, recipe: Recipe, lease: string): this {
    this.leases.set(id, lease);
    this.workers.set(id, {
      id,
      kind: { mode: "auto", wait: "watch", fetch: "global", recipe },
      events: [{ ev: "lease", t: this.t, leaseId: lease }],
      leases: [lease],
      stops: [],
      hungAtEnd: false,
    });
    return this;
  }

  #tick(): number {
    this.t += 10;
    return this.t;
  }

  #emit(id: string, event: WorkerEvent): void {
    this.workers.get(id)!.events.push(event);
  }

  /** The worker says what it asks for next (lock names without the `locks/` prefix). */
  ask(id: string, ...names: string[]): this {
    const recipe = this.workers.get(id)!.kind.recipe!;
    this.#emit(id, { ev: "asking", t: this.#tick(), recipe, names: names.map((n) => L + n) });
    return this;
  }

  /** The worker's acquisition call fails now with `code`. */
  fail(id: string, op: "writeLock" | "acquire" | "lock", code: string): void {
    const t = this.#tick();
    this.#emit(id, { ev: "call", op, t0: t - 5, t, budget: 15_000, ok: false, code });
  }

  /** Puts the worker's keys in one revision; returns it (the token). */
  join(id: string, ...keys: string[]): number {
    const revision = ++this.revision;
    const t = this.#tick();
    for (const key of keys)
      this.lineEvents.push({
        type: "put",
        key: L + key,
        revision,
        createRevision: revision,
        lease: this.leases.get(id)!,
        t,
      });
    return revision;
  }

  /** The worker reports it holds `keys` (created at `token`), as of the current revision. */
  acquire(id: string, token: number, keys: string[], names: string[] = []): void {
    const recipe = this.workers.get(id)!.kind.recipe;
    const full = keys.map((k) => L + k);
    this.#emit(id, {
      ev: "acquired",
      t: this.#tick(),
      key: full[0]!,
      token,
      leaseId: this.leases.get(id)!,
      waitStart: T0,
      recipe,
      keys: full,
      names: names.map((n) => L + n),
      at: this.revision,
    });
  }

  /** A fenced increment of each counter, committed at the next revision. */
  commit(id: string, token: number, ...which: Counter[]): void {
    const attempt = `${id}.${this.#seq++}`;
    const revision = ++this.revision;
    const writes = which.map((c) => ({
      counterKey: counters[c],
      logKey: `${c}/log/${token}.${attempt}`,
      value: this.logs[c].length + 1,
    }));
    this.#emit(id, { ev: "fenced-sent", t: this.#tick(), attempt, token, writes });
    which.forEach((c, i) => {
      this.logs[c].push({ key: writes[i]!.logKey, modRevision: revision, token, value: writes[i]!.value, attempt });
    });
    this.#emit(id, { ev: "commit", t: this.#tick(), attempt, outcome: "ok" });
  }

  /** A reader's fenced read, at the current revision. */
  read(id: string, token: number, key: string, pass: number): void {
    const modRevision = this.logs.rw.at(-1)?.modRevision ?? 0;
    this.#emit(id, {
      ev: "read",
      t: this.#tick(),
      key: L + key,
      token,
      pass,
      outcome: "ok",
      revision: this.revision,
      modRevision,
    });
  }

  /** Reports done, then deletes the keys in one revision. */
  release(id: string, token: number, ...keys: string[]): void {
    this.#emit(id, { ev: "released", t: this.#tick(), key: L + keys[0]!, token });
    this.drop(id, token, ...keys);
  }

  /** Deletes keys in one revision (a release, a lease's end). */
  drop(id: string, token: number, ...keys: string[]): void {
    const revision = ++this.revision;
    const t = this.#tick();
    for (const key of keys)
      this.lineEvents.push({
        type: "delete",
        key: L + key,
        revision,
        createRevision: token,
        lease: this.leases.get(id)!,
        t,
      });
  }

  record(permits: number): RunRecord {
    const guarded = (c: Counter, name: string): GuardedRecord & { prefix: string } => ({
      name: L + name,
      prefix: `${L}${name}/`,
      counterKey: counters[c],
      counter: this.logs[c].length,
      logs: this.logs[c],
    });
    const recipes: RecipeRecord = {
      permits,
      semaphore: guarded("sem", "sem"),
      rwlock: { ...guarded("rw", "rw"), writers: `${L}rw/write/` },
      names: [guarded("n0", "n0"), guarded("n1", "n1")],
      lineEvents: this.lineEvents,
      holderFaults: [],
      leaveBoundMs: 11_000,
    };
    return {
      settings: {
        durationMs: 60_000,
        faultKinds: [],
        seed: 1,
        workers: 0,
        ttl: 8,
        electionTimeoutMs: 1_000,
        pollInterval: 50,
        freeWaitBoundMs: 5_550,
        callSlackMs: 1_000,
        drainBoundMs: 45_000,
      },
      startedAt: T0,
      faultsEndedAt: this.t + 100,
      workersEndedAt: this.t + 200,
      workers: [...this.workers.values()],
      lockEvents: [],
      historyComplete: true,
      leaderChanges: [],
      faults: [],
      holderFaults: [],
      counter: 0,
      logs: [],
      recipes,
    };
  }
}

/**
 * Two permits: s0 and s1 take them at once, s2 waits for s0. Then a reader, a writer queued behind it; then a
 * plain mutex holder of n0 and a lockAll of n0 and n1 queued behind it. Everyone commits once (the reader reads
 * twice) and releases.
 */
function cleanScenario(): Scenario {
  const s = new Scenario()
    .worker("s0", "semaphore", "1")
    .worker("s1", "semaphore", "2")
    .worker("s2", "semaphore", "3")
    .worker("r0", "reader", "4")
    .worker("w0", "writer", "5")
    .worker("m0", "name-mutex", "6")
    .worker("a0", "lock-all", "7");
  s.ask("s0", "sem")
    .ask("s1", "sem")
    .ask("s2", "sem")
    .ask("r0", "rw")
    .ask("w0", "rw")
    .ask("m0", "n0")
    .ask("a0", "n0", "n1");
  const a = s.join("s0", "sem/1-a");
  s.acquire("s0", a, ["sem/1-a"], ["sem"]);
  const b = s.join("s1", "sem/2-b");
  s.acquire("s1", b, ["sem/2-b"], ["sem"]);
  const c = s.join("s2", "sem/3-c");
  s.commit("s0", a, "sem");
  s.commit("s1", b, "sem");
  s.release("s0", a, "sem/1-a");
  s.acquire("s2", c, ["sem/3-c"], ["sem"]);
  s.commit("s2", c, "sem");
  s.release("s1", b, "sem/2-b");
  s.release("s2", c, "sem/3-c");

  const r = s.join("r0", "rw/read/4-a");
  s.acquire("r0", r, ["rw/read/4-a"], ["rw"]);
  const w = s.join("w0", "rw/write/5-a");
  s.read("r0", r, "rw/read/4-a", 0);
  s.read("r0", r, "rw/read/4-a", 1);
  s.release("r0", r, "rw/read/4-a");
  s.acquire("w0", w, ["rw/write/5-a"], ["rw"]);
  s.commit("w0", w, "rw");
  s.release("w0", w, "rw/write/5-a");

  const m = s.join("m0", "n0/6");
  s.acquire("m0", m, ["n0/6"], ["n0"]);
  const all = s.join("a0", "n0/7", "n1/7");
  s.commit("m0", m, "n0");
  s.release("m0", m, "n0/6");
  s.acquire("a0", all, ["n0/7", "n1/7"], ["n0", "n1"]);
  s.commit("a0", all, "n0", "n1");
  s.release("a0", all, "n0/7", "n1/7");
  return s;
}

const recipesOf = (record: RunRecord) => record.recipes!;
const events = (record: RunRecord, id: string) => record.workers.find((w) => w.id === id)!.events;

describe("recipe checks", () => {
  it("a clean record passes every recipe check", () => {
    const record = cleanScenario().record(2);
    const results = recipeChecks(record);
    expect(results.filter((r) => !r.ok)).toEqual([]);
    expect(results).toHaveLength(8);
    expect(checkSemaphore(record, recipesOf(record)).summary).toContain("at most 2 held at once");
  });

  it("a run without recipe workers has no recipe checks", () => {
    expect(recipeChecks({ ...cleanScenario().record(2), recipes: undefined })).toEqual([]);
  });

  it("olderAlive counts the keys of a prefix older than a token, alive after a revision", () => {
    const { lineEvents } = cleanScenario();
    const [atJoin, afterRelease] = olderAlive(lineEvents, [
      { revision: 103, prefix: `${L}sem/`, token: 103 },
      { revision: 106, prefix: `${L}sem/`, token: 103 },
    ]);
    expect([atJoin, afterRelease]).toEqual([2, 1]);
  });

  describe("counters", () => {
    it("fails a lost update on a recipe counter, naming the counter", () => {
      const record = cleanScenario().record(2);
      recipesOf(record).names[1]!.counter = 2;
      const result = checkRecipeCounters(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("n1: counter 2");
    });

    it("fails a value written twice under a lockAll", () => {
      const record = cleanScenario().record(2);
      recipesOf(record).names[0]!.logs[1]!.value = 1;
      expect(checkRecipeCounters(record, recipesOf(record)).ok).toBe(false);
    });
  });

  describe("semaphore", () => {
    it("fails a third holder of two permits admitted while two older permits were held", () => {
      const s = cleanScenario();
      // s2 reports it acquired at its join's revision, before s0 released.
      const acquired = s.workers.get("s2")!.events.find((e) => e.ev === "acquired")!;
      if (acquired.ev === "acquired") acquired.at = acquired.token;
      const record = s.record(2);
      const result = checkSemaphore(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.summary).toContain("at most 3 held at once");
      expect(result.details.join("\n")).toContain("s2 semaphore");
    });

    it("fails a commit landed by a permit that was still waiting", () => {
      const s = cleanScenario();
      s.logs.sem[1]!.token = 103; // s2's token, at s1's commit revision: two older permits alive then.
      const record = s.record(2);
      expect(checkSemaphore(record, recipesOf(record)).ok).toBe(false);
    });

    it("passes the same record with three permits", () => {
      const s = cleanScenario();
      const acquired = s.workers.get("s2")!.events.find((e) => e.ev === "acquired")!;
      if (acquired.ev === "acquired") acquired.at = acquired.token;
      const record = s.record(3);
      expect(checkSemaphore(record, recipesOf(record)).ok).toBe(true);
    });
  });

  describe("read-write lock", () => {
    it("fails a writer admitted while an older reader held the lock", () => {
      const s = cleanScenario();
      const acquired = s.workers.get("w0")!.events.find((e) => e.ev === "acquired")!;
      if (acquired.ev === "acquired") acquired.at = acquired.token;
      const record = s.record(2);
      const result = checkRWLock(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("a writer beside another holder");
    });

    it("fails when the counter moved between a reader's two fenced reads", () => {
      const record = cleanScenario().record(2);
      const second = events(record, "r0").filter((e) => e.ev === "read")[1]!;
      if (second.ev === "read") second.modRevision = 999;
      const result = checkRWLock(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details.join()).toContain("moved between its fenced reads");
    });

    it("fails a fenced read answered while an older writer was still in line", () => {
      const s = cleanScenario();
      const w = s.join("w0", "rw/write/5-b"); // A second writer queued ahead of a reader that reads anyway.
      s.worker("r1", "reader", "8").ask("r1", "rw");
      const r = s.join("r1", "rw/read/8-a");
      s.read("r1", r, "rw/read/8-a", 0);
      s.drop("r1", r, "rw/read/8-a");
      s.drop("w0", w, "rw/write/5-b");
      const record = s.record(2);
      const result = checkRWLock(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details.join()).toContain("r1 fenced read 0");
    });

    it("fails a writer's refused commit that found its lock held and the counter moved", () => {
      const record = cleanScenario().record(2);
      events(record, "w0").push(
        {
          ev: "fenced-sent",
          t: T0,
          attempt: "w0.9",
          token: 111,
          writes: [{ counterKey: counters.rw, logKey: "rw/log/x", value: 2 }],
        },
        { ev: "commit", t: T0, attempt: "w0.9", outcome: "refused", ownKeyHeld: true, counterMoved: true },
      );
      expect(checkRWLock(record, recipesOf(record)).ok).toBe(false);
    });
  });

  describe("shared names", () => {
    it("fails a lockAll that took n0 while the mutex holder still had it", () => {
      const s = cleanScenario();
      const acquired = s.workers.get("a0")!.events.find((e) => e.ev === "acquired")!;
      if (acquired.ev === "acquired") acquired.at = acquired.token;
      const record = s.record(2);
      const result = checkSharedNames(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("two holders of one name");
    });

    it("fails a lockAll commit that landed on n1 while it was not first in n1's line", () => {
      const s = cleanScenario();
      s.worker("m1", "name-mutex", "9").ask("m1", "n1");
      const m = s.join("m1", "n1/9");
      s.worker("a1", "lock-all", "10").ask("a1", "n0", "n1");
      const all = s.join("a1", "n0/a", "n1/a");
      s.commit("a1", all, "n0", "n1"); // m1 holds n1.
      s.drop("a1", all, "n0/a", "n1/a");
      s.drop("m1", m, "n1/9");
      const record = s.record(2);
      const result = checkSharedNames(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details.join()).toContain("n1 commit a1.");
    });

    it("fails a refused lockAll write that found its locks held and a counter moved", () => {
      const record = cleanScenario().record(2);
      events(record, "a0").push(
        {
          ev: "fenced-sent",
          t: T0,
          attempt: "a0.9",
          token: 117,
          writes: [{ counterKey: counters.n0, logKey: "n0/log/x", value: 3 }],
        },
        { ev: "commit", t: T0, attempt: "a0.9", outcome: "refused", ownKeyHeld: true, counterMoved: true },
      );
      expect(checkSharedNames(record, recipesOf(record)).ok).toBe(false);
    });
  });

  describe("tokens", () => {
    it("fails a smaller token committing after a larger one on a shared name", () => {
      const record = cleanScenario().record(2);
      recipesOf(record).names[0]!.logs[0]!.modRevision = 1_000;
      const result = checkRecipeTokens(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("n0:");
    });

    it("fails two permits with one token", () => {
      const record = cleanScenario().record(2);
      const second = events(record, "s1").find((e) => e.ev === "acquired")!;
      if (second.ev === "acquired") second.token = 101;
      expect(checkRecipeTokens(record, recipesOf(record)).ok).toBe(false);
    });
  });

  describe("orphan keys", () => {
    it("fails a permit's key created again after its release (a join landing late) that stands past the bound", () => {
      const landLate = (standMs: number) => {
        const s = cleanScenario();
        const late = s.join("s0", "sem/1-a");
        s.t += standMs;
        s.drop("s0", late, "sem/1-a");
        return s.record(2);
      };
      const record = landLate(20_000);
      const result = checkOrphanKeys(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("sem/1-a@");
      expect(result.details[0]).toContain("(s0)");
      // The orphan is not also counted as a waiter.
      expect(checkRecipeWaits(record, recipesOf(record)).summary).toContain("1 orphan keys");
      // Swept by its session within the bound, it passes.
      const swept = landLate(2_000);
      expect(checkOrphanKeys(swept, recipesOf(swept)).ok).toBe(true);
    });

    it(
      "fails a shared name's key put while its owner was asking for other names, " +
        "and does not count it as a waiter",
      () => {
        const s = cleanScenario();
        s.ask("m0", "n1");
        const late = s.join("m0", "n0/6"); // Its n0 join of before, landing now.
        s.t += 15_000;
        s.drop("m0", late, "n0/6");
        const record = s.record(2);
        const result = checkOrphanKeys(record, recipesOf(record));
        expect(result.ok).toBe(false);
        expect(result.details[0]).toContain("asking for n1");
        expect(checkRecipeWaits(record, recipesOf(record)).ok).toBe(true);
      },
    );

    it("fails a late shared-name key even when its session's next lock of that name adopts it", () => {
      const s = cleanScenario();
      s.ask("m0", "n1");
      const late = s.join("m0", "n0/6");
      s.t += 15_000;
      s.ask("m0", "n0");
      s.acquire("m0", late, ["n0/6"], ["n0"]);
      s.release("m0", late, "n0/6");
      const record = s.record(2);
      const result = checkOrphanKeys(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("adopted it");
      expect(checkRecipeWaits(record, recipesOf(record)).ok).toBe(true);
    });

    it("fails a key a failed acquisition left behind, and passes one deleted within the bound", () => {
      const left = (standMs: number) => {
        const s = cleanScenario();
        s.ask("w0", "rw");
        const w = s.join("w0", "rw/write/5-c");
        s.fail("w0", "writeLock", "UNAVAILABLE");
        s.t += standMs;
        s.drop("w0", w, "rw/write/5-c");
        const record = s.record(2);
        return checkOrphanKeys(record, recipesOf(record));
      };
      const result = left(20_000);
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("left behind by writeLock failing with UNAVAILABLE");
      expect(left(3_000).ok).toBe(true);
    });

    it("a pair that took one name owns the key it waits with in the other, until it fails", () => {
      const pair = (standMs: number) => {
        const s = cleanScenario();
        s.ask("m0", "n0", "n1");
        const first = s.join("m0", "n0/6");
        s.acquire("m0", first, ["n0/6"], ["n0"]);
        const second = s.join("m0", "n1/6"); // In line behind n1's holder, longer than the bound.
        s.t += 12_000;
        s.fail("m0", "lock", "TIMEOUT");
        s.release("m0", first, "n0/6");
        s.t += standMs;
        s.drop("m0", second, "n1/6");
        const record = s.record(2);
        return checkOrphanKeys(record, recipesOf(record));
      };
      expect(pair(3_000).ok).toBe(true);
      const left = pair(20_000);
      expect(left.ok).toBe(false);
      expect(left.details[0]).toContain("left behind by lock failing with TIMEOUT");
    });

    it("fails a copy of a join landing after its acquisition took a key in that line", () => {
      const s = cleanScenario();
      s.ask("m0", "n0", "n1");
      const taken = s.join("m0", "n0/6", "n1/6");
      s.acquire("m0", taken, ["n0/6"], ["n0"]);
      s.release("m0", taken, "n0/6");
      const copy = s.join("m0", "n0/6"); // An earlier send of the n0 join, held up inside etcd.
      s.t += 20_000;
      s.drop("m0", copy, "n0/6");
      s.drop("m0", taken, "n1/6");
      const record = s.record(2);
      const result = checkOrphanKeys(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("n0/6@");
      expect(result.details[0]).toContain("took a key in this line");
    });

    it("excuses a key left by a failed acquisition whose worker was frozen before it could leave", () => {
      const s = cleanScenario();
      s.ask("w0", "rw");
      const w = s.join("w0", "rw/write/5-c");
      s.fail("w0", "writeLock", "UNAVAILABLE");
      s.workers.get("w0")!.stops.push({ from: s.t + 1, to: s.t + 12_000 });
      s.t += 20_000;
      s.drop("w0", w, "rw/write/5-c");
      const record = s.record(2);
      expect(checkOrphanKeys(record, recipesOf(record)).ok).toBe(true);
    });

    it("passes a key made again by a later acquisition of its lease (Go's layout: one key per lease and name)", () => {
      const s = cleanScenario();
      s.ask("a0", "n1", "n0");
      const again = s.join("a0", "n0/7", "n1/7");
      s.acquire("a0", again, ["n0/7", "n1/7"], ["n0", "n1"]);
      s.release("a0", again, "n0/7", "n1/7");
      const record = s.record(2);
      expect(checkOrphanKeys(record, recipesOf(record)).ok).toBe(true);
    });
  });

  describe("waits once the line admits a contender", () => {
    it("finds when each contender became entitled, lockAll included", () => {
      const record = cleanScenario().record(2);
      const byKey = new Map(entitlements(recipesOf(record)).map((c) => [c.keys.join(","), c.entitledRevision]));
      expect(byKey.get(`${L}sem/3-c`)).toBe(106); // s0's release
      expect(byKey.get(`${L}rw/write/5-a`)).toBe(112); // the reader's release
      expect(byKey.get(`${L}n0/7,${L}n1/7`)).toBe(118); // the mutex holder's release
    });

    it("fails a contender that takes what it is entitled to late, and excludes it when it was frozen", () => {
      const record = cleanScenario().record(2);
      const acquired = events(record, "s2").find((e) => e.ev === "acquired")!;
      acquired.t += 6_000;
      const result = checkRecipeWaits(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("s2 (semaphore");
      record.workers.find((w) => w.id === "s2")!.stops.push({ from: T0, to: acquired.t });
      expect(checkRecipeWaits(record, recipesOf(record)).ok).toBe(true);
    });

    it("fails a lockAll entitled in both lines that never took them", () => {
      const s = cleanScenario();
      s.worker("a1", "lock-all", "10").ask("a1", "n0", "n1");
      const all = s.join("a1", "n0/a", "n1/a");
      s.t += 7_000;
      s.drop("a1", all, "n0/a", "n1/a");
      const record = s.record(2);
      const result = checkRecipeWaits(record, recipesOf(record));
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("never took it");
    });
  });

  describe("crashed or frozen recipe holders", () => {
    it("fails a killed holder's keys freed later than TTL + 1 s", () => {
      const s = cleanScenario();
      s.worker("a1", "lock-all", "10").ask("a1", "n0", "n1");
      const all = s.join("a1", "n0/a", "n1/a");
      s.acquire("a1", all, ["n0/a", "n1/a"], ["n0", "n1"]);
      const at = s.t;
      s.t += 9_500;
      s.drop("a1", all, "n0/a", "n1/a");
      const record = s.record(2);
      const recipes = recipesOf(record);
      record.workers.find((w) => w.id === "a1")!.killedAt = at;
      for (const key of ["n0/a", "n1/a"])
        recipes.holderFaults.push({
          kind: "kill-holder",
          at,
          key: L + key,
          createRevision: all,
          lease: "10",
          worker: "a1",
        });
      expect(checkRecipeHolders(record, recipes).ok).toBe(false);
      for (const f of recipes.holderFaults) f.at += 1_000;
      expect(checkRecipeHolders(record, recipes).ok).toBe(true);
    });
  });
});
