// The allocation-free check of gateway answers (src/gateway/wire-check.ts): real bodies pass it; on random
// values biased toward the wire shapes it says exactly what zod's safeParse says, for every schema of
// wire.ts (so the fast path is complete for them, not merely safe); what it does not know is "false", which
// hands the value to zod; and each schema is compiled once, a lazy one on first use.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import * as z from "zod/mini";
import { checkWire, WireMismatch, wirePredicate } from "../../src/gateway/wire-check.js";
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

type AnySchema = z.core.$ZodType;

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
const stub = stubGateway({ name: "wire-check" }).bodies;

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

describe("wire-check: real gateway bodies", () => {
  it("has bodies for every schema wire.ts exports", () => {
    expect(SCHEMAS.map(([name]) => name).sort()).toEqual(Object.keys(BODIES).sort());
  });

  it.each(SCHEMAS)("%s: every body passes, and checkWire hands back the body itself", (name, schema) => {
    for (const body of BODIES[name]!) {
      expect(zodAccepts(schema, body)).toBe(true);
      expect(wirePredicate(schema)(body)).toBe(true);
      expect(checkWire(schema, body)).toBe(body);
    }
  });
});

// --- random values, biased toward the wire shapes ------------------------------------------------------------

/** Every field name of every schema (lazy ones included), so random objects hit the shapes' keys. */
function fieldNames(schema: AnySchema, seen = new Set<AnySchema>(), names = new Set<string>()): Set<string> {
  if (seen.has(schema)) return names;
  seen.add(schema);
  const def = schema._zod.def as z.core.$ZodTypeDef & Record<string, unknown>;
  const inner = [def.innerType, def.element, ...((def.options as AnySchema[] | undefined) ?? [])];
  if (def.type === "lazy") inner.push((schema as z.core.$ZodLazy)._zod.innerType);
  if (def.type === "object") {
    const shape = def.shape as Record<string, AnySchema>;
    for (const [name, field] of Object.entries(shape)) {
      names.add(name);
      inner.push(field);
    }
  }
  for (const child of inner) if (child) fieldNames(child as AnySchema, seen, names);
  return names;
}
const FIELD_NAMES = [...new Set(SCHEMAS.flatMap(([, schema]) => [...fieldNames(schema)]))];

const leaf = fc.oneof(
  fc.string({ maxLength: 4 }),
  fc.constantFrom("42", "", "DELETE", BIG_LEASE),
  fc.integer(),
  // fc.double() yields NaN, ±Infinity and -0 too; zod refuses the first three.
  fc.double(),
  fc.constantFrom(Number.NaN, Infinity, -Infinity),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
);

/** JSON-like values of any shape, whose objects use the schemas' field names (and a few others). */
const noise: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown; object: unknown; array: unknown }>((tie) => ({
  value: fc.oneof({ depthSize: "small", depthIdentifier: "noise" }, leaf, tie("object"), tie("array")),
  object: fc.dictionary(fc.constantFrom(...FIELD_NAMES, "extra", "__proto__"), tie("value"), { maxKeys: 5 }),
  array: fc.array(tie("value"), { maxLength: 3, depthIdentifier: "noise" }),
})).value;

/**
 * The schema's own shape with random leaves (numbers may be NaN, optional fields absent, explicit
 * `undefined` or there, unknown keys added) and, with `dirty`, anything at all in place of any node now and
 * then: near misses as well as matches.
 */
function nearTo(schema: AnySchema, depth: number, dirty: boolean): fc.Arbitrary<unknown> {
  const own = shaped(schema, depth, dirty);
  return dirty ? fc.oneof({ weight: 8, arbitrary: own }, { weight: 1, arbitrary: noise }) : own;
}

