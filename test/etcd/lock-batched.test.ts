// Joins and releases that callers of one client start in the same turn go to etcd as one transaction of
// nested transactions (TxnBatcher). Against a real member: fewer requests, each lock exclusive with its own
// fencing token, a refused batch answered call by call, and one name never twice in a batch.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cmp, type Etcd, isEtcdError, type Lock, op, type Session } from "../../src/index.js";
import { sleep } from "../support/async.js";
import { client, keysUnder, recordingFetch, sharedEndpoint, uniqueName, useSessions } from "../support/etcd.js";
import { type FaultProxy, startFaultProxy } from "../support/fault-proxy.ts";
import { type EtcdCluster, memberStatus, startCluster } from "./harness.js";

const batched = (body: string | undefined) => body?.startsWith('{"success":[{"request_txn":') ?? false;

describe("locks started together on one client", () => {
  const fetch = recordingFetch();
  const etcd = client({ fetch });
  const open = useSessions(etcd, { ttl: 30 });

  it(
    "on distinct names: fewer requests than locks; " + "each round's tokens rise per name; every lock exclusive",
    async () => {
      const base = uniqueName("batch");
      const names = Array.from({ length: 24 }, (_, i) => `${base}/n${i}`);
      const sessions = await Promise.all(names.map(() => open()));
      const last = new Map<string, number>();
      const start = fetch.calls.length;
      for (let round = 0; round < 5; round++) {
        const locks = await Promise.all(names.map((name, i) => sessions[i]!.mutex(name).lock({ timeout: 10_000 })));
        for (const [i, lock] of locks.entries()) {
          const name = names[i]!;
          expect(lock.revision).toBeGreaterThan(last.get(name) ?? 0);
          last.set(name, lock.revision);
          // Exclusive: the lock's key is its line's only key, at the token's revision.
          const { kvs } = await etcd.range({ prefix: `${name}/` });
          expect(kvs.map((kv) => [kv.key, kv.createRevision])).toEqual([[lock.key, lock.revision]]);
        }
        await Promise.all(locks.map((l) => l.unlock()));
        for (const name of names) expect(await keysUnder(etcd, name)).toEqual([]);
      }
      const txns = fetch.calls.slice(start).filter((c) => c.path === "/v3/kv/txn");
      // 5 rounds × 24 locks × (join + release) = 240 transactions, in far fewer requests.
      expect(txns.some((c) => batched(c.body))).toBe(true);
      expect(txns.length).toBeLessThan(120);
    },
  );

  it(
    "one name from two sessions in the same turn: requests of their own, " +
      "two tokens, the later waits for the earlier",
    async () => {
      const name = uniqueName("batch-same");
      const [a, b] = await Promise.all([open(), open()]);
      const others = await Promise.all([0, 1, 2].map(() => open()));
      const start = fetch.calls.length;
      // Two requests on their way at once: either may reach etcd first.
      const both = [a.mutex(name).lock(), b.mutex(name).lock()];
      const rest = others.map((s, i) => s.mutex(`${name}-other${i}`).lock());
      const held = await Promise.race(both);
      const later = both[(await Promise.race(both.map((p, i) => p.then(() => i)))) === 0 ? 1 : 0]!;
      const outcome = await Promise.race([later.then(() => "taken"), sleep(300).then(() => "waiting")]);
      expect(outcome).toBe("waiting");
      expect((await keysUnder(etcd, name)).length).toBe(2);
      // The name's joins never shared a request: each session's put alone went in one of its own (the other
      // names may share it), and the later one's full join in another; each request carries one session's key.
      const joins = fetch.calls
        .slice(start)
        .filter((c) => c.path === "/v3/kv/txn" && c.body?.includes(btoa(`${name}/`)));
      expect(joins).toHaveLength(3);
      const keysOf = (body: string | undefined) => {
        const sent = [...(body ?? "").matchAll(/"key":"([^"]+)"/g)].map((m) => atob(m[1]!));
        return [a, b].filter((s) => sent.some((key) => key.startsWith(`${name}/${s.leaseHex}_`))).length;
      };
      expect(joins.map((c) => keysOf(c.body))).toEqual([1, 1, 1]);
      await held.unlock();
      const next = await later;
      expect(next.revision).toBeGreaterThan(held.revision);
      await next.unlock();
      await Promise.all((await Promise.all(rest)).map((l) => l.unlock()));
    },
  );

  it("a batch etcd refuses (one session's lease revoked) is sent again call by call: the live one locks", async () => {
    const name = uniqueName("batch-refused");
    const live = await open();
    const gone = await open({ keepAlive: "manual" });
    await etcd.lease.revoke(gone.leaseId);
    const start = fetch.calls.length;
    const [ok, refused] = await Promise.allSettled([
      live.mutex(`${name}/live`).lock(),
      gone.mutex(`${name}/gone`).lock(),
    ]);
    expect(ok.status).toBe("fulfilled");
    expect(refused.status).toBe("rejected");
    expect(isEtcdError((refused as PromiseRejectedResult).reason)).toBe(true);
    const txns = fetch.calls.slice(start).filter((c) => c.path === "/v3/kv/txn");
    expect(batched(txns[0]?.body)).toBe(true);
    expect(txns[0]?.status).not.toBe(200);
    expect(await keysUnder(etcd, `${name}/gone`)).toEqual([]);
    await (ok as PromiseFulfilledResult<{ unlock(): Promise<unknown> }>).value.unlock();
  });
});

