// The semaphore under real contention on real etcd: never more than `permits` holders (an overlap detector in
// the process, and a fenced occupancy count in etcd that only holders can write), no lost update, requests
// per acquisition counted with a wrapped fetch, FIFO admission, and nothing left behind by waiters that give
// up or whose lease ends.
import { describe, expect, it } from "vitest";
import { cmp, op, type Permit, type Session } from "../../src/index.js";
import { rejection, sleep, stillPending, until, within } from "../support/async.js";
import { client, lineLength, recordingFetch, uniqueName, useSessions } from "../support/etcd.js";

const etcd = client();
const newSession = useSessions(etcd, { ttl: 20 });

/**
 * Adds `delta` to the number at `key` with a compare-and-swap fenced by the permit: refused once the permit
 * is lost. Returns the new value, or undefined if the fence refused it.
 */
async function fencedAdd(permit: Permit, key: string, delta: number): Promise<number | undefined> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const current = await etcd.get(key);
    const next = Number(current?.value ?? "0") + delta;
    const result = await etcd
      .txn()
      .if(permit.ifHeld(), cmp.modRevision(key, "==", current?.modRevision ?? 0))
      .then(op.put(key, String(next)))
      .commit();
    if (result.succeeded) return next;
    if (!permit.held) return undefined;
  }
  throw new Error(`no compare-and-swap on ${key} in 100 tries`);
}