function shaped(schema: AnySchema, depth: number, dirty: boolean): fc.Arbitrary<unknown> {
  const near = (inner: AnySchema, innerDepth = depth) => nearTo(inner, innerDepth, dirty);
  const def = schema._zod.def;
  switch (def.type) {
    case "string":
      return fc.oneof(fc.string({ maxLength: 4 }), fc.constantFrom("42", "DELETE"));
    case "number":
      return fc.oneof(fc.integer(), fc.double());
    case "boolean":
      return fc.boolean();
    case "optional":
      return fc.oneof(fc.constant(undefined), near((def as z.core.$ZodOptionalDef).innerType));
    case "union":
      return fc.oneof(...(def as z.core.$ZodUnionDef).options.map((option) => near(option)));
    case "array":
      return fc.array(near((def as z.core.$ZodArrayDef).element), { maxLength: 3 });
    case "lazy":
      return depth > 0 ? near((schema as z.core.$ZodLazy)._zod.innerType, depth - 1) : fc.constant({});
    case "object": {
      const shape = (def as z.core.$ZodObjectDef).shape;
      const keys = Object.keys(shape);
      const model = Object.fromEntries(keys.map((key) => [key, near(shape[key]!)]));
      const required = keys.filter((key) => shape[key]!._zod.optin === undefined);
      const fields = fc.oneof(
        { weight: 4, arbitrary: fc.record(model, { requiredKeys: required }) },
        { weight: 1, arbitrary: fc.record(model, { requiredKeys: [] }) },
      );
      const unknown = fc.dictionary(fc.constantFrom("extra", "type", "result"), leaf, { maxKeys: 2 });
      return fc.tuple(unknown, fields).map(([extra, known]) => ({ ...extra, ...known }));
    }
    default:
      throw new Error(`no generator for ${def.type}`);
  }
}

describe("wire-check: says what zod says", () => {
  it.each(SCHEMAS)("%s: predicate(v) === safeParse(v).success", (_name, schema) => {
    const predicate = wirePredicate(schema);
    const seen = { true: 0, false: 0 };
    fc.assert(
      fc.property(fc.oneof(nearTo(schema, 2, false), nearTo(schema, 2, true), noise), (value) => {
        const verdict = predicate(value);
        seen[`${verdict}`]++;
        expect(verdict).toBe(zodAccepts(schema, value));
      }),
      { numRuns: 400 },
    );
    // Both answers occur, so the equality is about matches as well as misses.
    expect(seen.true).toBeGreaterThan(40);
    expect(seen.false).toBeGreaterThan(40);
  });

  it(
    "follows zod on the edges: NaN and ±Infinity, " + "null for an optional, arrays for objects, absent vs undefined",
    () => {
      const cases: Array<[AnySchema, unknown]> = [
        [z.number(), Number.NaN],
        [z.number(), Infinity],
        [z.number(), -Infinity],
        [z.number(), -0],
        [z.optional(z.string()), null],
        [z.optional(z.string()), undefined],
        [z.object({}), []],
        [z.object({}), null],
        [z.object({}), new Date(0)],
        [z.object({ a: z.optional(z.string()) }), {}],
        [z.object({ a: z.optional(z.string()) }), { a: undefined }],
        [z.object({ a: z.string() }), {}],
        [z.object({ a: z.string() }), { a: undefined }],
        [z.object({ a: z.string() }), Object.create({ a: "inherited" })],
        [z.array(z.optional(z.string())), [undefined, "x"]],
        [z.array(z.string()), [undefined, "x"]],
        [wire.headerOnly, { header: { revision: "1" }, extra: [1, 2] }],
        [wire.watchResponse, { header: {} }],
        [wire.watchResponse, { header: {}, canceled: false }],
        [wire.watchResponse, { header: {}, canceled: true }],
      ];
      for (const [schema, value] of cases)
        expect(wirePredicate(schema)(value), String(value)).toBe(zodAccepts(schema, value));
    },
  );
});

function zodAccepts(schema: AnySchema, value: unknown): boolean {
  return (schema as z.ZodMiniType).safeParse(value).success;
}