/**
 * Eight names, two sessions on each, all of one client (`shared`): in rounds, every session asks at once, so
 * joins and releases of distinct names share requests and a fault hits a whole batch at once, while the two
 * sessions of a name queue behind each other. Every holder adds one to its name's counter with a write fenced
 * by its lock (through `direct`). Rounds go on while `faulting()` and at least `minRounds` times. Returns what
 * the judge needs: overlapping holders, failed turns, turns taken, and the fenced writes that succeeded.
 */
/** `granted` is called once the sessions are: faults that start before would test the grants, not the locks. */
async function takeTurns(
  shared: Etcd,
  direct: Etcd,
  base: string,
  faulting: () => boolean,
  minRounds: number,
  granted?: () => void,
) {
  const names = Array.from({ length: 8 }, (_, i) => `${base}/n${i}`);
  const sessions = await Promise.all(names.flatMap(() => [0, 1]).map(() => shared.session({ ttl: 30 })));
  granted?.();
  const holders = new Map<string, number>();
  const commits = new Map<string, number>();
  /** Fenced writes whose answer was lost (a member killed under them): each may or may not have landed. */
  const unknown = new Map<string, number>();
  const stats = { overlaps: 0, failed: 0, turns: 0, refused: 0, unread: 0 };
  const counter = (name: string) => `${name}-counter`;
  const add = (map: Map<string, number>, name: string) => map.set(name, (map.get(name) ?? 0) + 1);
  const fencedIncrement = async (name: string, lock: Lock) => {
    const current = await direct.get(counter(name)).catch(() => null);
    if (current === null) {
      stats.unread++;
      return;
    }
    const value = Number(current?.value ?? "0");
    const guard = current
      ? cmp.modRevision(counter(name), "==", current.modRevision)
      : cmp.createRevision(counter(name), "==", 0);
    try {
      const { succeeded } = await direct
        .txn()
        .if(lock.ifHeld(), guard)
        .then(op.put(counter(name), String(value + 1)))
        .commit();
      // Refused: the lock was no longer held, or another holder moved the counter.
      if (succeeded) add(commits, name);
      else stats.refused++;
    } catch {
      add(unknown, name);
    }
  };
  const turn = async (session: Session, s: number, round: number) => {
    const name = names[Math.floor(s / 2)]!;
    const lock = await session
      .mutex(name)
      .lock({ timeout: 20_000 })
      .catch(async (error: unknown) => {
        // What the line held when it failed, for the failure message.
        const { kvs } = await direct.range({ prefix: `${name}/` });
        const owners = kvs.map(
          (kv) => `${kv.key}@${kv.createRevision} (session ${sessions.findIndex((x) => x.leaseId === kv.lease)})`,
        );
        console.warn(
          `session ${s}, round ${round} on ${name}: ${(error as Error).message}; line: ${owners.join(", ") || "empty"}`,
        );
        return undefined;
      });
    if (lock === undefined) {
      stats.failed++;
      return;
    }
    stats.turns++;
    if ((holders.get(name) ?? 0) > 0) {
      stats.overlaps++;
      console.warn(`session ${s}, round ${round} on ${name} holds ${lock.key}@${lock.revision} beside another holder`);
    }
    holders.set(name, (holders.get(name) ?? 0) + 1);
    await fencedIncrement(name, lock);
    holders.set(name, holders.get(name)! - 1);
    // A release cut off by a fault goes on in the background; this session's next lock() waits for it.
    await lock.unlock({ timeout: 5_000 }).catch(() => {});
  };
  for (let round = 0; round < minRounds || (faulting() && round < 200); round++) {
    await Promise.all(sessions.map((session, s) => turn(session, s, round)));
  }
  const counters = await Promise.all(
    names.map(async (name) => ({
      stored: Number((await direct.get(counter(name)))?.value ?? "0"),
      committed: commits.get(name) ?? 0,
      unknown: unknown.get(name) ?? 0,
    })),
  );
  await Promise.all(sessions.map((session) => session.close().catch(() => false)));
  const total = (map: Map<string, number>) => [...map.values()].reduce((a, b) => a + b, 0);
  return { ...stats, committed: total(commits), unknown: total(unknown), counters };
}

