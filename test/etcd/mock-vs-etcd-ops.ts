// The random requests of the mock-vs-etcd differential test: every endpoint the mock serves, valid and invalid
// bodies, integers written as JSON numbers (beyond 2^53, and spellings one etcd version refuses). Bodies are
// templates: markers name things that differ per side (a lease ID etcd picked, a lock key with that ID in it)
// and are resolved when the request is sent.
import fc from "fast-check";
import type { EtcdVersion } from "../../src/testing/index.js";
import { b64 } from "../support/wire.js";

/** A body template. Objects with a `$` key are markers. */
export type Tpl = string | number | boolean | null | Tpl[] | { [field: string]: Tpl | undefined } | Marker;

export type Marker =
  /** A JSON number written as is: "7057220748511990900", "1e2", "2.0". */
  | { $raw: string }
  /** A lease: an explicit ID, or the n-th lease etcd picked an ID for (per side); `number` writes it bare. */
  | { $lease: bigint | number; number?: boolean }
  /** The current revision plus `delta`, as a string (the same on both sides). */
  | { $rev: number; number?: boolean }
  /** The key (base64) of the n-th lock taken (per side). */
  | { $lockKey: number }
  /** The n-th newest campaign's leader object (per side), optionally with its rev moved or its lease left out. */
  | { $leader: number; rev?: number; noLease?: boolean };

export type OpKind = "unary" | "blocking" | "keepalive" | "watch" | "observe";

export interface Op {
  kind: OpKind;
  path: string;
  /** A template, or raw body text (invalid requests). */
  body: Tpl | { $text: string };
}

/** Lease IDs the test chooses; the last one is beyond 2^53. */
export const EXPLICIT_LEASES = [11n, 12n, 13n, 7057220748511990900n] as const;

const raw = (text: string): Marker => ({ $raw: text });
const bool = fc.boolean();

const key = fc.constantFrom("a", "b", "b0", "c", "cc", "d", "L1/x", "E1/y").map(b64);
// Uint8Array.of(0xff): the byte 0xff, which no UTF-8 text holds.
const value = fc.constantFrom<string | Uint8Array>("", "x", "y", Uint8Array.of(0xff), "xx").map(b64);
const end = fc.option(fc.constantFrom("b", "c", "d", "e", "\0", "M").map(b64), { nil: undefined });

/** An explicit lease, as a string or a bare JSON number, or one etcd picked earlier. */
const leaseRef: fc.Arbitrary<Tpl> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(...EXPLICIT_LEASES).chain((id) => bool.map((number): Tpl => ({ $lease: id, number }))),
  },
  { weight: 1, arbitrary: fc.nat(5).map((n): Tpl => ({ $lease: n })) },
);

/** An int64 written in each spelling clients use: string, bare number. */
const int = (values: number[]) => fc.constantFrom(...values).chain((v) => fc.constantFrom<Tpl>(String(v), v));

const rangeReq = fc.record(
  {
    key,
    range_end: end,
    limit: int([0, 1, 2]),
    revision: fc
      .constantFrom(0, -1, -3)
      .map((d): Tpl | undefined => (d === 0 ? undefined : { $rev: d, number: d === -1 })),
    sort_order: fc.constantFrom<Tpl>("NONE", "ASCEND", "DESCEND", 2),
    sort_target: fc.constantFrom<Tpl>("KEY", "VERSION", "CREATE", "MOD", "VALUE"),
    keys_only: bool,
    count_only: bool,
    serializable: bool,
    min_mod_revision: int([0, 5, 20]),
    max_create_revision: int([0, 10, 40]),
  },
  { requiredKeys: ["key"] },
);

/** A rarely set flag (ignore_value, ignore_lease: mostly errors when set). */
const rare = fc.constantFrom<boolean | undefined>(undefined, undefined, undefined, undefined, undefined, false, true);

