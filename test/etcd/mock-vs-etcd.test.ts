/// <reference path="./provided.d.ts" />
// Sends the same raw gateway requests to a real etcd member and to the mock speaking that member's version
// (3.4 to 3.7), and compares answers.
//
// A private member (not the shared one from global-setup): vitest runs files in parallel, so the shared
// member's revision moves under us, and the auth scenario must enable auth. A fresh member and a fresh mock both
// start at revision 1 and stay in lockstep, so revisions are compared exactly, not as deltas.
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMockEtcd, type EtcdVersion, type MockEtcd } from "../../src/testing/index.js";
import { until } from "../support/async.js";
import { APP_ROLES } from "../support/mock.js";
import { b64 } from "../support/wire.js";
import { addUser, enableAuth, startEtcd, type EtcdMember } from "./harness.js";

/** The gateway dialect of a member, from its /version. */
async function versionOf(member: EtcdMember): Promise<EtcdVersion> {
  const { etcdserver } = (await (await fetch(`${member.clientUrl}/version`)).json()) as { etcdserver: string };
  const minor = etcdserver.split(".").slice(0, 2).join(".");
  if (minor === "3.4" || minor === "3.5" || minor === "3.6" || minor === "3.7") return minor;
  throw new Error(`the mock speaks etcd 3.4 to 3.7, not ${etcdserver}`);
}

type Step = [path: string, body: unknown];
interface Answer {
  status: number;
  body: unknown;
}

/**
 * Drops what legitimately differs: cluster/member IDs and raft term, random lease IDs and the seconds a lease has
 * left (when asked: the mock's clock stands still).
 */
function normalise(value: unknown, opts: { leaseIds?: boolean; ttls?: boolean } = {}): unknown {
  if (Array.isArray(value)) return value.map((v) => normalise(v, opts));
  // protobuf-go picks the space after "proto:" per binary (U+0020 or U+00A0), to discourage matching on it.
  if (typeof value === "string") return value.replace(/^proto:[\u00a0 ]/, "proto: ");
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === "cluster_id" || k === "member_id" || k === "raft_term") out[k] = "<n>";
    else if (k === "ID" && opts.leaseIds) out[k] = "<id>";
    else if (k === "TTL" && opts.ttls) out[k] = "<ttl>";
    else if (k === "token") out[k] = "<token>";
    else out[k] = normalise(v, opts);
  }
  return out;
}

async function answer(res: Response): Promise<Answer> {
  const text = await res.text();
  const lines = text.split("\n").filter((l) => l !== "");
  try {
    return { status: res.status, body: lines.length > 1 ? lines.map((l) => JSON.parse(l)) : JSON.parse(text) };
  } catch {
    return { status: res.status, body: text };
  }
}

