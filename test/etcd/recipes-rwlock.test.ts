// The read-write lock under real contention on real etcd: writers alone, readers together (an overlap
// detector in the process), fenced writes with no lost update and fenced reads that see no writer in between,
// a writer never starved by a stream of readers, requests per acquisition counted, nothing left behind.
import { describe, expect, it } from "vitest";
import { cmp, op, type ReadLock, type Session, type WriteLock } from "../../src/index.js";
import { sleep, until, within } from "../support/async.js";
import { client, lineLength, recordingFetch, uniqueName, useSessions } from "../support/etcd.js";

const etcd = client();
const newSession = useSessions(etcd, { ttl: 20 });

describe("read-write lock on real etcd", () => {
  it(
    "4 writers and 8 readers: a writer holds alone, " +
      "readers share, no lost update, readers see no write under them",
    async () => {
      const WRITERS = 4;
      const READERS = 8;
      const ROUNDS = 6;
      const name = uniqueName("rw");
      const counter = `${name}-counter`;
      await etcd.put(counter, "0");

      let writing = 0;
      let reading = 0;
      let maxReaders = 0;
      const violations: string[] = [];
      const requests = { read: [] as number[], write: [] as number[] };

      const writer = async (session: Session, fetch: ReturnType<typeof recordingFetch>) => {
        const rw = session.rwlock(name);
        for (let round = 0; round < ROUNDS; round++) {
          const mark = fetch.mark();
          const lock: WriteLock = await rw.writeLock({ timeout: 50_000 });
          requests.write.push(fetch.since(mark).length);
          writing++;
          if (writing > 1 || reading > 0) violations.push(`writer with ${writing - 1} writers and ${reading} readers`);
          try {
            const current = await etcd.get(counter);
            await sleep(2);
            const result = await etcd
              .txn()
              .if(lock.ifHeld(), cmp.modRevision(counter, "==", current!.modRevision))
              .then(op.put(counter, String(Number(current!.value) + 1)))
              .commit();
            if (!result.succeeded) violations.push(`write refused at ${lock.revision}`);
          } finally {
            writing--;
            await lock.unlock();
          }
        }
      };

      const reader = async (session: Session, fetch: ReturnType<typeof recordingFetch>) => {
        const rw = session.rwlock(name);
        for (let round = 0; round < ROUNDS; round++) {
          const mark = fetch.mark();
          const lock: ReadLock = await rw.readLock({ timeout: 50_000 });
          requests.read.push(fetch.since(mark).length);
          reading++;
          maxReaders = Math.max(maxReaders, reading);
          if (writing > 0) violations.push(`reader with ${writing} writers`);
          try {
            // A fenced read: it answers only while the read lock is ours, and nothing may write under it.
            const before = await etcd.txn().if(lock.ifHeld()).then(op.get(counter)).commit();
            await sleep(4);
            const after = await etcd.txn().if(lock.ifHeld()).then(op.get(counter)).commit();
            if (!before.succeeded || !after.succeeded) violations.push(`fenced read refused at ${lock.revision}`);
            else if (before.responses[0].kvs[0]?.modRevision !== after.responses[0].kvs[0]?.modRevision) {
              violations.push(`counter written under read lock ${lock.revision}`);
            }
          } finally {
            reading--;
            await lock.unlock();
          }
        }
      };

      const contenders = await Promise.all(
        Array.from({ length: WRITERS + READERS }, async () => {
          const fetch = recordingFetch();
          return { fetch, session: await newSession({}, client({ fetch })) };
        }),
      );
      const started = performance.now();
      await Promise.all(
        contenders.map(({ session, fetch }, i) => (i < WRITERS ? writer(session, fetch) : reader(session, fetch))),
      );
      const elapsed = performance.now() - started;

      expect(violations).toEqual([]);
      expect(Number((await etcd.get(counter))?.value)).toBe(WRITERS * ROUNDS);
      expect(maxReaders).toBeGreaterThan(1);
      expect(await lineLength(etcd, name)).toBe(0);
      // A reader waits for one writer: join, watch, one read when it goes (plus one read if the store moved while
      // its watch opened). A writer walks back past readers that leave out of order: a watch and a read each.
      expect(Math.max(...requests.read)).toBeLessThanOrEqual(4);
      const spread = (r: number[]) => `median ${[...r].sort((a, b) => a - b)[r.length >> 1]}, max ${Math.max(...r)}`;
      console.info(
        `rwlock: ${WRITERS * ROUNDS} writes and ${READERS * ROUNDS} reads in ${Math.round(elapsed)} ms, ` +
          `up to ${maxReaders} readers at once; ` +
          `requests per read lock ${spread(requests.read)}, per write lock ${spread(requests.write)}`,
      );
    },
  );

  it("a writer is not starved by a stream of readers: readers that came after it wait for it", async () => {
    const name = uniqueName("rw");
    type Hold = { kind: "read" | "write"; revision: number; from: number; to: number };
    const holds: Hold[] = [];
    let stop = false;
    const hold = async (kind: "read" | "write", lock: ReadLock | WriteLock, ms: number) => {
      const from = performance.now();
      await sleep(ms);
      const to = performance.now();
      holds.push({ kind, revision: lock.revision, from, to });
      await lock.unlock();
    };
    // Four readers, each taking the lock again as soon as it let it go: there is always a reader holding.
    const readerSessions = await Promise.all(Array.from({ length: 4 }, () => newSession()));
    const stream = readerSessions.map(async (s, i) => {
      await sleep(i * 10);
      while (!stop) await hold("read", await s.rwlock(name).readLock({ timeout: 20_000 }), 40);
    });
    await until("readers overlapping", 5_000, () => holds.length >= 4);
    const writerSession = await newSession();
    const asked = performance.now();
    await hold(
      "write",
      await within(10_000, "the writer", writerSession.rwlock(name).writeLock({ timeout: 10_000 })),
      20,
    );
    const waited = performance.now() - asked;
    await sleep(200);
    stop = true;
    await within(10_000, "the reader stream", Promise.all(stream));

    const write = holds.find((h) => h.kind === "write")!;
    for (const h of holds.filter((h) => h.kind === "read")) {
      // Every read hold ended before the write began, or began after it ended, in the order of the line.
      if (h.revision < write.revision) expect(h.to).toBeLessThanOrEqual(write.from);
      else expect(h.from).toBeGreaterThanOrEqual(write.to);
    }
    expect(holds.filter((h) => h.kind === "read" && h.revision > write.revision).length).toBeGreaterThan(0);
    expect(await lineLength(etcd, name)).toBe(0);
    console.info(
      `rwlock: a writer behind a stream of 4 readers waited ${Math.round(waited)} ms (reader holds of 40 ms)`,
    );
  });
});
