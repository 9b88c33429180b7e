// Watch conformance on the mock and real etcd: order, prevKv, replay, filters, txn batches, compaction, abort.
// What only a real server shows (cut connections, progress notifications, closed sockets) is in
// test/etcd/watch-connections.test.ts.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { EtcdError, op, type WatchBatch, type WatchQuery } from "../../src/index.js";
import { rejection, sleep, within } from "../support/async.js";
import { eventCount, freshNames, pull, recordingFetch, useWatches } from "../support/etcd.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();

const watchOn = useWatches();

const fresh = freshNames("watch", "/");

/** Pulls batches until `events` events have arrived (within 5 s). */
const take = (iterator: AsyncIterator<WatchBatch>, events: number) => pull(iterator, eventCount(events), 5_000);

const describeEvents = (batches: WatchBatch[]) =>
  batches.flatMap((b) => b.events.map((e) => [e.type, e.kv.key, e.kv.value, e.prevKv?.value ?? null]));

/** Opens a watch from "now" and makes sure it is established before returning (a write must be seen). */
async function liveWatch(query: WatchQuery & { prefix: string }): Promise<AsyncIterator<WatchBatch>> {
  const { header } = await etcd.range({ prefix: query.prefix, countOnly: true });
  return watchOn(etcd, { ...query, startRevision: header.revision + 1 });
}

describe("events", () => {
  it("put, put, delete arrive in order with prevKv; a delete carries only key and revision", async () => {
    const p = fresh();
    const w = await liveWatch({ prefix: p, prevKv: true });
    const r1 = (await etcd.put(`${p}a`, "1")).header.revision;
    const r2 = (await etcd.put(`${p}a`, "2")).header.revision;
    const r3 = (await etcd.delete(`${p}a`)).header.revision;
    const batches = await take(w, 3);
    expect(describeEvents(batches)).toEqual([
      ["put", `${p}a`, "1", null],
      ["put", `${p}a`, "2", "1"],
      ["delete", `${p}a`, "", "2"],
    ]);
    const all = batches.flatMap((b) => b.events);
    expect(all.map((e) => e.kv.modRevision)).toEqual([r1, r2, r3]);
    expect(all[1]).toMatchObject({ kv: { version: 2, createRevision: r1 }, prevKv: { version: 1, modRevision: r1 } });
    expect(all[2]?.kv).toMatchObject({ version: 0, createRevision: 0, modRevision: r3, lease: "0" });
    // A batch's header is at least as new as its events (a catch-up batch may hold several revisions).
    for (const b of batches) expect(b.events.every((e) => e.kv.modRevision <= b.header.revision)).toBe(true);
  });

  it("without prevKv there is none", async () => {
    const p = fresh();
    const w = await liveWatch({ prefix: p });
    await etcd.put(`${p}a`, "1");
    await etcd.put(`${p}a`, "2");
    const batches = await take(w, 2);
    expect(batches.flatMap((b) => b.events).every((e) => e.prevKv === undefined)).toBe(true);
  });

  it("a single key, a range [key, end), a prefix select only their keys", async () => {
    const p = fresh();
    const { header } = await etcd.range({ prefix: p, countOnly: true });
    const from = header.revision + 1;
    const single = watchOn(etcd, { key: `${p}b`, startRevision: from });
    const range = watchOn(etcd, { key: `${p}b`, end: `${p}d`, startRevision: from });
    const prefix = watchOn(etcd, { prefix: `${p}c`, startRevision: from });
    for (const k of ["a", "b", "c", "cc", "d"]) await etcd.put(`${p}${k}`, k);
    await etcd.put(`${p}b`, "last");
    const keys = (bs: WatchBatch[]) => bs.flatMap((b) => b.events.map((e) => e.kv.key.slice(p.length)));
    expect(keys(await take(single, 2))).toEqual(["b", "b"]);
    expect(keys(await take(range, 4))).toEqual(["b", "c", "cc", "b"]);
    expect(keys(await take(prefix, 2))).toEqual(["c", "cc"]);
  });

  it("filters: noPut sees only deletes, noDelete only puts", async () => {
    const p = fresh();
    const { header } = await etcd.range({ prefix: p, countOnly: true });
    const from = header.revision + 1;
    const deletes = watchOn(etcd, { prefix: p, startRevision: from, noPut: true });
    const puts = watchOn(etcd, { prefix: p, startRevision: from, noDelete: true });
    await etcd.put(`${p}a`, "1");
    await etcd.put(`${p}b`, "2");
    await etcd.delete(`${p}a`);
    await etcd.put(`${p}a`, "3");
    await etcd.delete({ prefix: p });
    const d = await take(deletes, 3);
    expect(describeEvents(d).map(([t, k]) => [t, k])).toEqual([
      ["delete", `${p}a`],
      ["delete", `${p}a`],
      ["delete", `${p}b`],
    ]);
    const u = await take(puts, 3);
    expect(describeEvents(u).map(([t, k, v]) => [t, k, v])).toEqual([
      ["put", `${p}a`, "1"],
      ["put", `${p}b`, "2"],
      ["put", `${p}a`, "3"],
    ]);
  });

  it("a txn's events (and a prefix delete's) come in ONE batch, in the txn's order", async () => {
    const p = fresh();
    await etcd.put(`${p}z`, "0");
    const w = await liveWatch({ prefix: p, prevKv: true });
    // Make sure the watch is live (past its catch-up) before the writes under test.
    await etcd.put(`${p}0ready`, "");
    await take(w, 1);
    const txn = await etcd
      .txn()
      .then(op.put(`${p}b`, "1"), op.put(`${p}a`, "2"), op.delete(`${p}z`))
      .commit();
    const del = await etcd.delete({ key: `${p}a`, end: `${p}~` });
    const batches = await take(w, 5);
    expect(batches).toHaveLength(2);
    expect(batches[0]?.header.revision).toBe(txn.header.revision);
    expect(describeEvents(batches.slice(0, 1)).map(([t, k]) => [t, k])).toEqual([
      ["put", `${p}b`],
      ["put", `${p}a`],
      ["delete", `${p}z`],
    ]);
    expect(batches[0]?.events.every((e) => e.kv.modRevision === txn.header.revision)).toBe(true);
    // A delete inside the txn carries its prevKv like any other.
    expect(batches[0]?.events[2]?.prevKv).toMatchObject({ key: `${p}z`, value: "0" });
    expect(batches[1]?.header.revision).toBe(del.header.revision);
    // Deleted in key order, at one revision.
    expect(describeEvents(batches.slice(1)).map(([t, k]) => [t, k])).toEqual([
      ["delete", `${p}a`],
      ["delete", `${p}b`],
    ]);
    expect(batches[1]?.events.every((e) => e.kv.modRevision === del.header.revision)).toBe(true);
  });
});

