// The schemas of gateway answers (src/gateway/wire.ts): real bodies of etcd 3.4, 3.5 and 3.6 pass them, each
// read back as sent; a body that lacks what etcd always sends does not. The plain predicates beside two of them
// (src/gateway/wire-accept.ts) take the real bodies and never what the schemas refuse.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import * as z from "zod/mini";
import { acceptsTxn, acceptsWatch } from "../../src/gateway/wire-accept.js";
import * as wire from "../../src/gateway/wire.js";
import {
  b64,
  BIG_LEASE,
  createdLine,
  eventsLine,
  header,
  kv,
  putEvent,
  resultLine,
  streamErrorLine,
  unaryErrorBody,
} from "../support/wire.js";

/** Every schema wire.ts exports, by name. */
const SCHEMAS = Object.entries(wire as Record<string, unknown>).flatMap(([name, value]) =>
  value instanceof z.ZodMiniType ? [[name, value] as [string, z.ZodMiniType]] : [],
);

interface StubGateway {
  bodies: Record<"lock" | "unlock" | "grant" | "revoke" | "keepalive" | "timetolive" | "range", string>;
}
// The bench's canned answers (what etcd 3.4 sends for an uncontended lock), loaded as the bench loads them.
const stubUrl = new URL("../../bench/lib/stub-gateway.mjs", import.meta.url).href;
const { stubGateway } = (await import(stubUrl)) as { stubGateway: (options: { name: string }) => StubGateway };
const stub = stubGateway({ name: "wire-schemas" }).bodies;

const json = (text: string): unknown => JSON.parse(text);
const firstResult = (line: string) => (JSON.parse(line) as { result: unknown }).result;
const keyValue = kv({ key: "jobs/1", value: "v", create: 2, mod: 3, version: 2, lease: BIG_LEASE });
const bare = kv({ key: "k", mod: 5 });

/** Real gateway bodies for each exported schema, by its name in wire.ts. */
const BODIES: Record<string, unknown[]> = {
  header: [header(), { cluster_id: "1", member_id: "2", revision: 3, raft_term: "4" }],
  keyValue: [keyValue, bare],
  rangeResponse: [
    json(stub.range),
    { header: header() },
    { header: header(), kvs: [keyValue, bare], more: true, count: "9" },
  ],
  putResponse: [{ header: header() }, { header: header(), prev_kv: keyValue }],
  deleteRangeResponse: [{ header: header() }, { header: header(), deleted: "1", prev_kvs: [keyValue] }],
  txnResponse: [
    json(stub.lock),
    json(stub.unlock),
    { header: header() },
    {
      header: header(),
      succeeded: true,
      responses: [
        {
          response_txn: {
            header: {},
            succeeded: true,
            responses: [{ response_range: { header: { revision: "5" }, kvs: [bare] } }],
          },
        },
        { response_put: { header: { revision: "5" }, prev_kv: keyValue } },
        { response_delete_range: { header: { revision: "5" }, deleted: "1" } },
      ],
    },
  ],
  headerOnly: [json(stub.revoke)],
  leaseGrant: [json(stub.grant)],
  leaseKeepAlive: [firstResult(stub.keepalive), { header: header(), ID: BIG_LEASE }],
  leaseTimeToLive: [
    json(stub.timetolive),
    { header: header(), ID: BIG_LEASE, TTL: "-1" },
    { header: header(), ID: BIG_LEASE, TTL: "30", grantedTTL: "60", keys: [b64("a"), b64("b")] },
  ],
  leaseLeases: [{ header: header() }, { header: header(), leases: [{ ID: BIG_LEASE }, { ID: "1" }] }],
  authenticate: [{ header: header(), token: "JMVdHvWxUzGPVJuR.42" }],
  event: [
    ...(firstResult(eventsLine(7, [putEvent("a", "1", 7)])) as { events: unknown[] }).events,
    ...(
      firstResult(
        eventsLine(8, [
          { type: "DELETE", key: "a", mod: 8, prev: { key: "a", value: "1", create: 7, mod: 7, version: 1 } },
        ]),
      ) as {
        events: unknown[];
      }
    ).events,
  ],
  watchResponse: [
    firstResult(createdLine(42)),
    firstResult(eventsLine(43, [putEvent("a", "1", 43), putEvent("b", "2", 43)])),
    firstResult(resultLine({ header: header(44) })),
    firstResult(resultLine({ header: header(50), canceled: true, compact_revision: "40" })),
    // A compaction's cancellation may come without a revision.
    firstResult(resultLine({ header: { cluster_id: "1", member_id: "2" }, canceled: true, compact_revision: "40" })),
    firstResult(
      resultLine({ header: header(50), watch_id: "3", canceled: true, cancel_reason: "etcdserver: permission denied" }),
    ),
  ],
  unaryError: (["3.4", "3.5", "3.6"] as const).map((version) =>
    json(unaryErrorBody(version, 5, "etcdserver: requested lease not found")),
  ),
  streamError: (["3.4", "3.6"] as const).map(
    (version) => (JSON.parse(streamErrorLine(version, 14, "etcdserver: no leader")) as { error: unknown }).error,
  ),
};