/** No lost update: each counter holds its fenced writes that succeeded, plus some of those whose answer was lost. */
function expectCounted(counters: Awaited<ReturnType<typeof takeTurns>>["counters"]): void {
  for (const { stored, committed, unknown } of counters) {
    expect(stored).toBeGreaterThanOrEqual(committed);
    expect(stored).toBeLessThanOrEqual(committed + unknown);
  }
}

describe("locks started together on one client, through resets, silences, swallowed requests and lost answers", () => {
  let proxy: FaultProxy;
  beforeAll(async () => {
    proxy = await startFaultProxy(sharedEndpoint());
  });
  afterAll(async () => {
    await proxy?.close();
  });

  // The counters must equal the fenced writes that succeeded, no two holders of a name may overlap, and every
  // turn must get through.
  it("every lock exclusive, no fenced write lost, every turn taken", async () => {
    const sent = recordingFetch();
    const shared = client({ endpoints: [proxy.url], timeout: 5_000, fetch: sent });
    // Faults for a fixed stretch (a swallowed or dropped txn is armed for whichever txn comes next, so faults
    // that outlast the traffic would all land on the last lone release); the sessions keep taking turns
    // until it is over.
    let faulting = true;
    let granted!: () => void;
    const sessions = new Promise<void>((resolve) => {
      granted = resolve;
    });
    const faults = (async () => {
      await sessions;
      for (let i = 0; i < 24; i++) {
        await sleep(150);
        if (i % 4 === 0) proxy.reset();
        else if (i % 4 === 1) {
          proxy.silence({ drop: true });
          proxy.resume();
        } else if (i % 4 === 2) void proxy.dropNextAnswer({ path: "/v3/kv/txn", within: 1_000 });
        else void proxy.swallowNext({ path: "/v3/kv/txn", within: 1_000 });
      }
      proxy.disarm();
      faulting = false;
    })();
    const result = await takeTurns(shared, client(), uniqueName("batch-faults"), () => faulting, 10, granted);
    await faults;
    expect({ overlaps: result.overlaps, failed: result.failed, refused: result.refused }).toEqual({
      overlaps: 0,
      failed: 0,
      refused: 0,
    });
    // The fenced writes go straight to etcd: every turn made one that held (10 rounds at least).
    expect(result.turns).toBeGreaterThanOrEqual(160);
    expect({ committed: result.committed, unknown: result.unknown, unread: result.unread }).toEqual({
      committed: result.turns,
      unknown: 0,
      unread: 0,
    });
    expectCounted(result.counters);
    // The joins and releases went in batches, on connections the faults cut.
    expect(sent.calls.filter((c) => batched(c.body)).length).toBeGreaterThan(10);
    const { reset, swallowed, answersDropped } = proxy.stats();
    expect(reset + swallowed + answersDropped).toBeGreaterThan(3);
  }, 120_000);
});

describe("locks started together on one client of a 3-member cluster whose leader is killed", () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startCluster(3);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  // A batch in flight when the leader dies gets no answer (or etcd's "leader changed"): every join in it is
  // sent again, alone or in a later batch, and must land once. Two kills (kill -9, then a restart).
  it("every lock exclusive, no fenced write lost, every turn taken", async () => {
    const sent = recordingFetch();
    const shared = client({ endpoints: cluster.endpoints, timeout: 5_000, fetch: sent });
    const direct = client({ endpoints: cluster.endpoints, timeout: 5_000 });
    let faulting = true;
    let kills = 0;
    const faults = (async () => {
      for (let i = 0; i < 2; i++) {
        await sleep(1_500);
        const statuses = await Promise.all(cluster.endpoints.map((e) => memberStatus(e).catch(() => undefined)));
        const leader = cluster.members[statuses.findIndex((s) => s !== undefined && s.id === s.leader)];
        if (leader === undefined) continue;
        await leader.kill();
        kills++;
        await sleep(1_500);
        await leader.restart();
      }
      await sleep(1_000);
      faulting = false;
    })();
    const result = await takeTurns(shared, direct, uniqueName("batch-leader"), () => faulting, 10);
    await faults;
    expect(kills).toBe(2);
    expect({ overlaps: result.overlaps, failed: result.failed, refused: result.refused }).toEqual({
      overlaps: 0,
      failed: 0,
      refused: 0,
    });
    // A fenced write (or its read) caught by a kill may fail; most get through, and none is lost.
    expect(result.turns).toBeGreaterThanOrEqual(160);
    expect(result.committed + result.unknown + result.unread).toBe(result.turns);
    expect(result.committed).toBeGreaterThan(result.turns / 2);
    expectCounted(result.counters);
    expect(sent.calls.filter((c) => batched(c.body)).length).toBeGreaterThan(10);
  }, 120_000);
});
