// Watch over a real etcd: events, filters, history, batches per revision, resume after cut connections,
// compaction, progress notifications, and closing the connection on abort and on break.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { cmp, Etcd, EtcdCompactedError, EtcdError, op, type WatchBatch, type WatchQuery } from "../../src/index.js";
import { startEtcd, type EtcdMember } from "./harness";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { client, eventually, events, pull, recordingFetch, sharedEndpoint, sleep, uniquePrefix, within } from "./support";

const etcd = client();

/** The store's current revision (of the shared member). */
async function currentRevision(c: Etcd = etcd): Promise<number> {
  return (await c.range({ key: "\0revision-probe" })).header.revision;
}

/** Watches opened by a test, aborted after it: return() would queue behind a pending next() forever. */
const openWatches = new Set<AbortController>();
afterEach(() => {
  for (const controller of openWatches) controller.abort(new Error("test finished"));
  openWatches.clear();
});

function open(c: Etcd, query: WatchQuery): AsyncIterator<WatchBatch> {
  const controller = new AbortController();
  openWatches.add(controller);
  const signal = query.signal === undefined ? controller.signal : AbortSignal.any([query.signal, controller.signal]);
  return c.watch({ ...query, signal })[Symbol.asyncIterator]();
}

const eventCount = (n: number) => (batches: WatchBatch[]) => events(batches).length >= n;
const summary = (batches: WatchBatch[]) =>
  events(batches).map((e) => [e.type, e.kv.key, e.kv.value, e.prevKv?.value]);

