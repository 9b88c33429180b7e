// Leader election over a real etcd (Go's concurrency.Election semantics): campaign order, leader value,
// proclaim, resign, observe, withdrawal on abort/timeout, NOT_LEADER, key layout, fencing.
import { describe, it } from "vitest";
import { type Election, EtcdError, type Leader, op, type Session } from "../../src/index.js";
import { rejection, sleep, stillPending, until, within } from "../support/async.js";
import { acquisitionKey, client, keysUnder, uniqueName, useSessions } from "../support/etcd.js";

const etcd = client();
const newSession = useSessions(etcd, { ttl: 15 });

async function candidate(name: string): Promise<Election<Session>> {
  return (await newSession()).election(name);
}

/**
 * Starts a campaign and waits until its key is in the line (there are `position + 1` keys). Resolves to
 * `{ elected }`, wrapped so that awaiting the join does not await the election.
 */
async function join(
  election: Election,
  value: string,
  position: number,
  options: Parameters<Election["campaign"]>[1] = {},
) {
  const elected = election.campaign(value, options);
  elected.catch(() => {}); // observed by the caller; never an unhandled rejection
  await until(
    `candidate ${value} joined`,
    5_000,
    async () => (await keysUnder(etcd, election.name)).length === position + 1,
  );
  return { elected };
}

/** Collects what observe() yields until `count` leaders/values have been seen. */
function collect(election: Election, count: number, signal: AbortSignal): { seen: Leader[]; done: Promise<void> } {
  const seen: Leader[] = [];
  const done = (async () => {
    for await (const leader of election.observe({ signal })) {
      seen.push(leader);
      if (seen.length >= count) return;
    }
  })();
  done.catch(() => {});
  return { seen, done };
}

