// Watch streams over real connections: what the conformance suite (test/conformance/conformance-watch.test.ts)
// cannot show on the in-memory gateway. A TCP relay in front of the member cuts live streams and counts open
// sockets: resume after cut connections without a lost or repeated revision, connections closed on COMPACTED,
// abort and break, and the member-wide progress notifications.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Etcd, EtcdCompactedError, EtcdError, type Fetch, type WatchBatch } from "../../src/index.js";
import { sleep, within } from "../support/async.js";
import {
  client,
  eventCount,
  events,
  eventually,
  pull,
  recordingFetch,
  sharedEndpoint,
  uniquePrefix,
  useWatches,
} from "../support/etcd.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { progressNotifyFlag, startEtcd, type EtcdMember } from "./harness.js";

const etcd = client();

/** The store's current revision (of the shared member). */
async function currentRevision(c: Etcd = etcd): Promise<number> {
  return (await c.range({ key: "\0revision-probe" })).header.revision;
}

const open = useWatches();

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
  });
});

describe("renewal at the end the server was asked for (idleTimeout)", () => {
  // etcd ends every watch stream `idleTimeout` after it opened (Grpc-Timeout is the call's deadline, not a
  // silence), however busy. A stream opened only then starts behind the store, and etcd catches such a watch
  // up on a pass every 100 ms: the changes of its first moments came up to 100 ms late, a stall of a hot
  // lock's handoff at each renewal. The successor is opened ahead, so it has caught up when it takes over.
  it("a busy stream's successor is opened before the stream ends, and no revision is lost or repeated", async () => {
    const ns = uniquePrefix("watch-renew");
    /** Each watch request: when it was sent, whether it resumes from a revision, when the server ended it. */
    const streams: { sentAt: number; resumes: boolean; endedAt?: number }[] = [];
    const fetch: Fetch = async (input, init) => {
      if (!input.endsWith("/v3/watch")) return globalThis.fetch(input, init);
      const stream: (typeof streams)[number] = {
        sentAt: performance.now(),
        resumes: init.body.includes("start_revision"),
      };
      streams.push(stream);
      const response = await globalThis.fetch(input, init);
      if (response.body === null) return response;
      // The server's end is its deadline's error message (the client stops reading there), or a close.
      const decoder = new TextDecoder();
      const ends = new TransformStream<Uint8Array, Uint8Array>({
        transform: (chunk, controller) => {
          if (decoder.decode(chunk, { stream: true }).includes('"error"')) stream.endedAt ??= performance.now();
          controller.enqueue(chunk);
        },
        flush: () => {
          stream.endedAt ??= performance.now();
        },
      });
      return new Response(response.body.pipeThrough(ends), { status: response.status, headers: response.headers });
    };
    const renewing = client({ fetch });
    const start = (await currentRevision()) + 1;
    const watch = open(renewing, { prefix: ns, startRevision: start, idleTimeout: 1_000 });
    // About 3 s of writes every 20 ms: at least two renewals while changes keep coming.
    const N = 120;
    const received: WatchBatch[] = [];
    const consumer = pull(watch, eventCount(N), 30_000, received);
    const revisions: number[] = [];
    const until = performance.now() + 3_000;
    for (let i = 0; i < N; i++) {
      revisions.push((await etcd.put(`${ns}${String(i).padStart(3, "0")}`, String(i))).header.revision);
      if (performance.now() < until) await sleep(20);
    }
    await consumer;
    expect(events(received).map((e) => e.kv.modRevision)).toEqual(revisions);
    const ended = streams.filter((s) => s.endedAt !== undefined);
    expect(ended.length).toBeGreaterThanOrEqual(2);
    // Every stream after the first resumes from a revision, and every one the server ended had its successor
    // sent before that end (the last successor may not have taken over yet when the watch was closed).
    expect(streams.slice(1).every((s) => s.resumes)).toBe(true);
    for (const [i, stream] of streams.entries()) {
      if (stream.endedAt === undefined) continue;
      expect(streams[i + 1]?.sentAt).toBeLessThan(stream.endedAt);
    }
  });
});

describe("dedicated member (compaction and progress notifications are member-wide)", () => {
  let member: EtcdMember;
  let proxy: TcpProxy;
  let direct: Etcd;
  beforeAll(async () => {
    member = await startEtcd({ extraArgs: [progressNotifyFlag("1s")] });
    proxy = await startTcpProxy(member.clientUrl);
    direct = client({ endpoints: member.clientUrl });
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

    const viaProxy = client({ endpoints: proxy.url });
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
  });

  it("progressNotify delivers empty batches carrying the current revision while nothing changes", async () => {
    const rev = (await direct.put("p/unrelated", "x")).header.revision;
    const watch = open(direct, { prefix: "p/quiet/", progressNotify: true });
    const batches = await pull(watch, (b) => b.length >= 1, 5_000);
    expect(batches[0]!.events).toEqual([]);
    expect(batches[0]!.header.revision).toBeGreaterThanOrEqual(rev);
    // And real events still come through after progress notifications.
    const written = (await direct.put("p/quiet/k", "v")).header.revision;
    const more = await pull(watch, (b) => events(b).length >= 1, 5_000, batches);
    expect(events(more).map((e) => e.kv.modRevision)).toEqual([written]);
  });

  it("without progressNotify no empty batch arrives", async () => {
    const watch = open(direct, { prefix: "p/silent/" });
    const next = watch.next();
    const outcome = await Promise.race([next.then(() => "batch"), sleep(2_500).then(() => "nothing")]);
    expect(outcome).toBe("nothing");
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

  it(
    "aborting the signal ends the iteration promptly " + "with ABORTED (reason as cause) and closes the connection",
    async () => {
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
    },
  );

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
