// Failover over a real 3-member cluster of the project's version, plus call timeouts and aborts against a
// server that never answers and endpoints that refuse connections.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cmp, EtcdError, EtcdTimeoutError, op, type WatchBatch } from "../../src/index.js";
import { sleep, within } from "../support/async.js";
import { type ChannelLog, logChannels } from "../support/channels.js";
import { client, events, pull, recordingFetch, sharedEndpoint, uniquePrefix } from "../support/etcd.js";
import { closedPortUrl, silentServer } from "../support/loopback.js";
import { makeLeader, startCluster, type EtcdCluster } from "./harness.js";

describe("3-member cluster", () => {
  let cluster: EtcdCluster;
  const controllers = new Set<AbortController>();
  /** Every channel message from the stop on: the watch's reconnection is published on watch.reconnect. */
  let channels: ChannelLog | undefined;
  beforeAll(async () => {
    cluster = await startCluster(3);
    // The first endpoint must be a follower: stopping a leader makes writes wait for an election, which
    // tests elections rather than the client's failover.
    await makeLeader(cluster, 1);
  });
  afterAll(async () => {
    channels?.stop();
    for (const c of controllers) c.abort(new Error("done"));
    await cluster?.stop();
  });

  const newClient = () => {
    const fetch = recordingFetch();
    return { etcd: client({ endpoints: cluster.endpoints, timeout: 5_000, fetch }), fetch };
  };
  const ns = uniquePrefix("failover");
  let writer: ReturnType<typeof newClient>;
  let txner: ReturnType<typeof newClient>;
  let reader: ReturnType<typeof newClient>;
  let watcher: ReturnType<typeof newClient>;
  let watch: AsyncIterator<WatchBatch>;
  let seen: WatchBatch[] = [];
  const revisions: number[] = [];

  it("before the stop, every client talks to the first endpoint", async () => {
    writer = newClient();
    txner = newClient();
    reader = newClient();
    watcher = newClient();
    revisions.push((await writer.etcd.put(`${ns}k0`, "0")).header.revision);
    expect(
      (
        await txner.etcd
          .txn()
          .if(cmp.version(`${ns}k0`, "==", 1))
          .commit()
      ).succeeded,
    ).toBe(true);
    expect(await reader.etcd.get(`${ns}k0`)).toMatchObject({ value: "0" });

    const controller = new AbortController();
    controllers.add(controller);
    watch = watcher.etcd
      .watch({ prefix: ns, startRevision: revisions[0]!, signal: controller.signal })
      [Symbol.asyncIterator]();
    seen = await pull(watch, (b) => events(b).length >= 1, 5_000);

    for (const c of [writer, txner, reader, watcher]) {
      expect(new Set(c.fetch.calls.map((call) => call.endpoint))).toEqual(new Set([cluster.endpoints[0]]));
      c.fetch.calls.length = 0;
    }
    channels = logChannels();
    await cluster.members[0]!.stop();
  });

  it("a write fails over: refused by the stopped member (so provably not sent), applied once on the next", async () => {
    const put = await writer.etcd.put(`${ns}k1`, "1");
    revisions.push(put.header.revision);
    expect(writer.fetch.calls.map((c) => [c.endpoint, c.status ?? "refused"])).toEqual([
      [cluster.endpoints[0], "refused"],
      [cluster.endpoints[1], 200],
    ]);
    expect(String((writer.fetch.calls[0]!.error as Error & { cause?: { code?: string } }).cause?.code)).toBe(
      "ECONNREFUSED",
    );
    const kv = await writer.etcd.get(`${ns}k1`);
    expect(kv).toMatchObject({ value: "1", version: 1 });
  });

  it("a txn with writes fails over the same way", async () => {
    const result = await txner.etcd
      .txn()
      .if(cmp.version(`${ns}k1`, "==", 1))
      .then(op.put(`${ns}k2`, "2"), op.get(`${ns}k1`))
      .commit();
    expect(result.succeeded).toBe(true);
    if (result.succeeded) expect(result.responses[1].kvs[0]).toMatchObject({ value: "1" });
    revisions.push(result.header.revision);
    expect(txner.fetch.calls.map((c) => [c.endpoint, c.status ?? "refused"])).toEqual([
      [cluster.endpoints[0], "refused"],
      [cluster.endpoints[1], 200],
    ]);
  });

  it("a read fails over, and later calls stay on the healthy member", async () => {
    expect(await reader.etcd.get(`${ns}k2`)).toMatchObject({ value: "2" });
    expect((await reader.etcd.range({ prefix: ns })).count).toBe(3);
    expect(reader.fetch.calls.map((c) => [c.endpoint, c.status ?? "refused"])).toEqual([
      [cluster.endpoints[0], "refused"],
      [cluster.endpoints[1], 200],
      [cluster.endpoints[1], 200],
    ]);
  });

  it("the watch reconnects to another member and delivers every revision once, in order", async () => {
    for (let i = 3; i < 6; i++) revisions.push((await writer.etcd.put(`${ns}k${i}`, String(i))).header.revision);
    await pull(watch, (b) => events(b).length >= revisions.length, 10_000, seen).catch((error: unknown) => {
      const calls = watcher.fetch.calls.map((c) => `${c.path}@${c.endpoint}:${c.status ?? String(c.error)}`);
      throw new Error(
        `watch failed after ${JSON.stringify(events(seen).map((e) => e.kv.modRevision))}, calls ${calls.join(", ")}`,
        {
          cause: error,
        },
      );
    });
    expect(events(seen).map((e) => e.kv.modRevision)).toEqual(revisions);
    expect(events(seen).map((e) => e.kv.value)).toEqual(["0", "1", "2", "3", "4", "5"]);
    const reopened = watcher.fetch.calls.filter((c) => c.path === "/v3/watch" && c.status === 200);
    expect(reopened.length).toBeGreaterThanOrEqual(1);
    expect(reopened.every((c) => c.endpoint !== cluster.endpoints[0])).toBe(true);
    // A watch's first stream lives a second (FIRST_STREAM_MS): its renewal may already have moved it to a live
    // member before the stopped one's stream broke (3.6 and 3.7 keep a stopping member's streams open, silent, and
    // the successor takes over). When it broke first, a tracer sees the break: where the stream was, why it
    // ended, and the revision it resumes from.
    const reconnects = channels!.seen.filter((s) => s.event === "watch.reconnect").map((s) => s.message);
    for (const reconnect of reconnects) {
      expect(reconnect).toMatchObject({ endpoint: cluster.endpoints[0], code: expect.any(String) });
      expect(reconnect.revision).toBeGreaterThan(revisions[0]!);
    }
  });

  it("a member without quorum fails fast with UNAVAILABLE (requireLeader), not after ~7 s", async () => {
    // Only member 2 left of 3: no quorum, so no leader once the election timeout passes.
    await cluster.members[1]!.stop();
    const lonely = client({ endpoints: cluster.endpoints[2]!, timeout: 3_000, retries: 0 });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const error = await lonely.get(`${ns}k0`).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (error instanceof EtcdError && error.code === "UNAVAILABLE") break;
      if (Date.now() > deadline) throw new Error(`member 2 still answers without quorum: ${String(error)}`);
      await sleep(200);
    }
    const started = Date.now();
    await expect(lonely.get(`${ns}k0`)).rejects.toMatchObject({
      code: "UNAVAILABLE",
      message: expect.stringMatching(/no leader/),
    });
    await expect(lonely.put(`${ns}k9`, "x")).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("with every endpoint down, calls fail with UNAVAILABLE, bounded, well within the timeout", async () => {
    await cluster.members[2]!.stop();
    const etcd = client({ endpoints: cluster.endpoints, timeout: 5_000 });
    const started = Date.now();
    await expect(etcd.get(`${ns}k0`)).rejects.toMatchObject({ code: "UNAVAILABLE" });
    await expect(etcd.put(`${ns}k0`, "x")).rejects.toMatchObject({ code: "UNAVAILABLE" });
    await expect(
      etcd
        .txn()
        .then(op.put(`${ns}k0`, "x"))
        .commit(),
    ).rejects.toMatchObject({ code: "UNAVAILABLE" });
    await expect(etcd.lease.grant(10)).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(Date.now() - started).toBeLessThan(4_000);
  });
});

describe("timeout and abort", () => {
  let silent: Awaited<ReturnType<typeof silentServer>>;
  beforeAll(async () => {
    silent = await silentServer();
    // Load Node's fetch before timing anything.
    await fetch(`${silent.url}/`, { signal: AbortSignal.timeout(50) }).catch(() => {});
  });
  afterAll(async () => {
    await silent?.close();
  });
  // No check that the silent server's connections close after a TIMEOUT: Node's fetch (undici) keeps a socket
  // whose request was aborted before any response open until the server answers (seen with plain fetch too),
  // so that would test undici, not this client. Streams (watch) do close: watch-connections.test.ts tests it.

  /** Runs `call`, timing from before it starts (the first fetch of a process loads undici synchronously). */
  async function timed<T>(call: () => Promise<T>): Promise<{ error: unknown; ms: number }> {
    const started = Date.now();
    const error = await within(5_000, "call against a silent server", call()).then(
      () => undefined,
      (e: unknown) => e,
    );
    return { error, ms: Date.now() - started };
  }

  it("a server that accepts and never answers: TIMEOUT after the client's timeout", async () => {
    const etcd = client({ endpoints: silent.url, timeout: 400 });
    const { error, ms } = await timed(() => etcd.get("k"));
    expect(error).toBeInstanceOf(EtcdTimeoutError);
    expect(error).toMatchObject({ code: "TIMEOUT", timeout: 400 });
    expect(ms).toBeGreaterThanOrEqual(300);
    expect(ms).toBeLessThan(1_500);
  });

  it("the per-call timeout overrides the client's, for writes and leases too", async () => {
    const etcd = client({ endpoints: silent.url, timeout: 60_000 });
    const calls: Array<() => Promise<unknown>> = [
      () => etcd.put("k", "v", { timeout: 300 }),
      () => etcd.lease.grant(10, { timeout: 300 }),
    ];
    for (const call of calls) {
      const { error, ms } = await timed(call);
      expect(error).toMatchObject({ code: "TIMEOUT", timeout: 300 });
      expect(ms).toBeGreaterThanOrEqual(200);
      expect(ms).toBeLessThan(1_500);
    }
  });

  it("a watch whose server never sends its first message: TIMEOUT, not a hang", async () => {
    const etcd = client({ endpoints: silent.url, timeout: 300 });
    const iterator = etcd.watch({ prefix: "p/", retries: 0 })[Symbol.asyncIterator]();
    const { error, ms } = await timed(() => iterator.next());
    expect(error).toMatchObject({ code: "TIMEOUT" });
    expect(ms).toBeLessThan(2_000);
  });

  it("a caller's AbortSignal: ABORTED promptly, with the signal's reason as cause", async () => {
    const etcd = client({ endpoints: silent.url, timeout: 10_000 });
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    setTimeout(() => controller.abort(reason), 150);
    const { error, ms } = await timed(() => etcd.get("k", { signal: controller.signal }));
    expect(error).toBeInstanceOf(EtcdError);
    expect(error).toMatchObject({ code: "ABORTED", cause: reason });
    expect(ms).toBeLessThan(1_000);
  });

  it("an already-aborted signal: ABORTED without sending anything", async () => {
    const fetch = recordingFetch();
    const etcd = client({ endpoints: silent.url, fetch });
    const reason = new Error("too late");
    await expect(etcd.put("k", "v", { signal: AbortSignal.abort(reason) })).rejects.toMatchObject({
      code: "ABORTED",
      cause: reason,
    });
    expect(fetch.calls).toHaveLength(0);
  });

  it("refused connections on every endpoint: UNAVAILABLE quickly, for reads and writes", async () => {
    const endpoints = [await closedPortUrl(), await closedPortUrl()];
    const fetch = recordingFetch();
    const etcd = client({ endpoints, timeout: 5_000, retries: 3, fetch });
    const started = Date.now();
    await expect(etcd.get("k")).rejects.toMatchObject({ code: "UNAVAILABLE" });
    await expect(etcd.put("k", "v")).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(Date.now() - started).toBeLessThan(3_000);
    // retries: 3 means 4 attempts per call, alternating endpoints.
    expect(fetch.calls).toHaveLength(8);
    expect(new Set(fetch.calls.map((c) => c.endpoint))).toEqual(new Set(endpoints.map((e) => new URL(e).origin)));
  });

  // A member that accepts connections but hangs (stalled disk, SIGSTOP) costs a repeatable call one attempt,
  // not its whole budget: the read moves on to the healthy member after `attemptTimeout`.
  it("a read that hits a hung endpoint moves on after one attempt and succeeds within its budget", async () => {
    const etcd = client({ endpoints: [silent.url, sharedEndpoint()], timeout: 2_000, attemptTimeout: 300 });
    const { error, ms } = await timed(() => etcd.get(`${uniquePrefix("failover-hung")}k`));
    expect(error).toBeUndefined();
    expect(ms).toBeGreaterThanOrEqual(250);
    expect(ms).toBeLessThan(2_000);
  });

  // When one attempt may take the whole budget, the call times out; the client must not stay stuck on the
  // hung member for every later call.
  it("after a TIMEOUT on a hung endpoint, the next call moves on to a healthy one", async () => {
    const etcd = client({ endpoints: [silent.url, sharedEndpoint()], timeout: 500, attemptTimeout: 500 });
    await expect(etcd.get("k")).rejects.toMatchObject({ code: "TIMEOUT" });
    const { error } = await timed(() => etcd.get(`${uniquePrefix("failover-hung")}k`));
    expect(error).toBeUndefined();
  });
});