describe("events", () => {
  it("put and delete on a prefix arrive in order, with prevKv and revisions", async () => {
    const ns = uniquePrefix("watch-prefix");
    const start = (await currentRevision()) + 1;
    const watch = open(etcd, { prefix: ns, startRevision: start, prevKv: true });
    try {
      const r1 = (await etcd.put(`${ns}a`, "1")).header.revision;
      const r2 = (await etcd.put(`${ns}a`, "2")).header.revision;
      const r3 = (await etcd.delete(`${ns}a`)).header.revision;
      const r4 = (await etcd.put(`${ns}b`, "x")).header.revision;
      await etcd.put(`${ns.slice(0, -1)}0`, "outside the prefix");
      const batches = await pull(watch, eventCount(4), 5_000);
      expect(summary(batches)).toEqual([
        ["put", `${ns}a`, "1", undefined],
        ["put", `${ns}a`, "2", "1"],
        ["delete", `${ns}a`, "", "2"],
        ["put", `${ns}b`, "x", undefined],
      ]);
      const all = events(batches);
      expect(all.map((e) => e.kv.modRevision)).toEqual([r1, r2, r3, r4]);
      expect(all[0]!.kv).toMatchObject({ version: 1, createRevision: r1 });
      expect(all[1]!.kv).toMatchObject({ version: 2, createRevision: r1 });
      expect(all[1]!.prevKv).toMatchObject({ version: 1, modRevision: r1 });
      expect(all[2]!.kv.version).toBe(0);
    } finally {
      await etcd.delete(`${ns.slice(0, -1)}0`);
    }
  });

  it("a single key sees only that key; [key, end) sees only that interval", async () => {
    const ns = uniquePrefix("watch-key");
    const start = (await currentRevision()) + 1;
    const single = open(etcd, { key: `${ns}b`, startRevision: start });
    const interval = open(etcd, { key: `${ns}b`, end: `${ns}d`, startRevision: start });
    {
      for (const k of ["a", "b", "bb", "c", "d", "b"]) await etcd.put(`${ns}${k}`, k);
      await etcd.put(`${ns}last`, "marker"); // inside neither
      const one = await pull(single, eventCount(2), 5_000);
      expect(summary(one)).toEqual([
        ["put", `${ns}b`, "b", undefined],
        ["put", `${ns}b`, "b", undefined],
      ]);
      const many = await pull(interval, eventCount(4), 5_000);
      expect(events(many).map((e) => e.kv.key)).toEqual([`${ns}b`, `${ns}bb`, `${ns}c`, `${ns}b`]);
      // Nothing else comes: a later write inside the interval is the very next event.
      await etcd.put(`${ns}c`, "again");
      const next = await pull(interval, eventCount(5), 5_000, many);
      expect(events(next)[4]!.kv).toMatchObject({ key: `${ns}c`, value: "again" });
    }
  });

  it("without startRevision only changes from now are delivered (no history)", async () => {
    const ns = uniquePrefix("watch-now");
    await etcd.put(`${ns}k`, "old");
    const watch = open(etcd, { key: `${ns}k` });
    {
      const first = watch.next();
      // The watch is lazy and its creation is not observable: write until an event shows up.
      let i = 0;
      let settled = false;
      void first.finally(() => (settled = true));
      while (!settled && i < 50) {
        await etcd.put(`${ns}k`, `new-${i++}`);
        await sleep(100);
      }
      const result = await within(5_000, "first event", first);
      expect(result.done).toBe(false);
      const [event] = (result.value as WatchBatch).events;
      expect(event!.kv.value).toMatch(/^new-\d+$/);
    }
  });

  it("startRevision replays history from that revision", async () => {
    const ns = uniquePrefix("watch-history");
    const r1 = (await etcd.put(`${ns}k`, "1")).header.revision;
    await etcd.put(`${ns}k`, "2");
    await etcd.delete(`${ns}k`);
    const r4 = (await etcd.put(`${ns}k`, "4")).header.revision;
    const fromR1 = open(etcd, { key: `${ns}k`, startRevision: r1 });
    const fromR4 = open(etcd, { key: `${ns}k`, startRevision: r4 });
    {
      expect(summary(await pull(fromR1, eventCount(4), 5_000))).toEqual([
        ["put", `${ns}k`, "1", undefined],
        ["put", `${ns}k`, "2", undefined],
        ["delete", `${ns}k`, "", undefined],
        ["put", `${ns}k`, "4", undefined],
      ]);
      const later = await pull(fromR4, eventCount(1), 5_000);
      expect(events(later).map((e) => e.kv.modRevision)).toEqual([r4]);
    }
  });

  it("noPut and noDelete filter events out", async () => {
    const ns = uniquePrefix("watch-filters");
    const start = (await currentRevision()) + 1;
    const deletesOnly = open(etcd, { prefix: ns, startRevision: start, noPut: true });
    const putsOnly = open(etcd, { prefix: ns, startRevision: start, noDelete: true });
    {
      await etcd.put(`${ns}a`, "1");
      await etcd.delete(`${ns}a`);
      await etcd.put(`${ns}b`, "2");
      await etcd.delete(`${ns}b`);
      await etcd.put(`${ns}c`, "3");
      const deletes = await pull(deletesOnly, eventCount(2), 5_000);
      expect(summary(deletes)).toEqual([
        ["delete", `${ns}a`, "", undefined],
        ["delete", `${ns}b`, "", undefined],
      ]);
      expect(summary(await pull(putsOnly, eventCount(3), 5_000))).toEqual([
        ["put", `${ns}a`, "1", undefined],
        ["put", `${ns}b`, "2", undefined],
        ["put", `${ns}c`, "3", undefined],
      ]);
      // The put of c must not have reached the delete-only watcher: the next thing it sees is this delete.
      await etcd.delete(`${ns}c`);
      const more = await pull(deletesOnly, eventCount(3), 5_000, deletes);
      expect(summary(more)[2]).toEqual(["delete", `${ns}c`, "", undefined]);
    }
  });

  it("a txn's events arrive as ONE batch, in the txn's order; the next revision is the next batch", async () => {
    const ns = uniquePrefix("watch-txn");
    await etcd.put(`${ns}gone`, "x");
    const watch = open(etcd, { prefix: ns, prevKv: true });
    // Get the watcher live (synced) first: write markers until one arrives.
    const first = watch.next();
    let settled = false;
    void first.finally(() => (settled = true));
    for (let i = 0; !settled && i < 50; i++) {
      await etcd.put(`${ns}marker`, String(i));
      await sleep(100);
    }
    const marker = await within(5_000, "marker event", first);
    expect(marker.done).toBe(false);

    const txn = await etcd
      .txn()
      .if(cmp.version(`${ns}gone`, ">", 0))
      .then(op.put(`${ns}b`, "1"), op.put(`${ns}a`, "2"), op.delete(`${ns}gone`), op.put(`${ns}c`, "3"))
      .commit();
    expect(txn.succeeded).toBe(true);
    const after = (await etcd.put(`${ns}after`, "next revision")).header.revision;
    // Skip any marker events still in flight.
    const batches = (await pull(watch, (b) => events(b).some((e) => e.kv.key === `${ns}after`), 5_000)).filter(
      (b) => !b.events.every((e) => e.kv.key === `${ns}marker`),
    );
    expect(batches).toHaveLength(2);
    expect(batches[0]!.header.revision).toBe(txn.header.revision);
    expect(batches[0]!.events.map((e) => [e.type, e.kv.key.slice(ns.length)])).toEqual([
      ["put", "b"],
      ["put", "a"],
      ["delete", "gone"],
      ["put", "c"],
    ]);
    expect(batches[0]!.events.every((e) => e.kv.modRevision === txn.header.revision)).toBe(true);
    expect(batches[0]!.events[2]!.prevKv).toMatchObject({ value: "x" });
    expect(batches[1]!.events.map((e) => [e.kv.key, e.kv.modRevision])).toEqual([[`${ns}after`, after]]);
    expect(batches[1]!.header.revision).toBe(after);
  });

  // WatchBatch is documented (src/watch.ts) as "All events of one revision". When a watch replays history
  // (startRevision in the past), etcd packs several revisions into one response; the client passes it on.
  it("replaying history, each batch still holds the events of exactly one revision (WatchBatch contract)", async () => {
    const ns = uniquePrefix("watch-batch-per-rev");
    const r1 = (await etcd.put(`${ns}a`, "1")).header.revision;
    const r2 = (await etcd.put(`${ns}a`, "2")).header.revision;
    const txn = await etcd.txn().then(op.put(`${ns}b`, "1"), op.put(`${ns}c`, "1")).commit();
    const r4 = (await etcd.delete(`${ns}a`)).header.revision;
    const watch = open(etcd, { prefix: ns, startRevision: r1 });
    const batches = await pull(watch, eventCount(5), 5_000);
    expect(events(batches).map((e) => e.kv.modRevision)).toEqual([r1, r2, txn.header.revision, txn.header.revision, r4]);
    expect(batches.map((b) => b.events.map((e) => e.kv.modRevision))).toEqual([
      [r1],
      [r2],
      [txn.header.revision, txn.header.revision],
      [r4],
    ]);
  });

  it("a namespaced watch sees its keys without the namespace, and nothing outside it", async () => {
    const ns = uniquePrefix("watch-ns");
    const scoped = client({ namespace: ns });
    const start = (await currentRevision()) + 1;
    const watch = open(scoped, { prefix: "", startRevision: start });
    try {
      await etcd.put(`${ns.slice(0, -1)}0`, "outside");
      await scoped.put("a", "1");
      await etcd.put(`${ns}b`, "2");
      const batches = await pull(watch, eventCount(2), 5_000);
      expect(events(batches).map((e) => [e.kv.key, e.kv.value])).toEqual([
        ["a", "1"],
        ["b", "2"],
      ]);
    } finally {
      await etcd.delete(`${ns.slice(0, -1)}0`);
    }
  });
});