describe("mock vs real etcd (same raw requests)", () => {
  let member: EtcdMember;
  let mock: MockEtcd;
  const real = (path: string, init?: RequestInit) => fetch(`${member.clientUrl}${path}`, init);
  const fake = (path: string, init?: RequestInit) => mock.fetch(`http://etcd.test:2379${path}`, init);

  async function both(path: string, body: unknown, init: RequestInit = {}): Promise<[Answer, Answer]> {
    const req = (): RequestInit => ({
      method: "POST",
      body: typeof body === "string" ? body : JSON.stringify(body),
      ...init,
    });
    const r = await answer(await real(path, req()));
    const m = await answer(await fake(path, req()));
    return [r, m];
  }

  async function same(steps: Step[], opts: { leaseIds?: boolean } = {}): Promise<void> {
    for (const [path, body] of steps) {
      const [r, m] = await both(path, body);
      expect({ step: [path, body], ...(normalise(m, opts) as object) }).toEqual({
        step: [path, body],
        ...(normalise(r, opts) as object),
      });
    }
  }

  let version: EtcdVersion;
  beforeAll(async () => {
    member = await startEtcd();
    version = await versionOf(member);
    mock = createMockEtcd({ version });
  });
  afterAll(async () => {
    await member?.stop();
  });

  it("kv: put, range options, deleterange, zero-value omission, errors", async () => {
    const k = b64;
    await same([
      ["/v3/kv/range", { key: k("a") }],
      ["/v3/kv/put", { key: k("a"), value: b64("1") }],
      ["/v3/kv/put", { key: k("b"), value: "" }],
      ["/v3/kv/put", { key: k("s1"), value: b64("b") }],
      ["/v3/kv/put", { key: k("s2"), value: b64("a") }],
      ["/v3/kv/put", { key: k("s3"), value: b64("c") }],
      ["/v3/kv/put", { key: k("a"), value: b64("2"), prev_kv: true }],
      ["/v3/kv/put", { key: k("a"), ignore_value: true, prevKv: true }],
      ["/v3/kv/range", { key: k("a"), range_end: "AA==" }],
      ["/v3/kv/range", { key: "AA==", range_end: "AA==", limit: 2 }],
      ["/v3/kv/range", { key: "AA==", range_end: "AA==", limit: 2, count_only: true }],
      ["/v3/kv/range", { key: "AA==", range_end: "AA==", keys_only: true }],
      ["/v3/kv/range", { key: "AA==", range_end: "AA==", min_mod_revision: 4, limit: 1 }],
      ["/v3/kv/range", { key: "AA==", range_end: "AA==", max_mod_revision: 3 }],
      ["/v3/kv/range", { key: "AA==", range_end: "AA==", min_create_revision: "3", max_create_revision: "5" }],
      ["/v3/kv/range", { key: k("s"), range_end: k("t"), sort_target: "VALUE" }],
      ["/v3/kv/range", { key: k("s"), range_end: k("t"), sort_target: 4, sort_order: 2, limit: 2 }],
      ["/v3/kv/range", { key: k("s"), range_end: k("t"), sortTarget: "MOD", sortOrder: "DESCEND", keysOnly: true }],
      ["/v3/kv/range", { key: k("s"), range_end: k("t"), sort_order: "ASCEND", sort_target: "CREATE" }],
      ["/v3/kv/range", { key: k("t"), range_end: k("s") }],
      ["/v3/kv/range", { key: k("s1"), revision: 2 }],
      ["/v3/kv/range", { key: k("a"), revision: 1000 }],
      ["/v3/kv/range", { key: k("a"), limit: "-1", serializable: true }],
      ["/v3/kv/put", { key: k("x"), ignore_lease: true }],
      ["/v3/kv/put", { key: k("x"), value: b64("1"), ignore_value: true }],
      ["/v3/kv/put", { key: k("x"), lease: "123" }],
      ["/v3/kv/put", { key: k("x"), lease: "123", ignore_lease: true }],
      ["/v3/kv/put", { key: "", value: b64("1") }],
      ["/v3/kv/range", {}],
      ["/v3/kv/range", { key: "YQ" }],
      ["/v3/kv/range", { key: k("a"), sort_order: "BOGUS" }],
      ["/v3/kv/range", { key: k("a"), unknown_field: 1 }],
      ["/v3/kv/range", '{"key":"YQ==",'],
      ["/v3/kv/deleterange", { key: k("zzz") }],
      ["/v3/kv/deleterange", { key: k("s"), range_end: k("t"), prev_kv: true }],
      ["/v3/kv/deleterange", { key: k("b") }],
      ["/v3/kv/put", { key: k("b"), value: b64("again") }],
      ["/v3/kv/range", { key: k("b") }],
    ]);
  });

  it("txn: compares, branches, nesting, shared revision, errors", async () => {
    const k = (s: string) => b64(`t/${s}`);
    const put = (s: string, v = "v") => ({ request_put: { key: k(s), value: b64(v) } });
    const get = (s: string) => ({ request_range: { key: k(s) } });
    await same([
      ["/v3/kv/txn", {}],
      ["/v3/kv/txn", { compare: [{ key: k("q") }], success: [put("q"), put("r"), get("q")], failure: [get("q")] }],
      [
        "/v3/kv/txn",
        {
          compare: [{ key: k("q") }],
          success: [put("q")],
          failure: [get("q"), { request_delete_range: { key: k("none") } }],
        },
      ],
      ["/v3/kv/txn", { success: [get("q"), put("q", "2")] }],
      [
        "/v3/kv/txn",
        {
          compare: [{ key: k("q"), target: "VALUE", result: "GREATER", value: b64("1") }],
          success: [{ request_delete_range: { key: k("q"), prev_kv: true } }, { request_txn: { success: [put("s")] } }],
        },
      ],
      ["/v3/kv/txn", { success: [{ request_txn: {} }] }],
      [
        "/v3/kv/txn",
        {
          success: [
            put("n"),
            { request_txn: { compare: [{ key: k("n") }], success: [put("m")], failure: [put("o")] } },
          ],
        },
      ],
      ["/v3/kv/txn", { compare: [{ key: k("missing"), target: "VALUE", result: "NOT_EQUAL", value: b64("x") }] }],
      ["/v3/kv/txn", { compare: [{ key: k("missing"), target: "CREATE", result: "EQUAL", create_revision: "0" }] }],
      ["/v3/kv/txn", { compare: [{ key: k("missing"), target: "LEASE", result: "EQUAL" }] }],
      ["/v3/kv/txn", { compare: [{ key: k("r"), target: "MOD", result: "LESS", mod_revision: "1000" }] }],
      ["/v3/kv/txn", { compare: [{ key: k("r"), target: 2, result: 1, mod_revision: "1" }] }],
      ["/v3/kv/txn", { compare: [{ key: k("r"), target: "VERSION", result: "EQUAL", mod_revision: "5" }] }],
      [
        "/v3/kv/txn",
        { compare: [{ key: k(""), range_end: b64("t0"), target: "VERSION", result: "GREATER", version: "0" }] },
      ],
      [
        "/v3/kv/txn",
        { compare: [{ key: k(""), range_end: b64("t0"), target: "MOD", result: "GREATER", mod_revision: "12" }] },
      ],
      [
        "/v3/kv/txn",
        {
          compare: [{ key: k(""), range_end: b64("t0"), target: "CREATE", result: "NOT_EQUAL", create_revision: "0" }],
          success: [{ request_range: { key: k(""), range_end: b64("t0") } }],
        },
      ],
      [
        "/v3/kv/txn",
        { success: [{ request_delete_range: { key: k("z") } }, { request_delete_range: { key: k("z") } }] },
      ],
      ["/v3/kv/txn", { success: [put("d")], failure: [put("d")] }],
      ["/v3/kv/txn", { success: [put("d"), put("d")] }],
      ["/v3/kv/txn", { success: [put("d"), { request_delete_range: { key: k("d") } }] }],
      ["/v3/kv/txn", { success: [put("d"), { request_txn: { success: [put("d")] } }] }],
      ["/v3/kv/txn", { success: [{ request_txn: { success: [put("d")] } }, { request_txn: { failure: [put("d")] } }] }],
      ["/v3/kv/txn", { success: [{ request_delete_range: { key: k(""), range_end: "AA==" } }, put("d")] }],
      ["/v3/kv/txn", { success: [{}] }],
      ["/v3/kv/txn", { compare: [{ key: "" }] }],
      ["/v3/kv/txn", { success: [{ request_put: { key: k("d"), lease: "99" } }] }],
      ["/v3/kv/txn", { success: [{ request_put: { key: k("nokey"), ignore_lease: true } }] }],
      ["/v3/kv/txn", { success: [{ request_put: { key: k("d"), ignore_lease: true, lease: "5" } }] }],
      ["/v3/kv/txn", { success: [{ request_range: { key: k("q"), revision: 1000 } }] }],
      ["/v3/kv/txn", { success: Array.from({ length: 129 }, (_, i) => get(`many${i}`)) }],
      ["/v3/kv/txn", { success: Array.from({ length: 128 }, (_, i) => get(`many${i}`)) }],
    ]);
  });

  it("lease: grant, attach, timetolive, keepalive, leases, revoke, errors", async () => {
    const k = (s: string) => b64(`l/${s}`);
    await same([
      ["/v3/lease/grant", { TTL: 30, ID: "1000" }],
      ["/v3/lease/grant", { TTL: 30, ID: "1000" }],
      ["/v3/lease/grant", { TTL: 1, ID: "1001" }],
      ["/v3/lease/grant", { ttl: 60, ID: "1002" }],
      ["/v3/lease/grant", { TTL: 9_000_000_001 }],
      ["/v3/lease/grant", { TTL: 30, ID: "-3" }],
      ["/v3/kv/put", { key: k("a"), lease: "1000" }],
      ["/v3/kv/put", { key: k("b"), lease: "1000" }],
      ["/v3/kv/put", { key: k("a"), prev_kv: true, lease: "1001" }],
      ["/v3/kv/put", { key: k("a"), ignore_lease: true, value: b64("v") }],
      ["/v3/lease/keepalive", { ID: "1000" }],
      ["/v3/lease/keepalive", { ID: "424242" }],
      ["/v3/lease/keepalive", { ID: "0" }],
      ["/v3/lease/timetolive", { ID: "424242", keys: true }],
      ["/v3/lease/timetolive", {}],
      ["/v3/lease/revoke", { ID: "424242" }],
      ["/v3/lease/revoke", { ID: "0" }],
      ["/v3/lease/revoke", { ID: "1000" }],
      ["/v3/kv/range", { key: k(""), range_end: b64("l0") }],
      ["/v3/lease/revoke", { ID: "1002" }],
      ["/v3/lease/revoke", { ID: "-3" }],
    ]);
    // A random ID: shape only.
    await same([["/v3/lease/grant", { TTL: 5 }]], { leaseIds: true });
    const [r, m] = await both("/v3/lease/timetolive", { ID: "1001", keys: true });
    const { TTL: realTtl, ...realRest } = r.body as Record<string, string>;
    const { TTL: mockTtl, ...mockRest } = m.body as Record<string, string>;
    expect(normalise(mockRest)).toEqual(normalise(realRest));
    // Real time passed on the real member; the mock's clock stands still.
    expect(Number(realTtl)).toBeGreaterThanOrEqual(Number(mockTtl) - 2);
    // Listing order is by expiry; the random-ID lease (5 s) sorts first on both.
    const [lr, lm] = await both("/v3/lease/leases", {});
    expect(normalise(lm, { leaseIds: true })).toEqual(normalise(lr, { leaseIds: true }));
    await same([["/v3/lease/revoke", { ID: "1001" }]]);
  });

  it("watch: created line, live events, txn batching, filters, prev_kv, history replay, empty range", async () => {
    const k = (s: string) => b64(`w/${s}`);
    const specs = [
      { key: k(""), range_end: b64("w0"), prev_kv: true },
      { key: k(""), range_end: b64("w0"), filters: ["NOPUT"] },
      { key: k("a"), filters: [1] },
      { key: k("a"), start_revision: "2" },
      { key: k("b"), range_end: k("a") },
    ];
    const openAll = async (open: (path: string, init: RequestInit) => Promise<Response>) => {
      const abort = new AbortController();
      const streams = await Promise.all(
        specs.map(async (spec) => {
          const res = await open("/v3/watch", {
            method: "POST",
            body: JSON.stringify({ create_request: spec }),
            signal: abort.signal,
          });
          return { status: res.status, lines: collect(res.body!) };
        }),
      );
      return { abort, streams };
    };
    const r = await openAll(real);
    const m = await openAll(fake);
    await new Promise((res) => setTimeout(res, 200));
    const writes: Step[] = [
      ["/v3/lease/grant", { TTL: 30, ID: "78" }],
      ["/v3/kv/put", { key: k("a"), value: b64("1") }],
      [
        "/v3/kv/txn",
        {
          success: [
            { request_put: { key: k("a"), value: b64("2"), lease: "78" } },
            { request_put: { key: k("b"), lease: "78" } },
          ],
        },
      ],
      ["/v3/lease/revoke", { ID: "78" }],
      ["/v3/kv/put", { key: k("a"), value: "" }],
      ["/v3/kv/deleterange", { key: k("a"), prev_kv: true }],
    ];
    await same(writes);
    await new Promise((res) => setTimeout(res, 500));
    r.abort.abort();
    m.abort.abort();
    const realLines = r.streams.map((s) => ({ status: s.status, lines: normalise(s.lines.lines) }));
    const mockLines = m.streams.map((s) => ({ status: s.status, lines: normalise(s.lines.lines) }));
    expect(mockLines).toEqual(realLines);
    expect(realLines[0]!.lines).toHaveLength(6);
  });

  // Before the compaction test below: after any compaction a negative start is canceled as compacted instead.
  it("watch: a negative start empties the catch-up of a past start beside it (3.4, 3.5), or is refused", async () => {
    // Two watchers' events of one revision come in either order on etcd.
    type Line = { result: { watch_id: string; created?: boolean; events?: { kv: { value: string } }[] } };
    const story = (lines: unknown[]) =>
      (lines as Line[])
        .map(({ result: l }) => [l.watch_id, l.created ?? l.events!.map((e) => atob(e.kv.value)).join()])
        .sort((a, b) => Number(a[1] !== true) - Number(b[1] !== true) || String(a[0]).localeCompare(String(b[0])));
    // What etcd 3.4 and 3.5 do when one sync (every 100 ms) finds both watchers: the batch reads history from
    // its lowest start as an unsigned key, so neither watch replays revision 2 or 3; both get the next put.
    // 3.6 refuses a negative start (afeab20ac): canceled at once as watch -1, the other replays and goes on.
    const refused = [
      ["-1", true],
      ["1", true],
      ["1", "1,2"],
      ["1", "3"],
    ];
    const batched = [
      ["1", true],
      ["2", true],
      ["1", "3"],
      ["2", "3"],
    ];
    // A sync can fall between the two creates (CI saw it once on 3.5): the first watcher is then caught up alone
    // and replays "1,2". That timing is etcd's, not the mock's, so such a round is tried again on a fresh key.
    const alone = [
      ["1", true],
      ["2", true],
      ["1", "1,2"],
      ["1", "3"],
      ["2", "3"],
    ];
    for (let round = 0; ; round++) {
      const k = b64(`neg/k${round}`);
      await same([
        ["/v3/kv/put", { key: k, value: b64("1") }],
        ["/v3/kv/put", { key: k, value: b64("2") }],
      ]);
      const body = [
        { create_request: { key: k, start_revision: String(mock.revision - 1), watch_id: 1 } },
        { create_request: { key: k, start_revision: "-1", watch_id: 2 } },
      ]
        .map((r) => JSON.stringify(r))
        .join("");
      const open = async (fn: (path: string, init: RequestInit) => Promise<Response>) => {
        const abort = new AbortController();
        const res = await fn("/v3/watch", { method: "POST", body, signal: abort.signal });
        return { abort, stream: collect(res.body!) };
      };
      const [r, m] = [await open(real), await open(fake)];
      await new Promise((res) => setTimeout(res, 300));
      await same([["/v3/kv/put", { key: k, value: b64("3") }]]);
      await new Promise((res) => setTimeout(res, 200));
      r.abort.abort();
      m.abort.abort();
      const seen = story(r.stream.lines);
      if (version !== "3.4" && version !== "3.5") {
        expect(seen).toEqual(refused);
      } else {
        if (round < 4 && JSON.stringify(seen) === JSON.stringify(alone)) continue;
        expect(seen).toEqual(batched);
      }
      expect(story(m.stream.lines)).toEqual(seen);
      return;
    }
  });

  it("watch from a compacted revision; compaction errors; range at compacted revision", async () => {
    const k = b64("c/k");
    await same([
      ["/v3/kv/put", { key: k, value: b64("1") }],
      ["/v3/kv/put", { key: k, value: b64("2") }],
    ]);
    const rev = (mock.revision - 1).toString();
    await same([
      ["/v3/kv/compaction", { revision: rev }],
      ["/v3/kv/compaction", { revision: rev }],
      ["/v3/kv/compaction", { revision: "100000", physical: true }],
      ["/v3/kv/range", { key: k, revision: rev }],
      ["/v3/kv/range", { key: k, revision: Number(rev) - 1 }],
    ]);
    const open = async (fn: (path: string, init: RequestInit) => Promise<Response>) => {
      const abort = new AbortController();
      const res = await fn("/v3/watch", {
        method: "POST",
        body: JSON.stringify({ create_request: { key: k, start_revision: 2 } }),
        signal: abort.signal,
      });
      const c = collect(res.body!);
      await new Promise((res) => setTimeout(res, 300));
      const ended = c.ended;
      abort.abort();
      return { lines: normalise(c.lines), ended };
    };
    const [r, m] = [await open(real), await open(fake)];
    expect(m).toEqual(r);
    expect(r.ended).toBe(false);
  });

  it("Grpc-Timeout: a watch ends at its deadline however busy, a waiting call gets 504, bad values fail", async () => {
    const k = b64("deadline/k");
    const watchFor = async (open: (path: string, init: RequestInit) => Promise<Response>, ms: number) => {
      const res = await open("/v3/watch", {
        method: "POST",
        headers: { "grpc-timeout": `${ms}m` },
        body: JSON.stringify({ create_request: { key: k } }),
      });
      const stream = collect(res.body!);
      // A change while the stream lives: its end is the deadline's, not a quiet stream's.
      await open("/v3/kv/put", { method: "POST", body: JSON.stringify({ key: k, value: b64("v") }) });
      await until("the stream ends at its deadline", 5_000, () => stream.ended);
      return { status: res.status, lines: normalise(stream.lines) };
    };
    // 3.7's gateway now and then ends the stream on the server's reset before its own deadline fires: the same
    // code 4, grpc-go's words for the reset. Either is the deadline's end; the mock says the deadline's.
    const reset = /"message":"stream terminated by RST_STREAM with error code: CANCEL"/;
    // 3.4 now and then reports the same deadline as Unknown (2, 500): the stream's context ended before grpc-go's
    // own deadline fired (seen on CI's loaded machine). The same end; the mock says DeadlineExceeded.
    const seen = await watchFor(real, 400);
    const r = JSON.parse(JSON.stringify(seen).replace(reset, '"message":"context deadline exceeded"')) as typeof seen;
    for (const line of r.lines as Array<{ error?: Record<string, unknown> }>) {
      const error = line.error;
      if (error?.message !== "context deadline exceeded" || error.grpc_code !== 2) continue;
      Object.assign(error, { grpc_code: 4, http_code: 504, http_status: "Gateway Timeout" });
    }
    const m = await watchFor(fake, 400);
    expect(m).toEqual(r);
    expect(r.lines).toHaveLength(3);

    // v3lock's lock on a held name waits; its deadline ends it with 504 and the deadline's error.
    const name = b64("deadline-lock");
    await same([
      ["/v3/lease/grant", { TTL: 30, ID: "91" }],
      ["/v3/lease/grant", { TTL: 30, ID: "92" }],
      ["/v3/lock/lock", { name, lease: "91" }],
    ]);
    const timed = { headers: { "grpc-timeout": "300m" } };
    const [rLock, mLock] = await both("/v3/lock/lock", { name, lease: "92" }, timed);
    // Either side of the race (the gateway's reset or the server's own deadline) may word the same end: code 4, 504;
    // and 3.4, as for the watch above, now and then as Unknown (2, 500).
    const deadline = (a: Answer) => {
      const said = JSON.parse(JSON.stringify(normalise(a)).replace(reset, '"message":"context deadline exceeded"'));
      if (said.status === 500 && said.body?.code === 2 && said.body.message === "context deadline exceeded")
        Object.assign(said, { status: 504, body: { ...said.body, code: 4 } });
      return said;
    };
    expect(deadline(mLock)).toEqual(deadline(rLock));
    expect(deadline(rLock)).toMatchObject({ status: 504, body: { code: 4 } });
    await same([
      ["/v3/lease/revoke", { ID: "91" }],
      ["/v3/lease/revoke", { ID: "92" }],
    ]);

    // A value the gateway cannot read is refused before the call, as a plain answer even on a stream.
    for (const [path, body] of [
      ["/v3/kv/range", { key: k }],
      ["/v3/watch", { create_request: { key: k } }],
    ] as const) {
      const [rBad, mBad] = await both(path, body, { headers: { "grpc-timeout": "Infinitym" } });
      expect({ path, ...mBad }).toEqual({ path, ...rBad });
      expect(rBad.status).toBe(400);
    }
  });

  it("HTTP surface: unknown path, wrong method", async () => {
    for (const [path, init] of [
      ["/v3/kv/nope", { method: "POST", body: "{}" }],
      ["/v3/kv/range", { method: "GET" }],
      ["/v3/kv/range", { method: "PUT", body: "{}" }],
      ["/v3/kv/range/", { method: "POST", body: "{}" }],
    ] as const) {
      const r = await answer(await real(path, init));
      const m = await answer(await fake(path, init));
      expect({ path, ...m }).toEqual({ path, ...r });
    }
  });
});

