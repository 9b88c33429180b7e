// The chaos judge fails each check on a record that breaks it, and passes a clean one: a check that cannot
// fail would make a green chaos run mean nothing.
import { describe, expect, it } from "vitest";
import {
  checkCounter,
  checkCrashedHolders,
  checkFencing,
  checkFreeWait,
  checkPausedFollowerWaits,
  checkNoHang,
  checkSessionsSurvive,
  freeWaits,
  type RunRecord,
  runChecks,
  type WorkerRecord,
} from "./checks.ts";
import type { WorkerEvent } from "./events.ts";
import type { LockEvent } from "./monitor.ts";

const T0 = 1_000_000;
const L = "lock/";

/**
 * Two workers take the lock in turn, cleanly: w0 (lease 1, key lock/1) then w1 (lease 2, key lock/2), each
 * committing counter+1 once.
 */
function cleanRecord(): RunRecord {
  const w0: WorkerEvent[] = [
    { ev: "lease", t: T0, leaseId: "1" },
    { ev: "acquired", t: T0 + 20, key: `${L}1`, token: 10, leaseId: "1", waitStart: T0 + 5 },
    { ev: "commit-sent", t: T0 + 30, attempt: "w0.0", token: 10, logKey: "log/10.w0.0", value: 1 },
    { ev: "commit", t: T0 + 35, attempt: "w0.0", outcome: "ok" },
    { ev: "released", t: T0 + 40, key: `${L}1`, token: 10 },
    { ev: "call", op: "unlock", t0: T0 + 40, t: T0 + 45, budget: 5_000, ok: true },
  ];
  const w1: WorkerEvent[] = [
    { ev: "lease", t: T0 + 1, leaseId: "2" },
    { ev: "call", op: "lock", t0: T0 + 10, t: T0 + 60, budget: 15_000, ok: true },
    { ev: "acquired", t: T0 + 60, key: `${L}2`, token: 11, leaseId: "2", waitStart: T0 + 10 },
    { ev: "commit-sent", t: T0 + 70, attempt: "w1.0", token: 11, logKey: "log/11.w1.0", value: 2 },
    { ev: "commit", t: T0 + 75, attempt: "w1.0", outcome: "ok" },
    { ev: "released", t: T0 + 80, key: `${L}2`, token: 11 },
  ];
  const lockEvents: LockEvent[] = [
    { type: "put", key: `${L}1`, revision: 10, createRevision: 10, lease: "1", t: T0 + 15 },
    { type: "put", key: `${L}2`, revision: 11, createRevision: 11, lease: "2", t: T0 + 16 },
    { type: "delete", key: `${L}1`, revision: 13, createRevision: 10, lease: "1", t: T0 + 45 },
    { type: "delete", key: `${L}2`, revision: 15, createRevision: 11, lease: "2", t: T0 + 85 },
  ];
  const worker = (id: string, events: WorkerEvent[], lease: string): WorkerRecord => ({
    id,
    kind: { mode: "auto", wait: "watch", fetch: "global" },
    events,
    leases: [lease],
    stops: [],
    hungAtEnd: false,
  });
  return {
    settings: {
      durationMs: 60_000,
      faultKinds: [],
      seed: 1,
      workers: 2,
      ttl: 8,
      electionTimeoutMs: 1_000,
      pollInterval: 100,
      freeWaitBoundMs: 4_600,
      callSlackMs: 1_000,
      drainBoundMs: 45_000,
    },
    startedAt: T0,
    faultsEndedAt: T0 + 100,
    workersEndedAt: T0 + 200,
    workers: [worker("w0", w0, "1"), worker("w1", w1, "2")],
    lockEvents,
    historyComplete: true,
    leaderChanges: [],
    faults: [],
    holderFaults: [],
    counter: 2,
    logs: [
      { key: "log/10.w0.0", modRevision: 12, token: 10, value: 1, attempt: "w0.0" },
      { key: "log/11.w1.0", modRevision: 14, token: 11, value: 2, attempt: "w1.0" },
    ],
  };
}