describe("resume after broken connections", () => {
  let proxy: TcpProxy;
  beforeAll(async () => {
    proxy = await startTcpProxy(sharedEndpoint());
  });
  afterAll(async () => {
    await proxy?.close();
  });

  it("cutting the connection several times mid-stream loses and repeats no revision", async () => {
    const ns = uniquePrefix("watch-resume");
    const fetch = recordingFetch();
    const viaProxy = client({ endpoints: proxy.url, fetch });
    const start = (await currentRevision()) + 1;
    const watch = open(viaProxy, { prefix: ns, startRevision: start });
    const N = 60;
    const received: WatchBatch[] = [];
    let liveCuts = 0;
    {
      // Consume concurrently with the writes and cuts.
      const consumer = pull(watch, eventCount(N), 30_000, received);
      await eventually("watch connected through the proxy", 5_000, async () => {
        if (proxy.connections() < 1) throw new Error("no connection yet");
      });
      const revisions: number[] = [];
      for (let i = 0; i < N; i++) {
        revisions.push((await etcd.put(`${ns}${String(i).padStart(3, "0")}`, String(i))).header.revision);
        if (i % 10 === 5) {
          // Let some events through first, so the cut lands mid-stream.
          await sleep(40);
          if (proxy.connections() > 0) liveCuts++;
          proxy.cutAll();
        } else {
          await sleep(5);
        }
      }
      await consumer;
      const all = events(received);
      expect(all.map((e) => e.kv.modRevision)).toEqual(revisions);
      expect(all.map((e) => e.kv.value)).toEqual(Array.from({ length: N }, (_, i) => String(i)));
      expect(liveCuts).toBeGreaterThanOrEqual(3);
      // Each live cut forced a new watch request (the stream really was reopened, not just lucky timing).
      expect(fetch.paths().filter((p) => p === "/v3/watch").length).toBeGreaterThanOrEqual(liveCuts + 1);
      // And it still follows new writes after all that.
      const last = (await etcd.put(`${ns}zzz`, "after")).header.revision;
      await pull(watch, eventCount(N + 1), 5_000, received);
      expect(events(received).at(-1)!.kv.modRevision).toBe(last);
      expect(events(received)).toHaveLength(N + 1);
    }
  });
});