describe("startRevision", () => {
  it("replays history from a past revision, then continues live, without gaps or repeats", async () => {
    const p = fresh();
    const r1 = (await etcd.put(`${p}a`, "1")).header.revision;
    // Other files write to the shared member meanwhile: each write's own revision, never r1 + n.
    const r2 = (await etcd.put(`${p}b`, "2")).header.revision;
    const r3 = (await etcd.put(`${p}a`, "3")).header.revision;
    const r4 = (await etcd.delete(`${p}b`)).header.revision;
    const w = watchOn(etcd, { prefix: p, startRevision: r1 + 1, prevKv: true });
    const replayed = await take(w, 3);
    // The server catches history up in one message; the client delivers it one revision per batch.
    expect(replayed).toHaveLength(3);
    expect(replayed.map((batch) => batch.events.map((e) => e.kv.modRevision))).toEqual([[r2], [r3], [r4]]);
    expect(describeEvents(replayed)).toEqual([
      ["put", `${p}b`, "2", null],
      ["put", `${p}a`, "3", "1"],
      ["delete", `${p}b`, "", "2"],
    ]);
    const live = (await etcd.put(`${p}c`, "4")).header.revision;
    const more = await take(w, 1);
    expect(describeEvents(more)).toEqual([["put", `${p}c`, "4", null]]);
    expect(more[0]?.header.revision).toBe(live);
  });

  it("replaying a txn, its events stay in ONE batch: each batch holds exactly one revision", async () => {
    const p = fresh();
    const r1 = (await etcd.put(`${p}a`, "1")).header.revision;
    const txn = (
      await etcd
        .txn()
        .then(op.put(`${p}b`, "1"), op.put(`${p}c`, "1"))
        .commit()
    ).header.revision;
    const r3 = (await etcd.delete(`${p}a`)).header.revision;
    const batches = await take(watchOn(etcd, { prefix: p, startRevision: r1 }), 4);
    expect(batches.map((batch) => batch.events.map((e) => e.kv.modRevision))).toEqual([[r1], [txn, txn], [r3]]);
  });

  it("without startRevision only changes from now on arrive, no history", async () => {
    const p = fresh();
    await etcd.put(`${p}k`, "old");
    const w = watchOn(etcd, { key: `${p}k` });
    const first = w.next();
    // When the stream is established is not observable: write until an event shows up (bounded).
    let settled = false;
    void first.finally(() => (settled = true));
    for (let i = 0; !settled && i < 50; i++) {
      await etcd.put(`${p}k`, `new-${i}`);
      await sleep(100);
    }
    const result = await within(5_000, "first event", first);
    expect(result.done).toBe(false);
    expect((result.value as WatchBatch).events[0]?.kv.value).toMatch(/^new-\d+$/);
  });

  it("a startRevision ahead of the store waits for that revision", async () => {
    const p = fresh();
    const { header } = await etcd.range({ prefix: p, countOnly: true });
    const w = watchOn(etcd, { prefix: p, startRevision: header.revision + 1 });
    const first = w.next();
    const r = (await etcd.put(`${p}k`, "v")).header.revision;
    const batch = await within(5_000, "watch from the next revision", first);
    expect(batch.value?.events[0]?.kv).toMatchObject({ key: `${p}k`, modRevision: r });
  });
});

