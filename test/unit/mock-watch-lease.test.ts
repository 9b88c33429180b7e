import { describe, expect, it } from "vitest";
import { createMockEtcd, PROGRESS_NOTIFY_INTERVAL_MS, type MockEtcd } from "../../src/testing/index.js";
import { call } from "../support/mock.js";
import { b64 } from "../support/wire.js";

const BASE = "http://etcd.test:2379";

/** Opens a watch and exposes its NDJSON lines as parsed objects. */
async function openWatch(mock: MockEtcd, createRequest: object) {
  const abort = new AbortController();
  const res = await mock.fetch(`${BASE}/v3/watch`, {
    method: "POST",
    body: JSON.stringify({ create_request: createRequest }),
    signal: abort.signal,
  });
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  const lines: any[] = [];
  // One outstanding read at a time, shared by next() and pending(), so no chunk is ever lost.
  let inflight: Promise<ReadableStreamReadResult<string>> | undefined;
  const read = async () => {
    inflight ??= reader.read();
    const result = await inflight;
    inflight = undefined;
    if (result.done) throw new Error("stream ended");
    buffer += result.value;
    const parts = buffer.split("\n");
    buffer = parts.pop()!;
    lines.push(...parts.filter((l) => l !== "").map((l) => JSON.parse(l)));
  };
  const next = async (): Promise<any> => {
    while (lines.length === 0) await read();
    return lines.shift();
  };
  /** Whether a line arrives within a few ms (after queued deliveries ran). */
  const pending = async () => {
    if (lines.length > 0) return true;
    const timeout = new Promise<"none">((r) => setTimeout(() => r("none"), 10));
    const got = await Promise.race([read().then(() => "line" as const), timeout]);
    return got === "line" && lines.length > 0;
  };
  return { res, next, pending, abort, reader };
}

const keysOf = (line: any) => line.result.events.map((e: any) => [e.type ?? "PUT", atob(e.kv.key)]);