describe("dedicated member (compaction and progress notifications are member-wide)", () => {
  let member: EtcdMember;
  let proxy: TcpProxy;
  let direct: Etcd;
  beforeAll(async () => {
    member = await startEtcd({ extraArgs: ["--experimental-watch-progress-notify-interval=1s"] });
    proxy = await startTcpProxy(member.clientUrl);
    direct = new Etcd({ endpoints: member.clientUrl, timeout: 5_000 });
  });
  afterAll(async () => {
    await proxy?.close();
    await member?.stop();
  });

  it("a compacted startRevision ends the iteration with EtcdCompactedError and closes the connection", async () => {
    const r1 = (await direct.put("c/k", "1")).header.revision;
    await direct.put("c/k", "2");
    const r3 = (await direct.put("c/k", "3")).header.revision;
    await direct.compact(r3);

    const viaProxy = new Etcd({ endpoints: proxy.url, timeout: 5_000 });
    const watch = open(viaProxy, { prefix: "c/", startRevision: r1 });
    const error = await within(5_000, "compacted watch", watch.next()).then(
      (r) => r,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(EtcdCompactedError);
    expect(error).toMatchObject({ code: "COMPACTED", compactRevision: r3 });
    await eventually("watch connection closed after COMPACTED", 1_500, async () => {
      if (proxy.connections() !== 0) throw new Error(`${proxy.connections()} connections still open`);
    });
    // The generator is finished.
    expect(await watch.next()).toEqual({ done: true, value: undefined });
    // From the compaction revision on, the watch works.
    const ok = open(direct, { prefix: "c/", startRevision: r3 });
    {
      expect(summary(await pull(ok, eventCount(1), 5_000))).toEqual([["put", "c/k", "3", undefined]]);
    }
  });

  it("progressNotify delivers empty batches carrying the current revision while nothing changes", async () => {
    const rev = (await direct.put("p/unrelated", "x")).header.revision;
    const watch = open(direct, { prefix: "p/quiet/", progressNotify: true });
    {
      const batches = await pull(watch, (b) => b.length >= 1, 5_000);
      expect(batches[0]!.events).toEqual([]);
      expect(batches[0]!.header.revision).toBeGreaterThanOrEqual(rev);
      // And real events still come through after progress notifications.
      const written = (await direct.put("p/quiet/k", "v")).header.revision;
      const more = await pull(watch, (b) => events(b).length >= 1, 5_000, batches);
      expect(events(more).map((e) => e.kv.modRevision)).toEqual([written]);
    }
  });

  it("without progressNotify no empty batch arrives", async () => {
    const watch = open(direct, { prefix: "p/silent/" });
    {
      const next = watch.next();
      const outcome = await Promise.race([next.then(() => "batch"), sleep(2_500).then(() => "nothing")]);
      expect(outcome).toBe("nothing");
    }
  });
});

describe("closing", () => {
  let proxy: TcpProxy;
  beforeAll(async () => {
    proxy = await startTcpProxy(sharedEndpoint());
  });
  afterAll(async () => {
    await proxy?.close();
  });

  const connectionsDropToZero = () =>
    eventually(
      "proxy connections back to 0",
      1_000,
      async () => {
        if (proxy.connections() !== 0) throw new Error(`${proxy.connections()} connections still open`);
      },
      20,
    );

  it("aborting the signal ends the iteration promptly with ABORTED (reason as cause) and closes the connection", async () => {
    const ns = uniquePrefix("watch-abort");
    const viaProxy = client({ endpoints: proxy.url });
    const controller = new AbortController();
    const watch = open(viaProxy, { prefix: ns, signal: controller.signal });
    const next = watch.next();
    await eventually("watch connected", 5_000, async () => {
      if (proxy.connections() < 1) throw new Error("not connected");
    });
    const reason = new Error("test is done watching");
    const abortedAt = Date.now();
    controller.abort(reason);
    const error = await within(1_000, "aborted watch", next).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(Date.now() - abortedAt).toBeLessThan(1_000);
    expect(error).toBeInstanceOf(EtcdError);
    expect(error).toMatchObject({ code: "ABORTED", cause: reason });
    await connectionsDropToZero();
  });

  it("an already-aborted signal fails the first next() with ABORTED and opens nothing", async () => {
    const viaProxy = client({ endpoints: proxy.url });
    const reason = new Error("never mind");
    const watch = open(viaProxy, { prefix: uniquePrefix("watch-pre-aborted"), signal: AbortSignal.abort(reason) });
    await expect(watch.next()).rejects.toMatchObject({ code: "ABORTED", cause: reason });
    expect(proxy.connections()).toBe(0);
  });

  it("break out of for-await closes the connection", async () => {
    const ns = uniquePrefix("watch-break");
    const viaProxy = client({ endpoints: proxy.url });
    const rev = (await etcd.put(`${ns}k`, "v")).header.revision;
    const seen: string[] = [];
    await within(
      5_000,
      "for-await with break",
      (async () => {
        for await (const batch of viaProxy.watch({ prefix: ns, startRevision: rev })) {
          seen.push(...batch.events.map((e) => e.kv.value));
          break;
        }
      })(),
    );
    expect(seen).toEqual(["v"]);
    await connectionsDropToZero();
  });
});