const putReq = fc
  .record(
    {
      key,
      value,
      prev_kv: bool,
      lease: fc.option(leaseRef, { nil: undefined, freq: 3 }),
      ignore_value: rare,
      ignore_lease: rare,
    },
    { requiredKeys: ["key"] },
  )
  .map((p) => (p.ignore_value && p.key.length % 2 === 0 ? { ...p, value: undefined } : p));

const deleteReq = fc.record({ key, range_end: end, prev_kv: bool }, { requiredKeys: ["key"] });

/**
 * One union member per compare: given several, 3.4's jsonpb keeps one at random (it walks a Go map of the oneof's
 * fields); 3.5 refuses the request (that case is among the invalid bodies).
 */
const unionMember = fc.oneof(
  int([0, 1, 2]).map((version) => ({ version })),
  int([0, 5, 30]).map((create_revision) => ({ create_revision })),
  int([0, 5, 30]).map((mod_revision) => ({ mod_revision })),
  value.map((v) => ({ value: v })),
  fc.constantFrom<Tpl>("0", "11", { $raw: "7057220748511990900" }).map((lease) => ({ lease })),
);
const compare = fc
  .tuple(
    fc.record({
      key,
      range_end: end,
      target: fc.constantFrom<Tpl>("VERSION", "CREATE", "MOD", "VALUE", "LEASE", 4),
      result: fc.constantFrom<Tpl>("EQUAL", "GREATER", "LESS", "NOT_EQUAL"),
    }),
    unionMember,
  )
  .map(([c, u]) => ({ ...c, ...u }));

// No from-key ("\0") delete inside a txn: followed by an ignore_value put of a key it deleted, etcd panics.
const txnDeleteReq = fc.record(
  { key, range_end: fc.option(fc.constantFrom("b", "c", "d", "e").map(b64), { nil: undefined }), prev_kv: bool },
  { requiredKeys: ["key"] },
);
const requestOp: fc.Arbitrary<Tpl> = fc.oneof(
  rangeReq.map((r) => ({ request_range: r })),
  putReq.map((r) => ({ request_put: r })),
  txnDeleteReq.map((r) => ({ request_delete_range: r })),
);
const txnReq = fc.record({
  compare: fc.array(compare, { maxLength: 2 }),
  success: fc.array(requestOp, { maxLength: 3 }),
  failure: fc.array(requestOp, { maxLength: 3 }),
});

/** TTLs long enough never to expire during a run, in the spellings clients send. */
const ttl = fc.constantFrom<Tpl>(3600, "7200", raw("3.6e3"), raw("1e4"), raw("3600.0"));

const watchCreate = fc.record(
  {
    key: fc.oneof(key, fc.constant("")),
    range_end: end,
    start_revision: fc.constantFrom<Tpl | undefined>(
      undefined,
      { $rev: 0 },
      { $rev: -2 },
      { $rev: -5, number: true },
      { $rev: 3 },
      "-1",
      -7,
    ),
    prev_kv: bool,
    progress_notify: bool,
    filters: fc.option(fc.subarray<Tpl>(["NOPUT", "NODELETE", 1]), { nil: undefined }),
    watch_id: fc.option(fc.constantFrom<Tpl>("5", 7), { nil: undefined }),
  },
  { requiredKeys: ["key"] },
);
const watchRequest: fc.Arbitrary<Tpl> = fc.oneof(
  { weight: 4, arbitrary: watchCreate.map((c) => ({ create_request: c })) },
  { weight: 1, arbitrary: fc.constantFrom<Tpl>(0, "5", 7, 9).map((id) => ({ cancel_request: { watch_id: id } })) },
  { weight: 1, arbitrary: fc.constant<Tpl>({ progress_request: {} }) },
);

const lockName = fc.constantFrom("L1", "L2").map(b64);
const electionName = fc.constantFrom("E1", "E2").map(b64);
const leaderRef = fc.record({
  n: fc.constantFrom(0, 0, 0, 1, 2, 5),
  rev: fc.constantFrom(0, 0, 0, 1),
  noLease: fc.constantFrom(false, false, false, true),
});