describe("wire schemas: real gateway bodies", () => {
  it("has bodies for every schema wire.ts exports", () => {
    expect(SCHEMAS.map(([name]) => name).sort()).toEqual(Object.keys(BODIES).sort());
  });

  it.each(SCHEMAS)("%s: every body passes and reads back as sent", (name, schema) => {
    for (const body of BODIES[name]!) {
      const parsed = schema.safeParse(body);
      expect(parsed.success).toBe(true);
      expect(parsed.data).toEqual(body);
    }
  });

  it("refuses an answer without what etcd always sends: a header's revision, a key, a lease ID", () => {
    expect(wire.rangeResponse.safeParse({}).success).toBe(false);
    expect(wire.rangeResponse.safeParse({ header: { cluster_id: "1" } }).success).toBe(false);
    expect(wire.rangeResponse.safeParse({ header: header(), kvs: [{ value: "dg==" }] }).success).toBe(false);
    expect(wire.leaseGrant.safeParse({ header: header(), TTL: "5" }).success).toBe(false);
    expect(wire.txnResponse.safeParse({ header: header(), succeeded: "yes" }).success).toBe(false);
  });
});

// The predicates of src/gateway/wire-accept.ts take a well-shaped answer as it is, sparing zod's copy on every
// handoff; they must never be looser than their schema (else an answer zod refuses would pass unchecked).
describe("wire-accept: the plain predicates of the two hottest answers", () => {
  const pairs = [
    ["txnResponse", acceptsTxn, wire.txnResponse],
    ["watchResponse", acceptsWatch, wire.watchResponse],
  ] as const;

  it.each(pairs)("%s: takes every real body as it is", (name, accepts) => {
    for (const body of BODIES[name]!) expect(accepts(body), JSON.stringify(body)).toBe(true);
  });

  it("leaves to zod what lacks what etcd always sends, or has a field of another type", () => {
    for (const body of [
      {},
      { header: { cluster_id: "1" } },
      { header: header(), succeeded: "yes" },
      { header: header(), responses: [{ response_range: { kvs: [{ value: "dg==" }] } }] },
      { header: header(), responses: [{ response_txn: { responses: [{ response_put: { prev_kv: {} } }] } }] },
      { header: header(), responses: {} },
    ])
      expect(acceptsTxn(body), JSON.stringify(body)).toBe(false);
    for (const body of [
      { created: true },
      { header: { member_id: "2" }, created: true },
      { header: { member_id: "2" }, canceled: "true" },
      { canceled: true },
      { header: header(), events: [{ type: "PUT" }] },
      { header: header(), events: [{ kv: { key: 1 } }] },
      { header: header(), fragment: 1 },
    ])
      expect(acceptsWatch(body), JSON.stringify(body)).toBe(false);
  });

  // Values shaped like answers: each field mostly of its own type, now and then of any other JSON type or absent.
  const leaf = fc.oneof(
    fc.string({ maxLength: 3 }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.constant(undefined),
    fc.constant([]),
    fc.constant({}),
  );
  const mostly = (own: fc.Arbitrary<unknown>) =>
    fc.oneof({ arbitrary: own, weight: 6 }, { arbitrary: leaf, weight: 1 });
  const int64 = mostly(fc.oneof(fc.constant("42"), fc.nat()));
  const text = mostly(fc.string({ maxLength: 3 }));
  const flag = mostly(fc.boolean());
  const object = <T>(shape: { [K in keyof T]: fc.Arbitrary<T[K]> }) =>
    mostly(fc.record(shape, { requiredKeys: [] }) as fc.Arbitrary<unknown>);
  const headerLike = object({ revision: int64, cluster_id: int64, member_id: int64, raft_term: int64 });
  const kvLike = object({
    key: text,
    create_revision: int64,
    mod_revision: int64,
    version: int64,
    value: text,
    lease: int64,
  });
  const list = (item: fc.Arbitrary<unknown>) => mostly(fc.array(item, { maxLength: 3 }));
  const { txn } = fc.letrec((tie) => ({
    txn: object({ header: headerLike, succeeded: flag, responses: list(tie("op")) }),
    op: object({
      response_range: object({ header: headerLike, kvs: list(kvLike), more: flag, count: int64 }),
      response_put: object({ header: headerLike, prev_kv: kvLike }),
      response_delete_range: object({ header: headerLike, deleted: int64, prev_kvs: list(kvLike) }),
      response_txn: fc.oneof({ depthSize: "small" }, leaf, tie("txn")),
    }),
  }));
  const eventLike = object({ type: mostly(fc.constantFrom("DELETE", 1, "PUT")), kv: kvLike, prev_kv: kvLike });
  const watch = object({
    header: headerLike,
    canceled: flag,
    watch_id: int64,
    created: flag,
    compact_revision: int64,
    cancel_reason: text,
    fragment: flag,
    events: list(eventLike),
  });

  it("the generated values reach both sides: some taken, some left to zod", () => {
    for (const [arbitrary, accepts] of [
      [txn, acceptsTxn],
      [watch, acceptsWatch],
    ] as const) {
      const taken = fc.sample(arbitrary, { numRuns: 5_000, seed: 1 }).filter((value) => accepts(value)).length;
      expect(taken).toBeGreaterThan(500);
      expect(taken).toBeLessThan(4_950);
    }
  });

  it("never takes what zod refuses: txn answers", () => {
    fc.assert(
      fc.property(txn, (value) => !acceptsTxn(value) || wire.txnResponse.safeParse(value).success),
      { numRuns: 20_000 },
    );
  });

  it("never takes what zod refuses: watch messages", () => {
    fc.assert(
      fc.property(watch, (value) => !acceptsWatch(value) || wire.watchResponse.safeParse(value).success),
      { numRuns: 20_000 },
    );
  });
});