describe("wire-check: what it does not know goes to zod", () => {
  const unknownToIt: Array<[string, AnySchema, unknown]> = [
    ["an unknown def type (literal)", z.literal("x"), "x"],
    ["an unknown def type (nullable)", z.nullable(z.string()), null],
    ["an unknown def type (custom)", z.custom(() => true), 1],
    ["an unknown def type (unknown)", z.unknown(), 1],
    ["exactOptional (an optional's def type, another class)", z.object({ a: z.exactOptional(z.string()) }), { a: "x" }],
    ["xor (a union's def type)", z.xor([z.string(), z.number()]), "x"],
    ["discriminatedUnion", z.discriminatedUnion("k", [z.object({ k: z.literal("a") })]), { k: "a" }],
    ["a string format", z.email(), "a@b.co"],
    ["a number format", z.int(), 1],
    ["a length check", z.string().check(z.minLength(1)), "x"],
    ["a coercion", z.coerce.number(), "1"],
    ["a strict object (catchall)", z.strictObject({}), {}],
    ["a loose object (catchall)", z.looseObject({}), { a: 1 }],
    ["a plain check function", z.object({}).check(() => {}), {}],
    ["a field it does not know", z.object({ a: z.nullable(z.string()) }), { a: "x" }],
  ];

  it.each(unknownToIt)("%s compiles to false; checkWire returns zod's result", (_what, schema, value) => {
    expect(zodAccepts(schema, value)).toBe(true);
    expect(wirePredicate(schema)(value)).toBe(false);
    expect(checkWire(schema as wire.Schema<unknown>, value)).toEqual((schema as z.ZodMiniType).safeParse(value).data);
  });

  it("a refinement that is async or throws is zod's to run", () => {
    const async = z.object({}).check(z.refine(() => Promise.resolve(true) as unknown as boolean));
    expect(wirePredicate(async)({})).toBe(false);
    expect(() => checkWire(async, {})).toThrow();
    const throws = z.object({}).check(
      z.refine(() => {
        throw new Error("refinement threw");
      }),
    );
    expect(wirePredicate(throws)({})).toBe(false);
    expect(() => checkWire(throws, {})).toThrow("refinement threw");
  });

  it("a mismatch carries zod's own error", () => {
    const body = { header: { revision: null }, succeeded: "yes" };
    const checked = checkWire(wire.txnResponse, body);
    expect(checked).toBeInstanceOf(WireMismatch);
    expect((checked as WireMismatch).error.issues).toEqual(wire.txnResponse.safeParse(body).error?.issues);
  });
});

describe("wire-check: compiled once, lazily", () => {
  it("compiles each schema once", () => {
    for (const [, schema] of SCHEMAS) expect(wirePredicate(schema)).toBe(wirePredicate(schema));
  });

  it("compiles a lazy schema's getter on first use, and only once", () => {
    let calls = 0;
    const node = z.lazy(() => {
      calls++;
      return z.string();
    });
    const predicate = wirePredicate(z.object({ items: z.array(node) }));
    expect(calls).toBe(0);
    expect(predicate({ items: [] })).toBe(true);
    expect(calls).toBe(0);
    expect(predicate({ items: ["a", "b"] })).toBe(true);
    expect(predicate({ items: ["a", 1] })).toBe(false);
    expect(calls).toBe(1);
  });

  it("handles a schema that contains itself through a getter", () => {
    const tree: z.ZodMiniType<Tree> = z.object({
      name: z.string(),
      get children() {
        return z.optional(z.array(tree));
      },
    });
    const predicate = wirePredicate(tree);
    const values = [
      { name: "a" },
      { name: "a", children: [{ name: "b", children: [] }] },
      { name: "a", children: [{ name: 1 }] },
      { children: [] },
    ];
    for (const value of values) expect(predicate(value)).toBe(zodAccepts(tree, value));
  });
});

interface Tree {
  name: string;
  children?: Tree[] | undefined;
}