describe("semaphore on real etcd", () => {
  it(
    "12 sessions x 6 acquisitions of 3 permits: " +
      "never more than 3 holders, no lost update, at most 2 requests each",
    async () => {
      const SESSIONS = 12;
      const ROUNDS = 6;
      const PERMITS = 3;
      const name = uniqueName("sem");
      const active = `${name}-active`;
      const done = `${name}-done`;

      let holders = 0;
      let maxHolders = 0;
      let maxActive = 0;
      const refused: string[] = [];
      const tokens = new Set<number>();
      const requests: number[] = [];

      const worker = async (session: Session, fetch: ReturnType<typeof recordingFetch>) => {
        const semaphore = session.semaphore(name, { permits: PERMITS });
        for (let round = 0; round < ROUNDS; round++) {
          const mark = fetch.mark();
          const permit = await semaphore.acquire({ timeout: 50_000 });
          // The acquisition's own requests: not the session's renewals, and one watch however often a wait
          // longer than a stream's life renewed it (a loaded machine stretches the waits).
          const sent = fetch.since(mark).filter((path) => path !== "/v3/lease/keepalive");
          requests.push(sent.filter((path) => path !== "/v3/watch").length + (sent.includes("/v3/watch") ? 1 : 0));
          holders++;
          maxHolders = Math.max(maxHolders, holders);
          tokens.add(permit.revision);
          try {
            // Occupancy as etcd sees it, written only by holders: it must never exceed the permits.
            const occupied = await fencedAdd(permit, active, +1);
            if (occupied === undefined) refused.push(`${permit.key}: enter`);
            else maxActive = Math.max(maxActive, occupied);
            await sleep(5);
            if ((await fencedAdd(permit, done, +1)) === undefined) refused.push(`${permit.key}: done`);
            if ((await fencedAdd(permit, active, -1)) === undefined) refused.push(`${permit.key}: leave`);
          } finally {
            holders--;
            await permit.release();
          }
        }
      };

      const contenders = await Promise.all(
        Array.from({ length: SESSIONS }, async () => {
          const fetch = recordingFetch();
          return { fetch, session: await newSession({}, client({ fetch })) };
        }),
      );
      const started = performance.now();
      await Promise.all(contenders.map(({ session, fetch }) => worker(session, fetch)));
      const elapsed = performance.now() - started;

      expect(refused).toEqual([]);
      expect(maxHolders).toBe(PERMITS);
      expect(maxActive).toBeLessThanOrEqual(PERMITS);
      expect(Number((await etcd.get(done))?.value)).toBe(SESSIONS * ROUNDS);
      expect(Number((await etcd.get(active))?.value)).toBe(0);
      expect(tokens.size).toBe(SESSIONS * ROUNDS);
      expect(Math.max(...requests)).toBeLessThanOrEqual(2);
      expect(await lineLength(etcd, name)).toBe(0);
      const waited = requests.filter((r) => r === 2).length;
      console.info(
        `semaphore: ${SESSIONS * ROUNDS} acquisitions of ${PERMITS} ` +
          `permits by ${SESSIONS} sessions in ${Math.round(elapsed)} ms; ` +
          `${waited} waited (2 requests), ${requests.length - waited} did not (1 request); ` +
          `peak occupancy in etcd ${maxActive}`,
      );
    },
  );

  it(
    "FIFO: each release admits the next waiter in join order, " + "whatever the order of the sessions' lease IDs",
    async () => {
      const WAITERS = 6;
      const PERMITS = 2;
      const name = uniqueName("sem");
      const held: Permit[] = [];
      for (let i = 0; i < PERMITS; i++)
        held.push(await (await newSession()).semaphore(name, { permits: PERMITS }).acquire());
      // Sessions made in reverse of the join order, so key names sort the other way round.
      const waiterSessions: Session[] = [];
      for (let i = 0; i < WAITERS; i++) waiterSessions.unshift(await newSession());
      const admitted: number[] = [];
      const waiting: Array<Promise<Permit>> = [];
      for (let i = 0; i < WAITERS; i++) {
        waiting.push(
          waiterSessions[i]!.semaphore(name, { permits: PERMITS })
            .acquire({ timeout: 30_000 })
            .then((p) => {
              admitted.push(i);
              return p;
            }),
        );
        await until(
          `waiter ${i} joined`,
          5_000,
          async () => (await etcd.inspectSemaphore(name)).waiters.length === i + 1,
        );
      }
      const line = await etcd.inspectSemaphore(name);
      expect(line.waiters.map((w) => w.leaseId)).toEqual(waiterSessions.map((s) => s.leaseId));

      for (let i = 0; i < WAITERS; i++) {
        await held.shift()!.release();
        const permit = await within(5_000, `waiter ${i} admitted`, waiting[i]!);
        held.push(permit);
        // Nobody behind it got in with it.
        if (i + 1 < WAITERS) expect(await stillPending(waiting[i + 1]!, 50)).toBe(true);
        expect(admitted).toEqual(Array.from({ length: i + 1 }, (_, k) => k));
      }
      const revisions = held.map((p) => p.revision);
      expect(revisions[1]!).toBeGreaterThan(revisions[0]!);
      await Promise.all(held.map((p) => p.release()));
      expect(await lineLength(etcd, name)).toBe(0);
    },
  );

  it(
    "a waiter outlives its watch's server-side deadline " +
      "on a busy line (12 s of contenders joining and leaving behind it)",
    async () => {
      const name = uniqueName("sem");
      const holder = await (await newSession()).semaphore(name, { permits: 1 }).acquire();
      const waiter = await newSession();
      const waiting = waiter.semaphore(name, { permits: 1 }).acquire({ timeout: 30_000 });
      await until("waiter joined", 5_000, async () => (await lineLength(etcd, name)) === 2);
      // Deletes under the prefix keep the waiter's watch busy past WAIT_IDLE_TIMEOUT (5 s), twice.
      const churner = (await newSession()).semaphore(name, { permits: 1 });
      const started = performance.now();
      let churns = 0;
      while (performance.now() - started < 12_000) {
        await churner.acquire({ timeout: 20 }).catch(() => {});
        churns++;
      }
      expect(await stillPending(waiting, 0)).toBe(true);
      await holder.release();
      const permit = await within(5_000, "the patient waiter", waiting);
      console.info(`semaphore: a waiter followed ${churns} departures behind it for 12 s and was admitted`);
      await permit.release();
      expect(await lineLength(etcd, name)).toBe(0);
    },
  );

  it(
    "waiters that abort, time out or lose their lease, " + "and a holder that loses its lease, leave no key behind",
    async () => {
      const name = uniqueName("sem");
      // The holder's lease outlives the expiring waiter's by 2 s: were it to end first, that waiter would be
      // admitted for the moment its own lease has left.
      const holder = await (await newSession({ ttl: 4, keepAlive: "manual" }))
        .semaphore(name, { permits: 1 })
        .acquire();
      const abort = new AbortController();
      const aborted = (await newSession()).semaphore(name, { permits: 1 }).acquire({ signal: abort.signal });
      const timedOut = (await newSession()).semaphore(name, { permits: 1 }).acquire({ timeout: 500 });
      const expiring = (await newSession({ ttl: 2, keepAlive: "manual" })).semaphore(name, { permits: 1 }).acquire();
      const survivorSession = await newSession();
      const survivor = survivorSession.semaphore(name, { permits: 1 }).acquire({ timeout: 20_000 });
      await until("all joined", 5_000, async () => (await lineLength(etcd, name)) === 5);
      abort.abort();
      expect((await rejection(aborted)).code).toBe("ABORTED");
      expect((await rejection(timedOut)).code).toBe("TIMEOUT");
      expect((await rejection(within(6_000, "expiring waiter", expiring))).code).toBe("SESSION_EXPIRED");
      // The holder's lease ran out too: the survivor is admitted, and its key is the only one left.
      const permit = await within(6_000, "survivor admitted", survivor);
      await expect(holder.release()).rejects.toMatchObject({ code: "LOCK_LOST" });
      expect((await etcd.range({ prefix: `${name}/` })).kvs.map((kv) => kv.key)).toEqual([permit.key]);
      await permit.release();
      expect(await lineLength(etcd, name)).toBe(0);
    },
  );
});