describe("renewal (idleTimeout)", () => {
  // The server ends each stream at the deadline the SDK asks for (Grpc-Timeout), however busy; the watch
  // goes on from the next revision on a successor opened just before, with nothing lost or repeated.
  it("a stream renewed while changes keep coming loses and repeats no revision", async () => {
    const p = fresh();
    const fetch = recordingFetch(backend.fetch);
    const renewing = backend.client({ fetch });
    const { header } = await etcd.range({ prefix: p, countOnly: true });
    const w = watchOn(renewing, { prefix: p, startRevision: header.revision + 1, idleTimeout: 400 });
    // Pulled while the writes go on, so that streams live and end meanwhile: about 1.2 s of writes.
    const N = 80;
    const pulled = pull(w, eventCount(N), 10_000);
    const revisions: number[] = [];
    const until = performance.now() + 1_200;
    for (let i = 0; i < N; i++) {
      revisions.push((await etcd.put(`${p}${String(i).padStart(3, "0")}`, String(i))).header.revision);
      if (performance.now() < until) await sleep(15);
    }
    const batches = await pulled;
    expect(batches.flatMap((b) => b.events.map((e) => e.kv.modRevision))).toEqual(revisions);
    // Renewed at least twice in 1.2 s of 400 ms streams, every renewal from a revision.
    const streams = fetch.calls.filter((call) => call.path === "/v3/watch");
    expect(streams.length).toBeGreaterThanOrEqual(3);
    expect(streams.every((call) => String(call.body).includes("start_revision"))).toBe(true);
  });
});

