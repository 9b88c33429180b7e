// Watch streams as etcd serves them: several requests per body (watch IDs, cancel, progress), start revisions at
// and around compaction, prev_kv read at the previous revision.
import { describe, expect, it } from "vitest";
import { createMockEtcd } from "../../src/testing/index.js";
import { sleep } from "../support/async.js";
import { MOCK_ENDPOINT, rawWatch as watch } from "../support/mock.js";
import { b64 } from "../support/wire.js";

const create = (key: string, extra: object = {}) => ({ create_request: { key: b64(key), ...extra } });

describe("several requests on one stream", () => {
  it("watch IDs: auto from 0, chosen ones kept, duplicates refused; cancel answers only for a live watch", async () => {
    const mock = createMockEtcd();
    const w = await watch(
      mock,
      create("a", { watch_id: "5" }),
      create("a", { watch_id: 5 }),
      create("b"),
      { cancel_request: { watch_id: 9 } },
      { cancel_request: { watch_id: "5" } },
    );
    const lines = await w.lines();
    expect(lines.map((l) => [l.watch_id, l.created, l.canceled, l.cancel_reason])).toEqual([
      ["5", true, undefined, undefined],
      ["-1", true, true, "mvcc: duplicate watch ID provided on the WatchStream"],
      [undefined, true, undefined, undefined],
      ["5", undefined, true, undefined],
    ]);
    mock.put("a", "1");
    mock.put("b", "1");
    // Watch 5 is gone; watch 0 (on b) sees its event, with no watch_id (0 is omitted).
    expect((await w.lines()).map((l) => [l.watch_id, l.events.map((e: any) => atob(e.kv.key))])).toEqual([
      [undefined, ["b"]],
    ]);
    w.abort();
  });

  it("progress_request: 3.4 always answers with watch_id -1; 3.5 only when every watcher is synced", async () => {
    for (const version of ["3.4", "3.5"] as const) {
      const mock = createMockEtcd({ version });
      mock.put("k", "1");
      // Alone on its stream: 3.5 sends nothing, so not even the response headers.
      const abort = new AbortController();
      const alone = mock.fetch(`${MOCK_ENDPOINT}/v3/watch`, {
        method: "POST",
        body: JSON.stringify({ progress_request: {} }),
        signal: abort.signal,
      });
      const answered = await Promise.race([alone.then(() => true), new Promise((r) => setTimeout(() => r(false), 30))]);
      expect(answered).toBe(version === "3.4");
      abort.abort();
      await alone.then(
        (res) => res.body?.cancel().catch(() => {}),
        () => {},
      );
      const synced = await watch(mock, create("k"), { progress_request: {} });
      expect((await synced.lines()).map((l) => l.watch_id)).toEqual([undefined, "-1"]);
      synced.abort();
      // A watcher that starts in the past is caught up only after the requests that came with it.
      const behind = await watch(mock, create("k", { start_revision: "2" }), { progress_request: {} });
      const lines = await behind.lines();
      expect(lines.map((l) => (l.created ? "created" : l.events ? "events" : "progress"))).toEqual(
        version === "3.4" ? ["created", "progress", "events"] : ["created", "events"],
      );
      behind.abort();
    }
  });
});

