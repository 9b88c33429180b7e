/// <reference path="./provided.d.ts" />
// Seeded differential test: a long random sequence of put/delete/txn/range/lease/compaction requests sent to a
// fresh real etcd member and a fresh mock in lockstep; every answer must match. Reproduce with MOCK_DIFF_SEED.
import fc from "fast-check";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createMockEtcd } from "../../src/testing/index.js";
import { startEtcd, type EtcdMember } from "./harness.js";

const SEED = Number(process.env["MOCK_DIFF_SEED"] ?? Date.now() % 2 ** 31);
const OPS = Number(process.env["MOCK_DIFF_OPS"] ?? 3000);

const b64 = (s: string) => btoa(s);
const key = fc.constantFrom("a", "b", "b0", "c", "cc", "d").map(b64);
const value = fc.constantFrom("", "x", "y", "\u00ff", "xx").map(b64);
const end = fc.option(fc.constantFrom("b", "c", "d", "e", "\0").map(b64), { nil: undefined });
const leaseId = fc.constantFrom("11", "12", "13");

const rangeReq = fc.record(
  {
    key,
    range_end: end,
    limit: fc.constantFrom(0, 1, 2),
    sort_order: fc.constantFrom("NONE", "ASCEND", "DESCEND"),
    sort_target: fc.constantFrom("KEY", "VERSION", "CREATE", "MOD", "VALUE"),
    keys_only: fc.boolean(),
    count_only: fc.boolean(),
    min_mod_revision: fc.constantFrom(0, 5, 20),
    max_create_revision: fc.constantFrom(0, 10, 40),
  },
  { requiredKeys: ["key"] },
);
const putReq = fc.record(
  { key, value, prev_kv: fc.boolean(), lease: leaseId, ignore_value: fc.constant(true), ignore_lease: fc.constant(true) },
  { requiredKeys: ["key"] },
).map((p) => (p.ignore_value ? { ...p, value: undefined } : p));
const deleteReq = fc.record({ key, range_end: end, prev_kv: fc.boolean() }, { requiredKeys: ["key"] });
// One union member per compare, as clients send: with several, the 3.4 gateway's jsonpb picks one at random
// (it walks a Go map of oneof fields). A member not matching the target reads as zero on both sides.
const unionMember = fc.oneof(
  fc.constantFrom("0", "1", "2").map((version) => ({ version })),
  fc.constantFrom("0", "5", "30").map((create_revision) => ({ create_revision })),
  fc.constantFrom("0", "5", "30").map((mod_revision) => ({ mod_revision })),
  value.map((v) => ({ value: v })),
  fc.constantFrom("0", "11").map((lease) => ({ lease })),
);
const compare = fc
  .tuple(
    fc.record({
      key,
      range_end: end,
      target: fc.constantFrom("VERSION", "CREATE", "MOD", "VALUE", "LEASE"),
      result: fc.constantFrom("EQUAL", "GREATER", "LESS", "NOT_EQUAL"),
    }),
    unionMember,
  )
  .map(([c, u]) => ({ ...c, ...u }));
// Inside a txn no from-key ("\0") delete: with a later ignore_value put of a deleted key, 3.4 panics (the mock
// answers 500 instead; see kv.ts).
const txnDeleteReq = fc.record(
  { key, range_end: fc.option(fc.constantFrom("b", "c", "d", "e").map(b64), { nil: undefined }), prev_kv: fc.boolean() },
  { requiredKeys: ["key"] },
);
const requestOp = fc.oneof(
  rangeReq.map((r) => ({ request_range: r })),
  putReq.map((r) => ({ request_put: r })),
  txnDeleteReq.map((r) => ({ request_delete_range: r })),
);
const txnReq = fc.record({
  compare: fc.array(compare, { maxLength: 2 }),
  success: fc.array(requestOp, { maxLength: 3 }),
  failure: fc.array(requestOp, { maxLength: 3 }),
});

const op = fc.oneof(
  { weight: 4, arbitrary: putReq.map((b) => ["/v3/kv/put", b] as const) },
  { weight: 3, arbitrary: rangeReq.map((b) => ["/v3/kv/range", b] as const) },
  { weight: 2, arbitrary: deleteReq.map((b) => ["/v3/kv/deleterange", b] as const) },
  { weight: 4, arbitrary: txnReq.map((b) => ["/v3/kv/txn", b] as const) },
  { weight: 1, arbitrary: leaseId.map((ID) => ["/v3/lease/grant", { ID, TTL: 3600 }] as const) },
  { weight: 1, arbitrary: leaseId.map((ID) => ["/v3/lease/revoke", { ID }] as const) },
  { weight: 1, arbitrary: fc.record({ ID: leaseId, keys: fc.constant(true) }).map((b) => ["/v3/lease/timetolive", b] as const) },
  { weight: 1, arbitrary: fc.integer({ min: -3, max: 0 }).map((back) => ["/v3/kv/compaction", { back }] as const) },
);

function normalise(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(normalise);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    // TTL drifts on the real member's wall clock; granted TTLs are compared via grantedTTL.
    out[k] = k === "cluster_id" || k === "member_id" || k === "raft_term" || k === "TTL" ? "<n>" : normalise(v);
  }
  return out;
}

let member: EtcdMember;
beforeAll(async () => {
  member = await startEtcd();
});
afterAll(async () => {
  await member?.stop();
});

it(`random request sequence matches real etcd (seed ${SEED}, ${OPS} ops)`, async () => {
  const mock = createMockEtcd();
  const steps = fc.sample(op, { seed: SEED, numRuns: OPS });
  for (const [i, [path, raw]] of steps.entries()) {
    // Compaction picks a revision relative to the current one, so both sides get the same absolute number.
    const body = path === "/v3/kv/compaction" ? { revision: mock.revision + (raw as { back: number }).back - 1 } : raw;
    const init = (): RequestInit => ({ method: "POST", body: JSON.stringify(body) });
    const realRes = await fetch(`${member.clientUrl}${path}`, init()).catch((err: unknown) => {
      throw new Error(`seed ${SEED} step ${i}: real etcd failed on ${path} ${JSON.stringify(body)}; log: ${member.logFile}`, { cause: err });
    });
    const mockRes = await mock.fetch(`http://etcd.test:2379${path}`, init());
    const real = { status: realRes.status, body: normalise(await realRes.json()) };
    const fake = { status: mockRes.status, body: normalise(await mockRes.json()) };
    if (JSON.stringify(sortKeys(real)) !== JSON.stringify(sortKeys(fake))) {
      console.error(`mock-vs-etcd differential: seed ${SEED} step ${i} ${path} ${JSON.stringify(body)}`);
      expect({ seed: SEED, step: i, path, request: body, ...fake }).toEqual({ seed: SEED, step: i, path, request: body, ...real });
    }
  }
}, 120_000);

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v === null || typeof v !== "object") return v;
  return Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, x]) => [k, sortKeys(x)]));
}