describe.concurrent("election", () => {
  it("candidates lead in campaign order; resign hands over to the next; leader() tells who leads with what", async ({
    expect,
  }) => {
    const name = uniqueName("elections");
    const [a, b, c] = [await candidate(name), await candidate(name), await candidate(name)];
    expect(await a.leader()).toBeUndefined();

    await a.campaign("a");
    expect(a.isLeader).toBe(true);
    const order: string[] = [];
    const pb = (await join(b, "b", 1)).elected.then(() => order.push("b"));
    const pc = (await join(c, "c", 2)).elected.then(() => order.push("c"));

    const first = await a.leader();
    expect(a.key).toMatch(acquisitionKey(name, a.session.leaseId));
    expect(first).toMatchObject({
      key: a.key,
      value: "a",
      leaseId: a.session.leaseId,
      revision: a.revision,
    });
    expect(await stillPending(pc, 300)).toBe(true);
    expect(order).toEqual([]);

    await a.resign();
    expect(a.isLeader).toBe(false);
    await within(5_000, "b leads", pb);
    const second = await b.leader();
    expect(second).toMatchObject({ key: b.key, value: "b", revision: b.revision });
    expect(b.key).toMatch(acquisitionKey(name, b.session.leaseId));
    expect(b.isLeader).toBe(true);
    expect(second!.revision).toBeGreaterThan(first!.revision);
    expect(await stillPending(pc, 200)).toBe(true);

    await b.resign();
    await within(5_000, "c leads", pc);
    const third = await c.leader();
    expect(third).toMatchObject({ value: "c", revision: c.revision });
    expect(third!.revision).toBeGreaterThan(second!.revision);
    expect(order).toEqual(["b", "c"]);
    await c.resign();
    expect(await c.leader()).toBeUndefined();
    expect(await keysUnder(etcd, name)).toEqual([]);
  });

  it("a waiting candidate is not the leader: isLeader false, ifLeader() and proclaim() are NOT_LEADER", async ({
    expect,
  }) => {
    const name = uniqueName("elections");
    const [a, b] = [await candidate(name), await candidate(name)];
    await a.campaign("a");
    const { elected: pb } = await join(b, "b", 1);

    // Soft: each of the four is a separate way a waiting candidate could act as the leader.
    expect.soft(b.isLeader, "isLeader of a waiting candidate").toBe(false);
    expect
      .soft(() => b.ifLeader(), "ifLeader() of a waiting candidate")
      .toThrowError(expect.objectContaining({ code: "NOT_LEADER" }));
    const proclaimed = await b.proclaim("b wants to lead").then(
      () => "resolved",
      (e: EtcdError) => e.code,
    );
    expect.soft(proclaimed, "proclaim() of a waiting candidate").toBe("NOT_LEADER");
    // The fence must not let a waiting candidate write as if it led.
    let fencedWrite: boolean | string;
    try {
      fencedWrite = (
        await etcd
          .txn()
          .if(b.ifLeader())
          .then(op.put(`${name}-data`, "b"))
          .commit()
      ).succeeded;
    } catch (error) {
      fencedWrite = (error as EtcdError).code;
    }
    expect.soft(fencedWrite, "fenced write of a waiting candidate").not.toBe(true);
    // The real leader's value is untouched, and b is still a candidate.
    expect((await a.leader())?.value).toBe("a");
    expect(await stillPending(pb, 100)).toBe(true);

    await a.resign();
    await within(5_000, "b elected", pb);
    expect(b.isLeader).toBe(true);
    await b.resign();
  });

  it(
    "proclaim updates the value without losing leadership; " +
      "observe yields every proclamation and the next leader, in order",
    async ({ expect }) => {
      const name = uniqueName("elections");
      const [a, b, watcher] = [await candidate(name), await candidate(name), await candidate(name)];
      const stop = new AbortController();
      // Start observing while nobody leads.
      const observed = collect(watcher, 5, stop.signal);
      await sleep(200);

      await a.campaign("a1");
      const revision = a.revision;
      await until("observed a1", 5_000, () => observed.seen.length >= 1);
      await a.proclaim("a2");
      expect(a.isLeader).toBe(true);
      expect(a.revision).toBe(revision);
      expect((await b.leader())?.value).toBe("a2");
      await until("observed a2", 5_000, () => observed.seen.length >= 2);
      await a.proclaim("a3");

      const { elected: pb } = await join(b, "b1", 1);
      await a.resign();
      await within(5_000, "b elected", pb);
      // After a leader change observe reads the new leader's current value (as Go's Observe does): a
      // proclamation made before that read would be reported instead of b1, so wait for b1 first.
      await until("observed b1", 5_000, () => observed.seen.length >= 4);
      await b.proclaim("b2");
      await within(5_000, "observer saw 5 values", observed.done);
      stop.abort();

      expect(observed.seen.map((l) => l.value)).toEqual(["a1", "a2", "a3", "b1", "b2"]);
      const [aKey, bKey] = observed.seen.map((l) => l.key).filter((key, i, all) => all.indexOf(key) === i);
      expect(aKey).toMatch(acquisitionKey(name, a.session.leaseId));
      expect(bKey).toMatch(acquisitionKey(name, b.session.leaseId));
      expect(observed.seen.map((l) => l.key)).toEqual([aKey, aKey, aKey, bKey, bKey]);
      expect(new Set(observed.seen.slice(0, 3).map((l) => l.revision))).toEqual(new Set([revision]));
      expect(observed.seen[3]!.revision).toBeGreaterThan(revision!);
      await b.resign();
    },
  );

  it("observe starts with the current leader", async ({ expect }) => {
    const name = uniqueName("elections");
    const [a, watcher] = [await candidate(name), await candidate(name)];
    await a.campaign("now");
    const stop = new AbortController();
    const observed = collect(watcher, 1, stop.signal);
    await within(5_000, "first observation", observed.done);
    expect(observed.seen[0]).toMatchObject({ key: a.key, value: "now", revision: a.revision });
    stop.abort();
    await a.resign();
  });

  it("observe ends promptly when its signal aborts", async ({ expect }) => {
    const name = uniqueName("elections");
    const watcher = await candidate(name);
    const stop = new AbortController();
    const observed = collect(watcher, 10, stop.signal);
    await sleep(300);
    stop.abort();
    const outcome = await within(
      3_000,
      "observe after abort",
      observed.done.then(
        () => "returned",
        (e: unknown) => e,
      ),
    );
    if (outcome !== "returned") {
      expect(outcome).toBeInstanceOf(EtcdError);
      expect((outcome as EtcdError).code).toBe("ABORTED");
    }
    expect(observed.seen).toEqual([]);
  });

  it("an aborted campaign withdraws the candidacy (ABORTED, no key left); a timed-out one too (TIMEOUT)", async ({
    expect,
  }) => {
    const name = uniqueName("elections");
    const [a, b, c] = [await candidate(name), await candidate(name), await candidate(name)];
    await a.campaign("a");
    const controller = new AbortController();
    const { elected: pb } = await join(b, "b", 1, { signal: controller.signal });
    expect((await keysUnder(etcd, name)).some((key) => acquisitionKey(name, b.session.leaseId).test(key))).toBe(true);
    controller.abort();
    expect((await rejection(pb)).code).toBe("ABORTED");
    expect(b.isLeader).toBe(false);
    expect(await keysUnder(etcd, name)).toEqual([a.key]);

    const error = await rejection(c.campaign("c", { timeout: 400 }));
    expect(error.code).toBe("TIMEOUT");
    expect(await keysUnder(etcd, name)).toEqual([a.key]);

    // With both withdrawn, a's resignation leaves nobody leading.
    await a.resign();
    expect(await a.leader()).toBeUndefined();
  });

  it("a non-candidate cannot proclaim (NOT_LEADER); resign without campaigning is a no-op", async ({ expect }) => {
    const name = uniqueName("elections");
    const [a, b] = [await candidate(name), await candidate(name)];
    await a.campaign("a");
    expect((await rejection(b.proclaim("x"))).code).toBe("NOT_LEADER");
    expect(() => b.ifLeader()).toThrowError(expect.objectContaining({ code: "NOT_LEADER" }));
    await b.resign();
    expect((await a.leader())?.value).toBe("a");
    // After resigning, the former leader can no longer proclaim either.
    await a.resign();
    expect((await rejection(a.proclaim("late"))).code).toBe("NOT_LEADER");
    expect(await a.leader()).toBeUndefined();
  });

  it("leader keys are `<name>/<leaseIdHex>_<16 hex>`: the campaign's own, under Go's layout", async ({ expect }) => {
    const name = uniqueName("elections");
    const a = await candidate(name);
    await a.campaign("v");
    const { kvs } = await etcd.range({ prefix: `${name}/` });
    expect(kvs).toHaveLength(1);
    expect(kvs[0]!.key).toMatch(acquisitionKey(name, a.session.leaseId));
    expect(kvs[0]!.lease).toBe(a.session.leaseId);
    expect(kvs[0]!.value).toBe("v");
    expect(a.key).toBe(kvs[0]!.key);
    expect(a.revision).toBe(kvs[0]!.createRevision);
    await a.resign();
  });

  it("ifLeader() fences writes: it holds while leading and refuses a deposed leader's write", async ({ expect }) => {
    const name = uniqueName("elections");
    const data = `${name}-data`;
    const [a, b] = [await candidate(name), await candidate(name)];
    await a.campaign("a");
    expect((await etcd.txn().if(a.ifLeader()).then(op.put(data, "from a")).commit()).succeeded).toBe(true);
    const fenceOfA = a.ifLeader();

    const { elected: pb } = await join(b, "b", 1);
    // a loses its lease (a crash, say): b takes over, and a's fence no longer holds.
    await etcd.lease.revoke(a.session.leaseId);
    await within(5_000, "b elected", pb);
    expect((await etcd.txn().if(fenceOfA).then(op.put(data, "stale a")).commit()).succeeded).toBe(false);
    expect((await etcd.txn().if(b.ifLeader()).then(op.put(data, "from b")).commit()).succeeded).toBe(true);
    expect((await etcd.get(data))?.value).toBe("from b");
    expect(b.revision!).toBeGreaterThan(a.revision!);
    await b.resign();
  });

  it("campaigning again while leading proclaims the new value and keeps the key", async ({ expect }) => {
    const name = uniqueName("elections");
    const a = await candidate(name);
    await a.campaign("first");
    const [key, revision] = [a.key, a.revision];
    await a.campaign("second");
    expect([a.key, a.revision]).toEqual([key, revision]);
    expect((await a.leader())?.value).toBe("second");
    expect(await keysUnder(etcd, name)).toEqual([key]);
    await a.resign();
  });

  it("two elections of one session are two candidates: the second leads once the first resigns", async ({ expect }) => {
    const name = uniqueName("elections");
    const a = await candidate(name);
    await a.campaign("first");
    const [firstKey, firstRevision] = [a.key, a.revision!];
    const again = a.session.election(name);
    const second = again.campaign("second");
    expect(await stillPending(second, 300)).toBe(true);
    expect(again.isLeader).toBe(false);
    expect((await a.leader())?.value).toBe("first");
    await a.resign();
    await within(5_000, "the second election leads", second);
    expect(again.key).not.toBe(firstKey);
    expect(again.revision!).toBeGreaterThan(firstRevision);
    await again.resign();
  });
});