/** Bodies that one or both etcd versions refuse, or read in a surprising way; none of them can block or expire. */
const INVALID: Record<string, string[]> = {
  "/v3/kv/range": [
    '{"key":"YQ"}',
    '{"key":"-_8="}',
    '{"key":"YQ=\\n="}',
    '{"key":"\\u0059Q=="}',
    '{"key":[97,98]}',
    '{"key":[300]}',
    '{"key":["a"]}',
    '{"key":[-1]}',
    '{"key":true}',
    '{"key":{}}',
    '{"key":"YQ==","limit":1e2}',
    '{"key":"YQ==","limit":2.0}',
    '{"key":"YQ==","limit":"1.5e1"}',
    '{"key":"YQ==","limit":1.5}',
    '{"key":"YQ==","limit":99999999999999999999}',
    '{"key":"YQ==","limit":" 5"}',
    '{"key":"YQ==","limit":"05"}',
    '{"key":"YQ==","limit":"-0"}',
    '{"key":"YQ==","limit":""}',
    '{"key":"YQ==","limit":"null"}',
    '{"key":"YQ==","revision":9223372036854775807}',
    '{"key":"YQ==","revision":9223372036854775808}',
    '{"key":"YQ==","sort_order":"BOGUS"}',
    '{"key":"YQ==","sort_order":"descend"}',
    '{"key":"YQ==","sort_order":7}',
    '{"key":"YQ==","sort_order":1.5}',
    '{"key":"YQ==","sort_order":true}',
    '{"key":"YQ==","keys_only":"true"}',
    '{"key":"YQ==","keys_only":1}',
    '{"key":"YQ==","limit":1,"limit":2}',
    '{"key":"YQ==","keysOnly":true,"keys_only":false}',
    '{"key":"YQ==","keys_only":true,"keysOnly":false}',
    '{"key":"YQ==",',
    '{"key":"YQ==" , "limit" : 1 }',
    '{"key":"YQ=="} trailing',
    '{"key":"YQ=="}{"key":"Yg=="}',
    '{"key":"YQ==",}',
    "[1]",
    "3",
    "null",
    "",
    "  ",
    '"text"',
    "{'key':1}",
    '{"key":"YQ==","unknown":[1,{"x":null}]}',
    '{"key":null,"range_end":"AA=="}',
  ],
  "/v3/kv/put": [
    '{"key":"YQ==","value":[120,121]}',
    '{"key":"YQ==","lease":1.1e1}',
    '{"key":"YQ==","lease":"x"}',
    '{"key":"YQ==","prev_kv":"yes"}',
    '{"key":"Y Q=="}',
    '{"value":"eA=="}',
  ],
  "/v3/kv/deleterange": [
    '{"key":"eg==","range_end":"eg=="}',
    '{"key":"YQ==","prev_kv":1}',
    '{"key":"AA==","range_end":[0]}',
  ],
  "/v3/kv/txn": [
    '{"compare":{}}',
    '{"compare":[null]}',
    '{"success":[{}]}',
    '{"success":[null]}',
    '{"success":[{"request_put":null}]}',
    '{"success":[{"request_put":{}}]}',
    '{"success":[{"request_txn":{}}]}',
    '{"compare":[{"key":"YQ==","target":"LEASE","lease":"x"}]}',
    '{"compare":[{"key":"YQ==","target":"BOGUS"}]}',
    '{"compare":[{"key":"YQ==","version":"0","create_revision":"1"}]}',
    '{"success":[{"request_range":{"key":"YQ=="},"request_put":{"key":"YQ=="}}]}',
    '{"success":{"request_range":{"key":"YQ=="}}}',
  ],
  "/v3/kv/compaction": ['{"revision":"x"}', '{"revision":1e100}', '{"revision":"-1"}', '{"revision":true}'],
  "/v3/lease/grant": [
    '{"TTL":3.6e3,"ID":21}',
    '{"TTL":"3600","ID":2.1e1}',
    '{"TTL":true}',
    '{"TTL":[]}',
    '{"TTL":"99999999999999999999"}',
    '{"TTL":3600,"ID":"x"}',
  ],
  "/v3/lease/revoke": ['{"ID":"x"}', '{"ID":1.1e1}', '{"ID":"9223372036854775808"}', "[]"],
  "/v3/lease/timetolive": ['{"ID":"1.2e1","keys":true}', '{"ID":12,"keys":"true"}', '{"ID":-1}'],
  "/v3/lease/leases": ["[1]", "null", '{"x":1}'],
  "/v3/lease/keepalive": [
    '{"ID":"1"',
    "[1]",
    '{"ID":1.1e1}',
    '{"ID":"x"}',
    '{"ID":"11"}[2]',
    '{"ID":"11"}{"ID":"x"}{"ID":"12"}',
    "",
  ],
  "/v3/watch": [
    '{"create_request":',
    "[1]",
    '{"create_request":{"key":"YQ","start_revision":1e2}}',
    '{"create_request":{"key":"YQ==","start_revision":1e0}}{"progress_request":{}}',
  ],
  "/v3/lock/unlock": ['{"key":[97]}', '{"key":"!!"}', "{}"],
  "/v3/election/leader": ['{"name":"RTE"}', '{"name":[69,49]}', "{}"],
  "/v3/election/observe": ['{"name":"!!"}', "[1]"],
  "/v3/election/proclaim": [
    '{"value":"eA=="}',
    '{"leader":{"name":"RTE=","key":"RTEvMQ==","rev":"x"}}',
    '{"leader":null}',
  ],
  "/v3/election/resign": ["{}", '{"leader":{"name":"RTE=","key":"RTEvMQ==","rev":1.5}}'],
  "/v3/maintenance/status": ["[1]", "null", '{"x":1}'],
  "/v3/cluster/member/list": ["[1]", '{"linearizable":"yes"}', '{"linearizable":true}'],
  // Paths: unknown under /v3/ (the gateway's 404), outside it (Go's mux), /v3beta/ (rewritten), /v3 (redirected).
  "/v3/kv/nope": ["{}"],
  "/v3/": ["{}"],
  "/v3": ["{}"],
  "/foo": ["{}"],
  "/v3beta/kv/range": ['{"key":"YQ=="}'],
  "/v3beta/lease/leases": ["{}"],
};