describe("mock vs real etcd: odd requests", () => {
  let member: EtcdMember;
  let mock: MockEtcd;
  let version: EtcdVersion;
  const real = (path: string, init?: RequestInit) => fetch(`${member.clientUrl}${path}`, init);
  const fake = (path: string, init?: RequestInit) => mock.fetch(`http://etcd.test:2379${path}`, init);
  const post = (body: unknown): RequestInit => ({ method: "POST", body: JSON.stringify(body) });

  beforeAll(async () => {
    member = await startEtcd();
    version = await versionOf(member);
    mock = createMockEtcd({ version });
  });
  afterAll(async () => {
    await member?.stop();
  });

  it("GET /health (3.5 adds a reason) and /v3/auth/status (3.5 on; 3.4 has no such path)", async () => {
    for (const [path, init] of [
      ["/health", { method: "GET" }],
      ["/v3/auth/status", post({})],
    ] as const) {
      const r = await answer(await real(path, init));
      const m = await answer(await fake(path, init));
      expect({ path, ...(normalise(m) as object) }).toEqual({ path, ...(normalise(r) as object) });
    }
  });

  it("a txn RequestOp carrying both request_range and request_put", async () => {
    const key = b64("two");
    const body = { success: [{ request_range: { key }, request_put: { key } }] };
    // 3.5 and later refuse it: compared once, exactly.
    if (version !== "3.4") {
      const r = await answer(await real("/v3/kv/txn", post(body)));
      const m = await answer(await fake("/v3/kv/txn", post(body)));
      expect(normalise(m)).toEqual(normalise(r));
      expect(r.status).toBe(400);
      return;
    }
    // 3.4's jsonpb keeps the member its walk of a Go map visits last, from a random start: the put 7 times in 8.
    const SENDS = 160;
    const outcomes = async (send: typeof real) => {
      const seen = { put: 0, range: 0 };
      for (let i = 0; i < SENDS; i++) {
        const { responses } = (await (await send("/v3/kv/txn", post(body))).json()) as { responses: object[] };
        const kinds = responses.map((r) => Object.keys(r)[0]);
        expect(kinds.length === 1 && ["response_put", "response_range"].includes(kinds[0]!)).toBe(true);
        seen[kinds[0] === "response_put" ? "put" : "range"]++;
      }
      return seen;
    };
    for (const seen of [await outcomes(real), await outcomes(fake)]) {
      expect(seen.put).toBeGreaterThan(seen.range);
      expect(seen.range).toBeGreaterThan(0);
    }
  });

  // Last: the member is gone after it.
  it("a txn that makes etcd panic: the mock says so, naming the version and etcd's words", async () => {
    const key = b64("p");
    const txn = {
      success: [{ request_delete_range: { key, range_end: "AA==" } }, { request_put: { key, ignore_value: true } }],
    };
    for (const send of [real, fake])
      expect((await send("/v3/kv/put", post({ key, value: b64("v") }))).status).toBe(200);
    await expect(real("/v3/kv/txn", post(txn))).rejects.toThrow();
    const m = await answer(await fake("/v3/kv/txn", post(txn)));
    const message = (m.body as { message: string }).message;
    expect(m.status).toBe(500);
    expect(message).toContain(`etcd ${version} panics on this txn`);
    const logged = /\((.*)\)$/.exec(message)![1]!;
    const log = await until("etcd's panic in its log", 10_000, () => {
      const text = readFileSync(member.logFile, "utf8");
      // Go prints the goroutines after the panic message, so once they are there the message is whole.
      return text.includes("goroutine ") ? text : undefined;
    });
    for (const part of logged.split(": ")) expect(log).toContain(part);
  });
});