describe("watch", () => {
  it(
    "first line created (no watch_id), then one line per revision; " + "PUT has no type; txn events share a line",
    async () => {
      const mock = createMockEtcd();
      const w = await openWatch(mock, { key: b64("w"), range_end: b64("x"), prev_kv: true });
      expect(w.res.headers.get("content-type")).toBe("application/json");
      const created = await w.next();
      expect(created).toEqual({ result: { header: expect.objectContaining({ revision: "1" }), created: true } });
      mock.put("w", "1");
      await call(mock, "/v3/kv/txn", {
        success: [{ request_put: { key: b64("w"), value: b64("2") } }, { request_put: { key: b64("wx") } }],
      });
      await call(mock, "/v3/kv/deleterange", { key: b64("w") });
      const put1 = await w.next();
      expect(put1.result).toEqual({
        header: expect.objectContaining({ revision: "2" }),
        events: [{ kv: { key: b64("w"), create_revision: "2", mod_revision: "2", version: "1", value: b64("1") } }],
      });
      expect(keysOf(await w.next())).toEqual([
        ["PUT", "w"],
        ["PUT", "wx"],
      ]);
      const del = await w.next();
      expect(del.result.events).toEqual([
        {
          type: "DELETE",
          kv: { key: b64("w"), mod_revision: "4" },
          prev_kv: { key: b64("w"), create_revision: "2", mod_revision: "3", version: "2", value: b64("2") },
        },
      ]);
      w.abort.abort();
      await expect(w.next()).rejects.toThrow();
      expect(mock.openWatchStreams).toBe(0);
    },
  );

  it("delivers asynchronously, never inside the writer's call", async () => {
    const mock = createMockEtcd();
    const w = await openWatch(mock, { key: b64("a") });
    await w.next();
    mock.put("a", "1");
    // The reader has nothing until a microtask runs.
    expect(await w.pending()).toBe(true);
  });

  it("filters NOPUT/NODELETE (names or numbers); nothing is sent when all events are filtered", async () => {
    const mock = createMockEtcd();
    const noPut = await openWatch(mock, { key: b64("f"), filters: ["NOPUT"] });
    const noDel = await openWatch(mock, { key: b64("f"), filters: [1] });
    await noPut.next();
    await noDel.next();
    mock.put("f", "1");
    await call(mock, "/v3/kv/deleterange", { key: b64("f") });
    expect(keysOf(await noPut.next())).toEqual([["DELETE", "f"]]);
    expect(keysOf(await noDel.next())).toEqual([["PUT", "f"]]);
    expect(await noDel.pending()).toBe(false);
  });

  it("start_revision replays history in one message headed by the current revision", async () => {
    const mock = createMockEtcd();
    mock.put("r", "1");
    mock.put("r", "2");
    mock.put("other", "x");
    const w = await openWatch(mock, { key: b64("r"), start_revision: "2" });
    await w.next();
    const replay = await w.next();
    expect(replay.result.header.revision).toBe("4");
    expect(replay.result.events.map((e: any) => e.kv.mod_revision)).toEqual(["2", "3"]);
  });

  it("compacted start_revision: created, then canceled with compact_revision; the stream stays open", async () => {
    const mock = createMockEtcd();
    mock.put("c", "1");
    mock.put("c", "2");
    mock.put("c", "3");
    mock.compact(3);
    const w = await openWatch(mock, { key: b64("c"), start_revision: 2 });
    expect((await w.next()).result.created).toBe(true);
    const canceled = await w.next();
    expect(canceled.result).toEqual({
      header: { cluster_id: expect.any(String), member_id: expect.any(String), raft_term: "2" },
      canceled: true,
      compact_revision: "3",
    });
    expect(mock.openWatchStreams).toBe(1);
    w.abort.abort();
    expect(mock.openWatchStreams).toBe(0);
  });

  it("empty range is refused in the first line", async () => {
    const mock = createMockEtcd();
    const w = await openWatch(mock, { key: b64("b"), range_end: b64("a") });
    expect((await w.next()).result).toMatchObject({
      watch_id: "-1",
      created: true,
      canceled: true,
      cancel_reason: "mvcc: watcher range is empty",
    });
  });

  it("progress_notify lines carry only the header, every 10 virtual minutes", async () => {
    const mock = createMockEtcd();
    const w = await openWatch(mock, { key: b64("p"), progress_notify: true });
    await w.next();
    mock.advance(PROGRESS_NOTIFY_INTERVAL_MS - 1);
    expect(await w.pending()).toBe(false);
    mock.advance(1);
    expect(await w.next()).toEqual({ result: { header: expect.objectContaining({ revision: "1" }) } });
  });

  it("faults.cutStreams errors every open body as a dropped connection", async () => {
    const mock = createMockEtcd();
    const w = await openWatch(mock, { key: b64("k") });
    await w.next();
    mock.faults.cutStreams();
    await expect(w.next()).rejects.toThrow(TypeError);
    expect(mock.openWatchStreams).toBe(0);
  });

  it("a watch without create_request never answers until aborted", async () => {
    const mock = createMockEtcd();
    const abort = new AbortController();
    const pending = mock.fetch(`${BASE}/v3/watch`, { method: "POST", body: "{}", signal: abort.signal });
    setTimeout(() => abort.abort(), 10);
    await expect(pending).rejects.toThrow(/abort/i);
  });
});