const STREAM_KINDS: Record<string, OpKind> = {
  "/v3/watch": "watch",
  "/v3/lease/keepalive": "keepalive",
  "/v3/election/observe": "observe",
};

/**
 * Two members of one oneof: 3.4 keeps one at random (a Go map walk), as the mock does with Go's odds
 * (mock-vs-etcd.test.ts compares them), so here only the refusal of 3.5 and later is compared.
 */
const RANDOM_ON_34 = new Set([
  '{"compare":[{"key":"YQ==","version":"0","create_revision":"1"}]}',
  '{"success":[{"request_range":{"key":"YQ=="},"request_put":{"key":"YQ=="}}]}',
]);

function invalid(version: EtcdVersion): fc.Arbitrary<Op> {
  const cases = Object.entries(INVALID).flatMap(([path, bodies]) => bodies.map((b) => [path, b] as const));
  return fc
    .constantFrom(...cases.filter(([, b]) => version !== "3.4" || !RANDOM_ON_34.has(b)))
    .map(([path, text]) => ({ kind: STREAM_KINDS[path] ?? "unary", path, body: { $text: text } }));
}

/** A put near etcd's limits: 1.5 MiB for a proposal (400), 2 MiB for a gRPC message (429). */
const bigPut: fc.Arbitrary<Op> = fc.constantFrom(1_572_840, 1_572_841, 2_097_100, 2_097_153).map((n) => ({
  kind: "unary",
  path: "/v3/kv/put",
  body: { $text: JSON.stringify({ key: b64("big"), value: b64("v".repeat(n)) }) },
}));

const unaryOp =
  (path: string) =>
  (body: Tpl): Op => ({ kind: "unary", path, body });