const w = (record: RunRecord, id: string) => record.workers.find((x) => x.id === id)!;
const lockEvent = (record: RunRecord, type: "put" | "delete", key: string) =>
  record.lockEvents.find((e) => e.type === type && e.key === key)!;

describe("chaos checks", () => {
  it("a clean record passes every check", () => {
    const results = runChecks(cleanRecord());
    expect(results.filter((r) => !r.ok)).toEqual([]);
    expect(results).toHaveLength(7);
  });

  describe("counter", () => {
    it("fails when the counter and the log keys disagree", () => {
      const record = { ...cleanRecord(), counter: 3 };
      expect(checkCounter(record).ok).toBe(false);
    });

    it("fails when a reported commit left no log key (a success that did not happen)", () => {
      const record = cleanRecord();
      record.logs.pop();
      record.counter = 1;
      const result = checkCounter(record);
      expect(result.ok).toBe(false);
      expect(result.details.join()).toContain("w1.0: reported committed");
    });

    it("fails when one counter value was written twice (a lost update)", () => {
      const record = cleanRecord();
      record.logs[1]!.value = 1;
      expect(checkCounter(record).ok).toBe(false);
    });

    it("counts an indeterminate commit that landed, and passes", () => {
      const record = cleanRecord();
      const events = w(record, "w1").events;
      const commit = events.find((e) => e.ev === "commit")!;
      Object.assign(commit, { outcome: "error", code: "UNAVAILABLE" });
      const result = checkCounter(record);
      expect(result.ok).toBe(true);
      expect(result.summary).toContain("1 committed + 1 indeterminate that landed");
    });
  });

  describe("fencing", () => {
    it("fails when a smaller token commits after a larger one", () => {
      const record = cleanRecord();
      record.logs[0]!.modRevision = 16;
      expect(checkFencing(record).ok).toBe(false);
    });

    it("fails when a refused commit shows the counter moved under a lock still held", () => {
      const record = cleanRecord();
      w(record, "w1").events.push(
        { ev: "commit-sent", t: T0 + 76, attempt: "w1.1", token: 11, logKey: "log/11.w1.1", value: 2 },
        { ev: "commit", t: T0 + 77, attempt: "w1.1", outcome: "refused", ownKeyHeld: true, counterMoved: true },
      );
      expect(checkFencing(record).ok).toBe(false);
    });

    it("passes two commits under one key incarnation (one unbroken hold), and counts them", () => {
      const record = cleanRecord();
      record.logs[1]!.token = 10;
      const result = checkFencing(record);
      expect(result.ok).toBe(true);
      expect(result.summary).toContain("1 under the same key");
    });
  });

  describe("crashed or frozen holders", () => {
    const killed = (deleteAfterMs: number | undefined, leaderChangeAfterMs?: number) => {
      const record = cleanRecord();
      const at = T0 + 50;
      w(record, "w1").killedAt = at;
      record.holderFaults.push({ kind: "kill-holder", at, key: `${L}2`, createRevision: 11, lease: "2", worker: "w1" });
      const del = lockEvent(record, "delete", `${L}2`);
      if (deleteAfterMs === undefined) record.lockEvents.splice(record.lockEvents.indexOf(del), 1);
      else del.t = at + deleteAfterMs;
      if (leaderChangeAfterMs !== undefined)
        record.leaderChanges.push({ t: at + leaderChangeAfterMs, term: 3, leaderId: "9" });
      return record;
    };

    it("passes a lock freed within TTL + 1 s of the kill", () => {
      expect(checkCrashedHolders(killed(8_900)).ok).toBe(true);
    });

    it("fails a lock freed later than TTL + 1 s with no leader change", () => {
      expect(checkCrashedHolders(killed(9_200)).ok).toBe(false);
    });

    it("allows the lease refresh of a leader change: election timeout + TTL + 1 s from it", () => {
      expect(checkCrashedHolders(killed(12_000, 2_500)).ok).toBe(true);
      expect(checkCrashedHolders(killed(12_600, 2_500)).ok).toBe(false);
    });

    it("fails a lock never freed", () => {
      expect(checkCrashedHolders(killed(undefined)).ok).toBe(false);
    });

    it("fails when three holder faults were planned and none found a holder: it judged nothing", () => {
      const record = cleanRecord();
      const missed = "no live holder found within 3 s";
      const miss = (kind: "kill-holder" | "stop-holder") =>
        record.faults.push({ kind, t0: T0, t1: T0 + 3_000, detail: "", missed });
      miss("kill-holder");
      miss("stop-holder");
      // One or two may miss (no lock held during an outage).
      expect(checkCrashedHolders(record).ok).toBe(true);
      miss("kill-holder");
      const result = checkCrashedHolders(record);
      expect(result.ok).toBe(false);
      expect(result.details).toEqual(["none of the 3 holder faults found a holder: nothing was measured"]);
    });
  });

  describe("free waits", () => {
    it("measures from the predecessor's release to the next acquisition", () => {
      const [first, second] = freeWaits(cleanRecord()).waits;
      expect(first).toMatchObject({ worker: "w0", waitMs: 5 }); // joined an empty line at +15, took it at +20
      expect(second).toMatchObject({ worker: "w1", freeAt: T0 + 40, waitMs: 20 }); // w0 done at +40, w1 took it at +60
    });

    it("fails a waiter that takes a free lock late (it did not notice its turn)", () => {
      const record = cleanRecord();
      const acquired = w(record, "w1").events.find((e) => e.ev === "acquired")!;
      acquired.t = T0 + 45 + 5_000;
      expect(checkFreeWait(record).ok).toBe(false);
    });

    it("fails a release that leaves the key behind while someone waits (an unlock that did not delete)", () => {
      const record = cleanRecord();
      lockEvent(record, "delete", `${L}1`).t = T0 + 6_000;
      w(record, "w1").events.find((e) => e.ev === "acquired")!.t = T0 + 6_010;
      const result = checkFreeWait(record);
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("w1");
    });

    it(
      "counts from the delete instead when the predecessor " + "was frozen after its release (the crash check's case)",
      () => {
        const record = cleanRecord();
        lockEvent(record, "delete", `${L}1`).t = T0 + 6_000;
        w(record, "w1").events.find((e) => e.ev === "acquired")!.t = T0 + 6_010;
        w(record, "w0").stops.push({ from: T0 + 41, to: T0 + 6_500 });
        expect(checkFreeWait(record).ok).toBe(true);
      },
    );

    it("fails a waiter first in line that never takes the lock, and excludes it when it was frozen", () => {
      const record = cleanRecord();
      const events = w(record, "w1").events;
      events.splice(
        events.findIndex((e) => e.ev === "acquired"),
        1,
      );
      lockEvent(record, "delete", `${L}2`).t = T0 + 15_000;
      expect(checkFreeWait(record).ok).toBe(false);
      w(record, "w1").stops.push({ from: T0 + 1_000, to: T0 + 2_000 });
      expect(checkFreeWait(record).ok).toBe(true);
    });

    it("fails when the monitor's history is incomplete", () => {
      expect(checkFreeWait({ ...cleanRecord(), historyComplete: false }).ok).toBe(false);
    });
  });

  describe("waits inside a follower's pause", () => {
    const pause = (detail: string) => ({ kind: "pause-member" as const, t0: T0, t1: T0 + 10_000, detail });

    it("fails a watching waiter that took a free lock more than 1.5 s late during a follower's pause", () => {
      const record = cleanRecord();
      record.faults.push(pause("m1 for 10000 ms"));
      w(record, "w1").events.find((e) => e.ev === "acquired")!.t = T0 + 40 + 2_100;
      const result = checkPausedFollowerWaits(record);
      expect(result.ok).toBe(false);
      expect(result.details[0]).toContain("w1");
      w(record, "w1").events.find((e) => e.ev === "acquired")!.t = T0 + 40 + 1_900;
      expect(checkPausedFollowerWaits(record).ok).toBe(true);
    });

    it("judges the waiter from when the release landed: a holder's release stalled by the pause is not its", () => {
      const record = cleanRecord();
      record.faults.push(pause("m1 for 10000 ms"));
      // w0's delete went to the paused member first: it landed one request attempt (1.7 s) after w0 finished.
      lockEvent(record, "delete", `${L}1`).t = T0 + 40 + 1_700;
      w(record, "w1").events.find((e) => e.ev === "acquired")!.t = T0 + 40 + 1_700 + 400;
      const quick = checkPausedFollowerWaits(record);
      expect(quick.ok).toBe(true);
      expect(quick.summary).toContain("1 releases that landed over 1.5 s");
      w(record, "w1").events.find((e) => e.ev === "acquired")!.t = T0 + 40 + 1_700 + 2_100;
      const late = checkPausedFollowerWaits(record);
      expect(late.ok).toBe(false);
      expect(late.details[0]).toContain("for 2.10 s after the release landed (1.70 s after its holder finished)");
    });

    it("leaves to the free-wait bound a leader's pause, another fault at the same time, and polling waiters", () => {
      const late = (record: RunRecord) => {
        w(record, "w1").events.find((e) => e.ev === "acquired")!.t = T0 + 40 + 3_000;
        return record;
      };
      const leader = late(cleanRecord());
      leader.faults.push(pause("m0 (leader) for 10000 ms"));
      expect(checkPausedFollowerWaits(leader).ok).toBe(true);
      const both = late(cleanRecord());
      both.faults.push(pause("m1 for 10000 ms"), { kind: "reset", t0: T0 + 50, t1: T0 + 51, detail: "proxy of m2" });
      expect(checkPausedFollowerWaits(both).ok).toBe(true);
      const polling = late(cleanRecord());
      polling.faults.push(pause("m1 for 10000 ms"));
      w(polling, "w1").kind = { ...w(polling, "w1").kind, wait: "poll" };
      expect(checkPausedFollowerWaits(polling).ok).toBe(true);
    });
  });

  describe("no hang", () => {
    it("fails a call that settles past its budget + slack, unless its worker was frozen meanwhile", () => {
      const record = cleanRecord();
      const lock = w(record, "w1").events.find((e) => e.ev === "call" && e.op === "lock")!;
      if (lock.ev === "call") lock.t = lock.t0 + 15_000 + 1_500;
      expect(checkNoHang(record).ok).toBe(false);
      w(record, "w1").stops.push({ from: T0 + 100, to: T0 + 3_000 });
      expect(checkNoHang(record).ok).toBe(true);
    });

    it("fails an abandoned call, a worker hung at the end, and a run that ends late", () => {
      const abandoned = cleanRecord();
      w(abandoned, "w0").events.push({
        ev: "call",
        op: "txn",
        t0: T0,
        t: T0 + 10_000,
        budget: 5_000,
        ok: false,
        abandoned: true,
      });
      expect(checkNoHang(abandoned).ok).toBe(false);
      const hung = cleanRecord();
      w(hung, "w0").hungAtEnd = true;
      expect(checkNoHang(hung).ok).toBe(false);
      expect(checkNoHang({ ...cleanRecord(), workersEndedAt: T0 + 100 + 46_000 }).ok).toBe(false);
    });
  });

  describe("sessions survive", () => {
    it("fails a running worker told its session expired", () => {
      const record = cleanRecord();
      w(record, "w0").events.push({ ev: "lost", t: T0 + 50, op: "lock", code: "SESSION_EXPIRED", leaseId: "1" });
      expect(checkSessionsSurvive(record).ok).toBe(false);
    });

    it("prints the worker's SDK session and failover events before the loss, so CI's log can trace it", () => {
      const record = cleanRecord();
      const events = w(record, "w0").events;
      events.push({ ev: "sdk", t: T0 + 100, type: "session.renewed", leaseId: "1" });
      events.push({
        ev: "sdk",
        t: T0 + 2_000,
        type: "failover",
        from: "http://127.0.0.1:4001",
        to: "http://127.0.0.1:4002",
        code: "TIMEOUT",
      });
      events.push({ ev: "sdk", t: T0 + 3_000, type: "session.renewFailed", leaseId: "1", code: "UNAVAILABLE" });
      events.push({ ev: "lost", t: T0 + 9_000, op: "lock", code: "SESSION_EXPIRED", leaseId: "1" });
      const result = checkSessionsSurvive(record);
      expect(result.ok).toBe(false);
      const trace = result.details.find((line) => line.includes("its SDK events before"));
      expect(trace).toContain("renewed");
      expect(trace).toContain("failover :4001→:4002 TIMEOUT");
      expect(trace).toContain("renewFailed UNAVAILABLE");
    });

    it("excuses a worker frozen since its lease was granted", () => {
      const record = cleanRecord();
      w(record, "w0").events.push({ ev: "lost", t: T0 + 12_000, op: "unlock", code: "LOCK_LOST", leaseId: "1" });
      w(record, "w0").stops.push({ from: T0 + 100, to: T0 + 11_000 });
      expect(checkSessionsSurvive(record).ok).toBe(true);
    });

    it("counts apart a manual withLock whose fn and release outlasted its lease, at the lease's deadline", () => {
      const lost = (mode: "withlock-manual" | "manual", acquiredAt: number, lostAt: number) => {
        const record = cleanRecord();
        const worker = w(record, "w0");
        worker.kind = { ...worker.kind, mode };
        worker.events.push(
          { ev: "sdk", t: T0 + 1_000, type: "session.renewed", leaseId: "1" },
          { ev: "acquired", t: acquiredAt, key: "k", token: 900, leaseId: "1", waitStart: acquiredAt - 10 },
          { ev: "lost", t: lostAt, op: "withLock", code: "LOCK_LOST", leaseId: "1" },
        );
        return checkSessionsSurvive(record);
      };
      // Renewed at +1 s, taken at +3 s, lost at +9.2 s: the 8 s lease ran out under fn and its release.
      const outrun = lost("withlock-manual", T0 + 3_000, T0 + 9_200);
      expect(outrun.ok).toBe(true);
      expect(outrun.summary).toContain("1 by manual withLocks whose fn and release outlasted the lease");
      // Before the deadline, taken before the renewal, or a session that renews while it works: still a loss.
      expect(lost("withlock-manual", T0 + 3_000, T0 + 5_000).ok).toBe(false);
      expect(lost("withlock-manual", T0 + 500, T0 + 9_200).ok).toBe(false);
      expect(lost("manual", T0 + 3_000, T0 + 9_200).ok).toBe(false);
    });

    it("counts apart a loss right after a leader paused past the renewal slack resumed, and only that", () => {
      const paused = (ms: number, detail = "m0 (leader) for 6000 ms") => ({
        kind: "pause-member" as const,
        t0: T0 + 6_000,
        t1: T0 + 6_000 + ms,
        detail,
      });
      const lostAt = (t: number, faults: RunRecord["faults"]) => {
        const record = cleanRecord();
        record.faults = faults;
        w(record, "w0").events.push({ ev: "lost", t, op: "unlock", code: "LOCK_LOST", leaseId: "1" });
        return checkSessionsSurvive(record);
      };
      const revoked = lostAt(T0 + 12_150, [paused(6_000)]);
      expect(revoked.ok).toBe(true);
      expect(revoked.summary).toContain("1 right after a long-paused leader resumed");
      // Too late after the resume, a pause within the slack (2/3 of the 8 s TTL), or a paused follower: still a loss.
      expect(lostAt(T0 + 14_500, [paused(6_000)]).ok).toBe(false);
      expect(lostAt(T0 + 11_100, [paused(5_000)]).ok).toBe(false);
      expect(lostAt(T0 + 12_150, [paused(6_000, "m1 for 6000 ms")]).ok).toBe(false);
    });
  });
});
