// The schemas of gateway answers (src/gateway/wire.ts): real bodies of etcd 3.4, 3.5 and 3.6 pass them, each
// read back as sent; a body that lacks what etcd always sends does not.
import { describe, expect, it } from "vitest";
import * as z from "zod/mini";
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