/** The operation mix of one run against etcd `version` (about one put near the size limits per 1,000 requests). */
export const ops = (version: EtcdVersion): fc.Arbitrary<Op> =>
  fc.oneof(
    { weight: 200, arbitrary: putReq.map(unaryOp("/v3/kv/put")) },
    { weight: 150, arbitrary: rangeReq.map(unaryOp("/v3/kv/range")) },
    { weight: 75, arbitrary: deleteReq.map(unaryOp("/v3/kv/deleterange")) },
    { weight: 200, arbitrary: txnReq.map(unaryOp("/v3/kv/txn")) },
    {
      weight: 10,
      arbitrary: fc
        .record({ d: fc.integer({ min: -4, max: 0 }), physical: bool })
        .map(({ d, physical }) => unaryOp("/v3/kv/compaction")({ revision: { $rev: d - 1 }, physical })),
    },
    {
      weight: 40,
      arbitrary: fc.record({ ID: fc.oneof(leaseRef, fc.constant<Tpl>(0)), TTL: ttl }).map(unaryOp("/v3/lease/grant")),
    },
    { weight: 30, arbitrary: leaseRef.map((ID) => unaryOp("/v3/lease/revoke")({ ID })) },
    {
      weight: 30,
      arbitrary: fc
        .array(leaseRef, { minLength: 1, maxLength: 3 })
        .map((ids): Op => ({ kind: "keepalive", path: "/v3/lease/keepalive", body: ids.map((ID) => ({ ID })) })),
    },
    { weight: 30, arbitrary: fc.record({ ID: leaseRef, keys: bool }).map(unaryOp("/v3/lease/timetolive")) },
    { weight: 10, arbitrary: fc.constant(unaryOp("/v3/lease/leases")({})) },
    {
      weight: 40,
      arbitrary: fc
        .record({ name: lockName, lease: fc.oneof(leaseRef, fc.constant<Tpl>(0)) })
        .map((b): Op => ({ kind: "blocking", path: "/v3/lock/lock", body: b })),
    },
    {
      weight: 30,
      arbitrary: fc
        .oneof(
          fc.nat(7).map((n): Tpl => ({ key: { $lockKey: n } })),
          key.map((k): Tpl => ({ key: k })),
        )
        .map(unaryOp("/v3/lock/unlock")),
    },
    {
      weight: 25,
      arbitrary: fc
        .record({ name: electionName, lease: fc.oneof(leaseRef, fc.constant<Tpl>(0)), value })
        .map((b): Op => ({ kind: "blocking", path: "/v3/election/campaign", body: b })),
    },
    {
      weight: 25,
      arbitrary: fc.record({ leader: leaderRef, value }).map(({ leader, value }) =>
        unaryOp("/v3/election/proclaim")({
          leader: { $leader: leader.n, rev: leader.rev, noLease: leader.noLease },
          value,
        }),
      ),
    },
    { weight: 20, arbitrary: electionName.map((name) => unaryOp("/v3/election/leader")({ name })) },
    {
      weight: 20,
      arbitrary: leaderRef.map((l) =>
        unaryOp("/v3/election/resign")({ leader: { $leader: l.n, rev: l.rev, noLease: l.noLease } }),
      ),
    },
    {
      weight: 5,
      arbitrary: electionName.map((name): Op => ({ kind: "observe", path: "/v3/election/observe", body: { name } })),
    },
    {
      weight: 5,
      arbitrary: fc
        .array(watchRequest, { minLength: 1, maxLength: 4 })
        .map((reqs): Op => ({ kind: "watch", path: "/v3/watch", body: reqs })),
    },
    { weight: 10, arbitrary: fc.constant(unaryOp("/v3/maintenance/status")({})) },
    { weight: 10, arbitrary: fc.constant(unaryOp("/v3/cluster/member/list")({})) },
    { weight: 125, arbitrary: invalid(version) },
    { weight: 1, arbitrary: bigPut },
  );