describe("lease", () => {
  it("grant raises TTL to 2 s, IDs are decimal strings; duplicate ID is code 9/412", async () => {
    const mock = createMockEtcd();
    const g = await call(mock, "/v3/lease/grant", { TTL: 1 });
    expect(g.body).toEqual({
      header: expect.objectContaining({ revision: "1" }),
      ID: expect.stringMatching(/^[1-9]\d*$/),
      TTL: "2",
    });
    expect(BigInt(g.body.ID) < 2n ** 63n).toBe(true);
    await call(mock, "/v3/lease/grant", { TTL: 30, ID: "1000" });
    expect(await call(mock, "/v3/lease/grant", { TTL: 30, ID: "1000" })).toEqual({
      status: 412,
      body: { error: "etcdserver: lease already exists", message: "etcdserver: lease already exists", code: 9 },
    });
    expect((await call(mock, "/v3/lease/grant", { TTL: 9_000_000_001 })).body.code).toBe(11);
  });

  it("keepalive answers one NDJSON line then ends; TTL omitted for unknown leases", async () => {
    const mock = createMockEtcd();
    await call(mock, "/v3/lease/grant", { TTL: 10, ID: "7" });
    mock.advance(4_000);
    const res = await mock.fetch(`${BASE}/v3/lease/keepalive`, { method: "POST", body: JSON.stringify({ ID: "7" }) });
    const text = await res.text();
    expect(text.endsWith("\n")).toBe(true);
    expect(JSON.parse(text)).toEqual({ result: { header: expect.any(Object), ID: "7", TTL: "10" } });
    // Right after a renewal etcd says 9, not 10: it truncates the time left, and some time always passed.
    const ttl = await call(mock, "/v3/lease/timetolive", { ID: "7" });
    expect(ttl.body).toMatchObject({ ID: "7", TTL: "9", grantedTTL: "10" });
    const gone = await (
      await mock.fetch(`${BASE}/v3/lease/keepalive`, { method: "POST", body: JSON.stringify({ ID: "8" }) })
    ).json();
    expect(gone.result).not.toHaveProperty("TTL");
  });

  it(
    "timetolive with keys; unknown lease is 200 with TTL -1; " + "leases lists; revoke deletes keys in one revision",
    async () => {
      const mock = createMockEtcd();
      await call(mock, "/v3/lease/grant", { TTL: 30, ID: "5" });
      await call(mock, "/v3/kv/put", { key: b64("l1"), lease: "5" });
      await call(mock, "/v3/kv/put", { key: b64("l2"), lease: "5" });
      expect((await call(mock, "/v3/lease/timetolive", { ID: "5", keys: true })).body.keys).toEqual([
        b64("l1"),
        b64("l2"),
      ]);
      expect((await call(mock, "/v3/lease/timetolive", { ID: "6" })).body).toEqual({
        header: expect.any(Object),
        ID: "6",
        TTL: "-1",
      });
      expect((await call(mock, "/v3/lease/leases", {})).body.leases).toEqual([{ ID: "5" }]);
      expect((await call(mock, "/v3/lease/revoke", { ID: "5" })).body.header.revision).toBe("4");
      expect(mock.keys()).toEqual([]);
      expect((await call(mock, "/v3/lease/revoke", { ID: "5" })).status).toBe(404);
    },
  );

  it("expiry on advance deletes all attached keys in one revision, and watchers see it", async () => {
    const mock = createMockEtcd();
    await call(mock, "/v3/lease/grant", { TTL: 5, ID: "9" });
    await call(mock, "/v3/kv/put", { key: b64("e/a"), lease: "9" });
    await call(mock, "/v3/kv/put", { key: b64("e/b"), lease: "9" });
    mock.put("e/c", "no lease");
    const w = await openWatch(mock, { key: b64("e/"), range_end: b64("e0") });
    await w.next();
    mock.advance(4_999);
    expect(mock.keys("e/")).toHaveLength(3);
    mock.advance(1);
    expect(mock.keys("e/")).toEqual(["e/c"]);
    expect(mock.revision).toBe(5);
    const line = await w.next();
    expect(line.result.header.revision).toBe("5");
    expect(keysOf(line)).toEqual([
      ["DELETE", "e/a"],
      ["DELETE", "e/b"],
    ]);
    expect(mock.leases()).toEqual([]);
  });

  it("leaderChange bumps raft_term and refreshes every lease to its full TTL", async () => {
    const mock = createMockEtcd();
    await call(mock, "/v3/lease/grant", { TTL: 10, ID: "3" });
    mock.advance(9_000);
    mock.faults.leaderChange();
    mock.advance(8_500);
    expect(mock.leases()).toMatchObject([{ id: 3n, remaining: 1 }]);
    expect((await call(mock, "/v3/kv/range", { key: b64("x") })).body.header.raft_term).toBe("3");
  });
});