describe("start revisions", () => {
  it("a negative start: no history replayed before compaction (live events only); compacted after", async () => {
    const mock = createMockEtcd();
    mock.put("k", "1");
    const w = await watch(mock, create("k", { start_revision: "-1" }));
    expect((await w.lines()).map((l) => l.created ?? l.events)).toEqual([true]);
    mock.put("k", "2");
    expect((await w.lines())[0].events[0].kv.value).toBe(b64("2"));
    const older = await watch(mock, create("k", { start_revision: "-5" }));
    // -5 is below the first revision etcd keeps (-1 before any compaction).
    expect((await older.lines())[1]).toMatchObject({ canceled: true, compact_revision: "-1" });
    w.abort();
    older.abort();
  });

  it("a negative start empties the catch-up of every watcher synced with it, as etcd 3.4 and 3.5 do", async () => {
    const mock = createMockEtcd();
    mock.put("k", "1");
    mock.put("k", "2"); // revision 3
    // Alone, a past start replays its history.
    const alone = await watch(mock, create("k", { start_revision: "3" }));
    expect((await alone.lines()).map((l) => l.events?.[0].kv.value)).toEqual([undefined, b64("2")]);
    // Beside a negative start in the same catch-up, it replays nothing; both see what comes next.
    const beside = await watch(
      mock,
      create("k", { start_revision: "3", watch_id: 1 }),
      create("k", { start_revision: "-1", watch_id: 2 }),
    );
    expect((await beside.lines()).map((l) => [l.watch_id, l.created ?? l.events.length])).toEqual([
      ["1", true],
      ["2", true],
    ]);
    mock.put("k", "3");
    expect((await beside.lines()).map((l) => [l.watch_id, l.events[0].kv.value])).toEqual([
      ["1", b64("3")],
      ["2", b64("3")],
    ]);
    // A start below the first revision kept is canceled for compaction and leaves the others' catch-up alone
    // (revisions 3 and 4 here).
    const canceled = await watch(
      mock,
      create("k", { start_revision: "3", watch_id: 1 }),
      create("k", { start_revision: "-5", watch_id: 2 }),
    );
    expect((await canceled.lines()).map((l) => [l.watch_id, l.canceled ?? l.events?.length ?? "created"])).toEqual([
      ["1", "created"],
      ["2", "created"],
      ["1", 2],
      ["2", true],
    ]);
    for (const w of [alone, beside, canceled]) w.abort();
  });

  it("from exactly the compact revision: 3.4 replays its puts but not its deletes; 3.5 keeps both", async () => {
    for (const version of ["3.4", "3.5"] as const) {
      const mock = createMockEtcd({ version });
      mock.put("a", "1"); // 2
      await mock.fetch(`${MOCK_ENDPOINT}/v3/kv/txn`, {
        method: "POST",
        body: JSON.stringify({
          success: [{ request_delete_range: { key: b64("a") } }, { request_put: { key: b64("b"), value: b64("x") } }],
        }),
      }); // 3: delete a, put b
      mock.put("b", "y"); // 4
      mock.compact(3);
      const w = await watch(mock, create("a", { range_end: b64("c"), start_revision: "3", prev_kv: true }));
      const [, replay] = await w.lines();
      const deleteAt3 = version === "3.5" ? [["DELETE", "a", "3", undefined]] : [];
      expect(
        replay.events.map((e: any) => [e.type ?? "PUT", atob(e.kv.key), e.kv.mod_revision, e.prev_kv?.mod_revision]),
      ).toEqual([
        // prev_kv of the delete would be read at revision 2: compacted, so none.
        ...deleteAt3,
        ["PUT", "b", "3", undefined],
        // prev_kv is read at revision 3: kept.
        ["PUT", "b", "4", "3"],
      ]);
      w.abort();
    }
  });

  it("prev_kv is read at the revision before the event: none once that revision is compacted", async () => {
    const mock = createMockEtcd();
    mock.put("p", "1"); // 2
    mock.put("p", "2"); // 3
    mock.put("p", "3"); // 4
    mock.compact(3);
    const w = await watch(mock, create("p", { start_revision: "3", prev_kv: true }));
    const [, replay] = await w.lines();
    expect(replay.events.map((e: any) => e.prev_kv?.value)).toEqual([undefined, b64("2")]);
    w.abort();
  });
});

describe("Grpc-Timeout (the call's deadline)", () => {
  const openWith = async (timeout: string) => {
    const mock = createMockEtcd();
    const abort = new AbortController();
    const res = await mock.fetch(`${MOCK_ENDPOINT}/v3/watch`, {
      method: "POST",
      headers: { "grpc-timeout": timeout },
      body: JSON.stringify(create("a")),
      signal: abort.signal,
    });
    const text = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    return { mock, abort, text };
  };

  it("ends the stream there with the deadline's line, however busy it is", async () => {
    const { mock, text } = await openWith("200m");
    const put = setInterval(() => mock.put("a", "1"), 20);
    let all = "";
    try {
      for (;;) {
        const { value, done } = await text.read();
        if (done) break;
        all += value;
      }
    } finally {
      clearInterval(put);
    }
    const lines = all.split("\n").filter((line) => line !== "");
    expect(lines.length).toBeGreaterThan(2);
    expect(JSON.parse(lines.at(-1)!)).toEqual({
      error: { grpc_code: 4, http_code: 504, message: "context deadline exceeded", http_status: "Gateway Timeout" },
    });
  });

  it("beyond setTimeout's limit (1000H) it does not end the stream at once", async () => {
    const { abort, text } = await openWith("1000H");
    expect(JSON.parse((await text.read()).value!).result.created).toBe(true);
    const next = text.read();
    const outcome = await Promise.race([next.then(() => "ended"), sleep(300).then(() => "open")]);
    abort.abort();
    next.catch(() => {});
    expect(outcome).toBe("open");
  });
});