describe("mock vs real etcd with auth enabled", () => {
  let member: EtcdMember;
  let mock: MockEtcd;

  beforeAll(async () => {
    member = await startEtcd();
    await enableAuth(member, { rootPassword: "rootpw" });
    await addUser(member, { rootPassword: "rootpw", user: "app", password: "apppw", prefix: "app/" });
    await addUser(member, { rootPassword: "rootpw", user: "reader", password: "rpw", prefix: "app/", readOnly: true });
    // May write under app/ but not read: what a put's prev_kv needs shows.
    const asRoot = "--user=root:rootpw";
    await member.etcdctl(asRoot, "user", "add", "writer", "--new-user-password=wpw", "--interactive=false");
    await member.etcdctl(asRoot, "role", "add", "writer-role");
    await member.etcdctl(asRoot, "role", "grant-permission", "writer-role", "write", "app/", "--prefix");
    await member.etcdctl(asRoot, "user", "grant-role", "writer", "writer-role");
    mock = createMockEtcd({
      version: await versionOf(member),
      auth: APP_ROLES,
    });
  });
  afterAll(async () => {
    await member?.stop();
  });

  it("same statuses and error bodies for token, permission and login failures", async () => {
    const login = async (base: (p: string, i: RequestInit) => Promise<Response>, name: string, password: string) =>
      (
        (await (
          await base("/v3/auth/authenticate", { method: "POST", body: JSON.stringify({ name, password }) })
        ).json()) as { token: string }
      ).token;
    const real = (p: string, i: RequestInit) => fetch(`${member.clientUrl}${p}`, i);
    const fake = (p: string, i: RequestInit) => mock.fetch(`http://etcd.test:2379${p}`, i);
    const tokens = {
      real: {
        app: await login(real, "app", "apppw"),
        reader: await login(real, "reader", "rpw"),
        writer: await login(real, "writer", "wpw"),
        root: await login(real, "root", "rootpw"),
      },
      fake: {
        app: await login(fake, "app", "apppw"),
        reader: await login(fake, "reader", "rpw"),
        writer: await login(fake, "writer", "wpw"),
        root: await login(fake, "root", "rootpw"),
      },
    };
    const put = (key: string, more: object = {}) => ({ request_put: { key: b64(key), ...more } });
    const cases: [string, unknown, "app" | "reader" | "writer" | "root" | "none" | "bad" | "bearer"][] = [
      ["/v3/auth/authenticate", { name: "app", password: "wrong" }, "none"],
      ["/v3/auth/authenticate", { name: "ghost", password: "x" }, "none"],
      ["/v3/kv/range", { key: b64("app/x") }, "none"],
      ["/v3/kv/range", { key: b64("app/x") }, "bad"],
      ["/v3/kv/range", { key: b64("app/x") }, "bearer"],
      ["/v3/kv/put", { key: b64("app/x"), value: b64("1") }, "app"],
      ["/v3/kv/range", { key: b64("app/x") }, "reader"],
      ["/v3/kv/put", { key: b64("app/y") }, "reader"],
      ["/v3/kv/put", { key: b64("other") }, "app"],
      ["/v3/kv/range", { key: b64("app/"), range_end: b64("app0") }, "reader"],
      ["/v3/kv/range", { key: b64("app/"), range_end: b64("app1") }, "reader"],
      ["/v3/kv/deleterange", { key: b64("other") }, "app"],
      ["/v3/kv/txn", { compare: [{ key: b64("other") }], success: [{ request_put: { key: b64("app/z") } }] }, "app"],
      ["/v3/kv/txn", { compare: [{ key: b64("app/x") }], success: [{ request_put: { key: b64("app/z") } }] }, "app"],
      ["/v3/kv/range", { key: b64("other") }, "root"],
      ["/v3/lease/grant", { TTL: 10, ID: "55" }, "none"],
      ["/v3/lease/grant", { TTL: 10, ID: "56" }, "bad"],
      ["/v3/kv/put", { key: b64("other"), lease: "55" }, "root"],
      // Listing a lease's keys needs read on them from 3.4.26 / 3.5.9.
      ["/v3/lease/timetolive", { ID: "55", keys: true }, "app"],
      ["/v3/lease/timetolive", { ID: "55", keys: true }, "root"],
      ["/v3/lease/timetolive", { ID: "55" }, "bad"],
      ["/v3/lease/timetolive", { ID: "4242", keys: true }, "none"],
      ["/v3/lease/timetolive", { ID: "4242", keys: true }, "bad"],
      // Attaching a lease needs write on the keys it holds (so that one could revoke it), but not inside a txn
      // before 3.5.30 / 3.6.11; nor does a nested put's prev_kv need read there, nor is a nested txn checked.
      ["/v3/kv/put", { key: b64("app/l"), lease: "55" }, "app"],
      ["/v3/kv/txn", { success: [put("app/l", { lease: "55" })] }, "app"],
      ["/v3/kv/put", { key: b64("app/w"), prev_kv: true }, "writer"],
      ["/v3/kv/txn", { success: [put("app/w", { prev_kv: true })] }, "writer"],
      // Renewing and listing leases look at no token before 3.5.28 / 3.6.9, not even a bad one.
      ["/v3/lease/keepalive", { ID: "55" }, "bad"],
      ["/v3/lease/keepalive", { ID: "55" }, "reader"],
      ["/v3/lease/leases", {}, "bad"],
      ["/v3/lease/revoke", { ID: "55" }, "app"],
      ["/v3/kv/txn", { success: [{ request_txn: { success: [put("other", { value: b64("x") })] } }] }, "app"],
      ["/v3/kv/txn", { success: [{ request_txn: { compare: [{ key: b64("other") }] } }] }, "reader"],
      ["/v3/lease/revoke", { ID: "55" }, "root"],
      // The auth store's status is an admin call, from 3.5 on.
      ["/v3/auth/status", {}, "none"],
      ["/v3/auth/status", {}, "reader"],
      ["/v3/auth/status", {}, "root"],
    ];
    for (const [path, body, who] of cases) {
      const header = (side: "real" | "fake"): Record<string, string> =>
        who === "none"
          ? {}
          : who === "bad"
            ? { authorization: "garbage" }
            : who === "bearer"
              ? { authorization: `Bearer ${tokens[side].app}` }
              : { authorization: tokens[side][who] };
      const init = (side: "real" | "fake"): RequestInit => ({
        method: "POST",
        body: JSON.stringify(body),
        headers: header(side),
      });
      const r = await answer(await real(path, init("real")));
      const m = await answer(await fake(path, init("fake")));
      const ttls = path === "/v3/lease/timetolive";
      expect({ path, body, who, ...(normalise(m, { ttls }) as object) }).toEqual({
        path,
        body,
        who,
        ...(normalise(r, { ttls }) as object),
      });
    }
    for (const who of ["none", "bad", "reader"] as const) {
      const watch = async (side: "real" | "fake", base: typeof real) => {
        const abort = new AbortController();
        const auth: Record<string, string> =
          who === "none" ? {} : { authorization: who === "bad" ? "garbage" : tokens[side][who] };
        const res = await base("/v3/watch", {
          method: "POST",
          body: JSON.stringify({ create_request: { key: b64("other") } }),
          headers: auth,
          signal: abort.signal,
        });
        const c = collect(res.body!);
        await new Promise((r) => setTimeout(r, 200));
        abort.abort();
        return { status: res.status, lines: normalise(c.lines) };
      };
      expect({ who, ...(await watch("fake", fake)) }).toEqual({ who, ...(await watch("real", real)) });
    }
  });
});

/** Reads NDJSON lines in the background until the body ends or errors. */
function collect(body: NonNullable<Response["body"]>): { lines: unknown[]; ended: boolean } {
  const state = { lines: [] as unknown[], ended: false };
  void (async () => {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        // 3.4 ends a stream with an error and no newline after it: the last line is whatever is left.
        if (done) {
          if (buffer.trim() !== "") state.lines.push(JSON.parse(buffer));
          break;
        }
        buffer += value;
        const parts = buffer.split("\n");
        buffer = parts.pop()!;
        for (const p of parts) if (p.trim() !== "") state.lines.push(JSON.parse(p));
      }
    } catch {
      // aborted
    }
    state.ended = true;
  })();
  return state;
}