describe("ending a watch", () => {
  it("abort ends the iteration with ABORTED (the signal's reason as cause)", async () => {
    const p = fresh();
    const controller = new AbortController();
    const w = etcd.watch({ prefix: p, signal: controller.signal })[Symbol.asyncIterator]();
    const pending = w.next();
    // Let the stream open before aborting it.
    await sleep(100);
    const reason = new Error("stop watching");
    controller.abort(reason);
    const error = await within(5_000, "aborted watch", pending).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(EtcdError);
    expect(error).toMatchObject({ code: "ABORTED", cause: reason });
    // The iterator is finished.
    expect(await w.next()).toMatchObject({ done: true });
  });

  it("an already-aborted signal fails at once with ABORTED", async () => {
    const controller = new AbortController();
    controller.abort();
    const w = etcd.watch({ prefix: fresh(), signal: controller.signal })[Symbol.asyncIterator]();
    await expect(within(5_000, "pre-aborted watch", w.next())).rejects.toMatchObject({ code: "ABORTED" });
  });

  it("return() (break out of for-await) ends the iterator cleanly", async () => {
    const p = fresh();
    const w = await liveWatch({ prefix: p });
    await etcd.put(`${p}a`, "1");
    await take(w, 1);
    expect(await within(5_000, "return", w.return!())).toMatchObject({ done: true });
  });
});

// A Request's signal follows the caller's only through a WeakRef: the mock must listen to the caller's own
// signal, or an abort after a garbage collection would never reach an open watch (and lock waiters hang).
it("abort reaches an open watch stream even after a garbage collection", async () => {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  const client = backend.client();
  const controller = new AbortController();
  const w = client.watch({ prefix: fresh(), signal: controller.signal })[Symbol.asyncIterator]();
  const pending = w.next().then(
    () => "resolved",
    (e: EtcdError) => e.code,
  );
  await sleep(100);
  gc();
  await sleep(20);
  gc();
  controller.abort();
  expect(await Promise.race([pending, new Promise((resolve) => setTimeout(() => resolve("still open"), 1_000))])).toBe(
    "ABORTED",
  );
});

describe("compaction (a member of its own)", () => {
  const { etcd: c } = useBackend({ dedicated: true });

  it(
    "a startRevision below the compaction ends with COMPACTED and compactRevision; " + "from it on the watch works",
    async () => {
      const r1 = (await c.put("k", "1")).header.revision;
      await c.put("k", "2");
      const r3 = (await c.put("k", "3")).header.revision;
      await c.compact(r3);
      const w = watchOn(c, { key: "k", startRevision: r1 });
      const error = await within(5_000, "compacted watch", w.next()).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toMatchObject({ code: "COMPACTED", name: "EtcdCompactedError", compactRevision: r3 });
      const ok = watchOn(c, { key: "k", startRevision: r3, prevKv: true });
      const [batch] = await take(ok, 1);
      // At the compaction revision the event is still there; its prevKv was compacted away.
      expect(batch?.events[0]).toMatchObject({ type: "put", kv: { value: "3", modRevision: r3 } });
    },
  );

  it("a quiet key's watch lives through a compaction: its renewals go on, and its next change comes", async () => {
    const key = "quiet/k";
    // Streams of 800 ms: each renewal resumes from the revision after the key's last change.
    const start = (await c.put(key, "0")).header.revision;
    const w = watchOn(c, { key, startRevision: start, idleTimeout: 800 });
    await take(w, 1);
    let revision = 0;
    for (let i = 0; i < 5; i++) revision = (await c.put("quiet/other", String(i))).header.revision;
    await c.compact(revision);
    // Several renewals, each from a revision that is compacted now.
    await sleep(2_500);
    await c.put(key, "1");
    const [batch] = await take(w, 1);
    expect(batch?.events.map((e) => [e.type, e.kv.value])).toEqual([["put", "1"]]);
  });
});

describe("ending a watch loop", () => {
  it("aborting its signal throws ABORTED, with the signal's reason as cause; break is quiet", async () => {
    const controller = new AbortController();
    const reason = new Error("shutting down");
    const looping = (async () => {
      for await (const batch of etcd.watch({ prefix: "abort-semantics/", signal: controller.signal })) {
        throw new Error(`nothing was written, yet a batch came: ${JSON.stringify(batch)}`);
      }
    })();
    setTimeout(() => controller.abort(reason), 50);
    const error = await rejection(looping);
    expect(error.code).toBe("ABORTED");
    expect(error.cause).toBe(reason);
    await etcd.put("abort-semantics/k", "v");
    for await (const batch of etcd.watch({ prefix: "abort-semantics/", startRevision: 1 })) {
      expect(batch.events.length).toBeGreaterThan(0);
      break;
    }
  });
});
