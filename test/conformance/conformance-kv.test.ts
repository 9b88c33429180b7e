// KV conformance: the same assertions on the in-memory mock (project `unit`) and on real etcd 3.4 and 3.5
// (projects `etcd-3.4`, `etcd-3.5`). Revisions are only ever compared relative to headers read in the test
// (the real member is shared).
import { describe, expect, it } from "vitest";
import { type Etcd, EtcdCompactedError, type KeyValue } from "../../src/index.js";
import { rejection } from "../support/async.js";
import { bytes, freshNames } from "../support/etcd.js";
import { useBackend } from "./backend.js";

const { backend, etcd } = useBackend();
const enc = (text: string) => new TextEncoder().encode(text);

/** A fresh sub-prefix per test, inside the backend's namespace. */
const fresh = freshNames("kv", "/");
const pairs = (kvs: KeyValue[]) => kvs.map((kv) => [kv.key, kv.value]);

describe("put / get", () => {
  it("put returns the new revision; get returns value, versions and revisions", async () => {
    const p = fresh();
    const first = await etcd.put(`${p}a`, "1");
    expect(first.prevKv).toBeUndefined();
    // Cluster and member IDs are uint64: decimal strings, never rounded numbers.
    expect(first.header).toMatchObject({
      clusterId: expect.stringMatching(/^[0-9]+$/),
      memberId: expect.stringMatching(/^[0-9]+$/),
    });
    const got = await etcd.get(`${p}a`);
    expect(got).toMatchObject({
      key: `${p}a`,
      value: "1",
      version: 1,
      createRevision: first.header.revision,
      modRevision: first.header.revision,
      lease: "0",
    });
    expect(got?.keyBytes).toEqual(enc(`${p}a`));
    expect(got?.valueBytes).toEqual(enc("1"));
    const second = await etcd.put(`${p}a`, "2", { prevKv: true });
    expect(second.header.revision).toBeGreaterThan(first.header.revision);
    expect(second.prevKv).toMatchObject({ key: `${p}a`, value: "1", version: 1, modRevision: first.header.revision });
    expect(await etcd.get(`${p}a`)).toMatchObject({
      value: "2",
      version: 2,
      createRevision: first.header.revision,
      modRevision: second.header.revision,
    });
    // prevKv on a new key: none; without prevKv, none either.
    expect((await etcd.put(`${p}new`, "x", { prevKv: true })).prevKv).toBeUndefined();
    expect((await etcd.put(`${p}a`, "3")).prevKv).toBeUndefined();
    expect(await etcd.get(`${p}missing`)).toBeUndefined();
    // An empty value is a value.
    await etcd.put(`${p}empty`, "");
    expect(await etcd.get(`${p}empty`)).toMatchObject({ value: "", version: 1 });
    expect((await etcd.get(`${p}empty`))?.valueBytes).toHaveLength(0);
  });

  it("a read's header is the store's current revision and does not advance it", async () => {
    const p = fresh();
    const w = await etcd.put(`${p}a`, "1");
    const r = await etcd.range({ prefix: p });
    expect(r.header.revision).toBeGreaterThanOrEqual(w.header.revision);
    if (backend.name === "mock") expect(r.header.revision).toBe(w.header.revision);
  });
});

describe("range", () => {
  async function seed(p: string) {
    const revs: number[] = [];
    for (const [k, v] of [
      ["c", "3"],
      ["a", "1"],
      ["b", "2"],
      ["d", "4"],
      ["b", "22"],
    ] as const) {
      revs.push((await etcd.put(`${p}${k}`, v)).header.revision);
    }
    return revs;
  }

  it("prefix, [key, end) and end '\\0' select the right keys in key order", async () => {
    const p = fresh();
    await seed(p);
    await etcd.put(`${fresh()}zzz`, "outside");
    // Just before the prefix ("." < "/"), and exactly its range end ("0" follows "/"): both outside.
    await etcd.put(`${p.slice(0, -1)}.`, "before");
    await etcd.put(`${p.slice(0, -1)}0`, "the range end");
    expect(pairs((await etcd.range({ prefix: p })).kvs)).toEqual([
      [`${p}a`, "1"],
      [`${p}b`, "22"],
      [`${p}c`, "3"],
      [`${p}d`, "4"],
    ]);
    expect(pairs((await etcd.range({ key: `${p}b`, end: `${p}d` })).kvs)).toEqual([
      [`${p}b`, "22"],
      [`${p}c`, "3"],
    ]);
    // end "\0": every key from `key` on (within the namespace on the shared member).
    const from = await etcd.range({ key: `${p}c`, end: "\0" });
    expect(from.kvs.map((kv) => kv.key).slice(0, 2)).toEqual([`${p}c`, `${p}d`]);
    expect(from.kvs.every((kv) => kv.key >= `${p}c`)).toBe(true);
    expect(from.kvs.some((kv) => kv.key.endsWith("zzz"))).toBe(true);
    // An empty range: key >= end.
    expect((await etcd.range({ key: `${p}d`, end: `${p}a` })).kvs).toEqual([]);
  });

  it("limit: count is the total, more says keys were left out", async () => {
    const p = fresh();
    await seed(p);
    const limited = await etcd.range({ prefix: p, limit: 2 });
    expect(pairs(limited.kvs)).toEqual([
      [`${p}a`, "1"],
      [`${p}b`, "22"],
    ]);
    expect(limited).toMatchObject({ count: 4, more: true });
    expect(await etcd.range({ prefix: p, limit: 4 })).toMatchObject({ count: 4, more: false });
    expect(await etcd.range({ prefix: p, limit: 10 })).toMatchObject({ count: 4, more: false });
    // limit 0 means no limit.
    expect((await etcd.range({ prefix: p, limit: 0 })).kvs).toHaveLength(4);
    expect(await etcd.range({ prefix: `${p}none/` })).toMatchObject({ kvs: [], count: 0, more: false });
  });

  it("revision: reads the store as it was (history of one key)", async () => {
    const p = fresh();
    const r1 = (await etcd.put(`${p}k`, "v1")).header.revision;
    const r2 = (await etcd.put(`${p}k`, "v2")).header.revision;
    const r3 = (await etcd.delete(`${p}k`)).header.revision;
    const r4 = (await etcd.put(`${p}k`, "v3")).header.revision;
    expect(await etcd.get(`${p}k`, { revision: r1 - 1 })).toBeUndefined();
    expect(await etcd.get(`${p}k`, { revision: r1 })).toMatchObject({
      value: "v1",
      version: 1,
      createRevision: r1,
      modRevision: r1,
    });
    expect(await etcd.get(`${p}k`, { revision: r2 })).toMatchObject({
      value: "v2",
      version: 2,
      createRevision: r1,
      modRevision: r2,
    });
    expect(await etcd.get(`${p}k`, { revision: r3 })).toBeUndefined();
    // Re-created: a new create revision and version 1 again.
    expect(await etcd.get(`${p}k`, { revision: r4 })).toMatchObject({
      value: "v3",
      version: 1,
      createRevision: r4,
      modRevision: r4,
    });
    // The header of a historical read is still the current revision.
    expect((await etcd.range({ key: `${p}k`, revision: r1 })).header.revision).toBeGreaterThanOrEqual(r4);
  });

  it("future revision → FUTURE_REVISION", async () => {
    const { header } = await etcd.range({ prefix: fresh() });
    const error = await rejection(etcd.get("k", { revision: header.revision + 1_000_000 }));
    expect(error).toMatchObject({ code: "FUTURE_REVISION", grpcCode: 11, httpStatus: 400 });
    expect(error.message).toContain("required revision is a future revision");
  });

  it("sort by every target, both orders", async () => {
    const p = fresh();
    // Distinct version, create, mod and value orders.
    await etcd.put(`${p}c`, "m"); // create 1st
    const rc2 = (await etcd.put(`${p}a`, "z")).header.revision; // create 2nd
    await etcd.put(`${p}b`, "a"); // create 3rd
    await etcd.put(`${p}c`, "n"); // c: version 2, mod 4th
    await etcd.put(`${p}c`, "o"); // c: version 3, mod 5th
    await etcd.put(`${p}a`, "y"); // a: version 2, mod 6th
    const keys = async (sort: Parameters<Etcd["range"]>[0]["sort"]) =>
      (await etcd.range({ prefix: p, sort })).kvs.map((kv) => kv.key.slice(p.length));
    expect(await keys({ target: "key", order: "ascend" })).toEqual(["a", "b", "c"]);
    expect(await keys({ target: "key", order: "descend" })).toEqual(["c", "b", "a"]);
    expect(await keys({ target: "version", order: "ascend" })).toEqual(["b", "a", "c"]);
    expect(await keys({ target: "version", order: "descend" })).toEqual(["c", "a", "b"]);
    expect(await keys({ target: "createRevision", order: "ascend" })).toEqual(["c", "a", "b"]);
    expect(await keys({ target: "createRevision", order: "descend" })).toEqual(["b", "a", "c"]);
    expect(await keys({ target: "modRevision", order: "ascend" })).toEqual(["b", "c", "a"]);
    expect(await keys({ target: "modRevision", order: "descend" })).toEqual(["a", "c", "b"]);
    expect(await keys({ target: "value", order: "ascend" })).toEqual(["b", "c", "a"]);
    expect(await keys({ target: "value", order: "descend" })).toEqual(["a", "c", "b"]);
    // A target without an order ascends (clientv3's rule, which the client applies).
    expect(await keys({ target: "modRevision" })).toEqual(["b", "c", "a"]);
    // Sorting happens before the limit.
    const first = await etcd.range({ prefix: p, sort: { target: "modRevision", order: "descend" }, limit: 1 });
    expect(first.kvs[0]).toMatchObject({ key: `${p}a`, createRevision: rc2 });
    expect(first).toMatchObject({ count: 3, more: true });
  });

  it("keysOnly and countOnly", async () => {
    const p = fresh();
    await seed(p);
    const keysOnly = await etcd.range({ prefix: p, keysOnly: true });
    expect(keysOnly.kvs.map((kv) => [kv.key, kv.value, kv.valueBytes.length])).toEqual([
      [`${p}a`, "", 0],
      [`${p}b`, "", 0],
      [`${p}c`, "", 0],
      [`${p}d`, "", 0],
    ]);
    // Everything but the value is still there.
    expect(keysOnly.kvs[1]).toMatchObject({ version: 2 });
    expect(keysOnly.count).toBe(4);
    const countOnly = await etcd.range({ prefix: p, countOnly: true });
    expect(countOnly).toMatchObject({ kvs: [], count: 4, more: false });
    expect(await etcd.range({ prefix: p, countOnly: true, limit: 1 })).toMatchObject({ kvs: [], count: 4 });
  });

  it("serializable reads return the data too", async () => {
    const p = fresh();
    await seed(p);
    expect(pairs((await etcd.range({ prefix: p, serializable: true })).kvs)).toEqual([
      [`${p}a`, "1"],
      [`${p}b`, "22"],
      [`${p}c`, "3"],
      [`${p}d`, "4"],
    ]);
    expect(await etcd.get(`${p}b`, { serializable: true })).toMatchObject({ value: "22", version: 2 });
  });

  it("min/max create and mod revision filter after counting", async () => {
    const p = fresh();
    const [rc, ra, rb, rd, rb2] = (await seed(p)) as [number, number, number, number, number];
    const keys = async (o: object) => (await etcd.range({ prefix: p, ...o })).kvs.map((kv) => kv.key.slice(p.length));
    expect(await keys({ minCreateRevision: rb })).toEqual(["b", "d"]);
    expect(await keys({ maxCreateRevision: ra })).toEqual(["a", "c"]);
    expect(await keys({ minCreateRevision: ra, maxCreateRevision: rb })).toEqual(["a", "b"]);
    expect(await keys({ minModRevision: rd })).toEqual(["b", "d"]);
    expect(await keys({ maxModRevision: rc })).toEqual(["c"]);
    expect(await keys({ minModRevision: ra, maxModRevision: rd })).toEqual(["a", "d"]);
    expect(await keys({ minModRevision: rb2 + 1 })).toEqual([]);
    // count is the range's size before the filters (etcd counts in the store, then prunes).
    expect((await etcd.range({ prefix: p, minModRevision: rd })).count).toBe(4);
    // The limit applies after filtering.
    expect(await etcd.range({ prefix: p, minModRevision: rd, limit: 1 })).toMatchObject({ count: 4, more: true });
  });
});

describe("delete", () => {
  it("one key, a prefix, a range; prevKv returns what was deleted; nothing deleted leaves the revision", async () => {
    const p = fresh();
    const putA = await etcd.put(`${p}a`, "A");
    for (const k of ["b", "c", "d", "e"]) await etcd.put(`${p}${k}`, k.toUpperCase());
    const one = await etcd.delete(`${p}a`, { prevKv: true });
    expect(one.deleted).toBe(1);
    expect(pairs(one.prevKvs)).toEqual([[`${p}a`, "A"]]);
    expect(one.prevKvs[0]).toMatchObject({ modRevision: putA.header.revision, version: 1 });
    const range = await etcd.delete({ key: `${p}b`, end: `${p}d` });
    expect(range).toMatchObject({ deleted: 2, prevKvs: [] });
    // prevKv inline in the query or as a separate options argument: the same.
    const all = await etcd.delete({ prefix: p }, { prevKv: true });
    expect(all.deleted).toBe(2);
    expect(pairs(all.prevKvs)).toEqual([
      [`${p}d`, "D"],
      [`${p}e`, "E"],
    ]);
    expect(all.header.revision).toBeGreaterThan(range.header.revision);
    expect((await etcd.range({ prefix: p })).count).toBe(0);
    // Deleting nothing: deleted 0, and the store's revision does not move.
    const none = await etcd.delete({ prefix: p, prevKv: true });
    expect(none).toMatchObject({ deleted: 0, prevKvs: [] });
    expect(none.header.revision).toBeGreaterThanOrEqual(all.header.revision);
    if (backend.name === "mock") expect(none.header.revision).toBe(all.header.revision);
    // All deleted keys share the deletion's revision.
    const history = await etcd.range({ prefix: p, revision: all.header.revision - 1 });
    expect(history.kvs.map((kv) => kv.key)).toEqual([`${p}d`, `${p}e`]);
  });
});

describe("bytes", () => {
  it("non-UTF-8 keys and values round-trip exactly; prefixes over raw bytes", async () => {
    const p = fresh();
    const key = new Uint8Array([...new TextEncoder().encode(p), 0xff, 0xfe, 0x00, 0x80]);
    const value = bytes(0x00, 0xc3, 0x28, 0xff, 0x80, 0x00);
    await etcd.put(key, value);
    const got = await etcd.get(key);
    expect(got?.keyBytes).toEqual(key);
    expect(got?.valueBytes).toEqual(value);
    // The 0xff-prefixed key sorts after every printable one.
    await etcd.put(`${p}z`, "z");
    const all = await etcd.range({ prefix: p });
    expect(all.kvs.map((kv) => Array.from(kv.keyBytes.slice(p.length)))).toEqual([[0x7a], [0xff, 0xfe, 0x00, 0x80]]);
    const byBytes = await etcd.range({ prefix: new Uint8Array([...new TextEncoder().encode(p), 0xff]) });
    expect(byBytes.kvs).toHaveLength(1);
    expect(byBytes.kvs[0]?.valueBytes).toEqual(value);
    expect(await etcd.get(key, { keysOnly: true })).toMatchObject({ valueBytes: new Uint8Array() });
    // The text forms are lossy decodings, not the key: the string does not find it.
    expect(await etcd.get(got!.key)).toBeUndefined();
  });

  // Outside any namespace (a client with namespace ""): these keys are at the top of the member's keyspace.
  it("a prefix of only 0xff bytes has an open end: 0xff 0xff + anything is inside, 0xff 0xfe is not", async () => {
    const raw = backend.client({ namespace: "" });
    const suffix = enc(`${backend.namespace}${fresh()}`);
    const key = new Uint8Array([0xff, 0xff, ...suffix]);
    const nearMiss = new Uint8Array([0xff, 0xfe, ...suffix]);
    await raw.put(key, "found");
    await raw.put(nearMiss, "not me");
    const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);
    try {
      const result = await raw.range({ prefix: bytes(0xff, 0xff) });
      expect(result.kvs.filter((kv) => same(kv.keyBytes, key)).map((kv) => kv.value)).toEqual(["found"]);
      expect(result.kvs.every((kv) => kv.keyBytes[0] === 0xff && kv.keyBytes[1] === 0xff)).toBe(true);
      // A single 0xff covers both.
      const wider = await raw.range({ prefix: bytes(0xff) });
      expect(wider.kvs.filter((kv) => same(kv.keyBytes, key) || same(kv.keyBytes, nearMiss))).toHaveLength(2);
    } finally {
      await raw.delete(key);
      await raw.delete(nearMiss);
    }
  });
});

describe("put with lease, ignoreValue, ignoreLease", () => {
  it("a lease attaches; ignoreValue changes only the lease; ignoreLease changes only the value", async () => {
    const p = fresh();
    const l1 = await etcd.lease.grant(60);
    const l2 = await etcd.lease.grant(60);
    try {
      await etcd.put(`${p}k`, "v1", { lease: l1.id });
      expect(await etcd.get(`${p}k`)).toMatchObject({ value: "v1", lease: l1.id });
      const swapped = await etcd.put(`${p}k`, undefined, { ignoreValue: true, lease: l2.id, prevKv: true });
      expect(swapped.prevKv).toMatchObject({ value: "v1", lease: l1.id });
      expect(await etcd.get(`${p}k`)).toMatchObject({ value: "v1", lease: l2.id, version: 2 });
      await etcd.put(`${p}k`, "v2", { ignoreLease: true });
      expect(await etcd.get(`${p}k`)).toMatchObject({ value: "v2", lease: l2.id, version: 3 });
      // The old lease no longer holds the key; the new one does.
      expect((await etcd.lease.timeToLive(l1.id, { keys: true })).keys).toEqual([]);
      expect((await etcd.lease.timeToLive(l2.id, { keys: true })).keys).toEqual([`${p}k`]);
      // A plain put without a lease detaches it.
      await etcd.put(`${p}k`, "v3");
      expect(await etcd.get(`${p}k`)).toMatchObject({ value: "v3", lease: "0" });
      expect((await etcd.lease.timeToLive(l2.id, { keys: true })).keys).toEqual([]);
    } finally {
      await etcd.lease.revoke(l1.id).catch(() => {});
      await etcd.lease.revoke(l2.id).catch(() => {});
    }
  });

  it(
    "errors: unknown lease → LEASE_NOT_FOUND; " +
      "ignoreValue/ignoreLease on a missing key → INVALID_ARGUMENT 'key not found'",
    async () => {
      const p = fresh();
      const lease = await etcd.lease.grant(60);
      await etcd.lease.revoke(lease.id);
      const noLease = await rejection(etcd.put(`${p}k`, "v", { lease: lease.id }));
      expect(noLease).toMatchObject({ code: "LEASE_NOT_FOUND", grpcCode: 5, httpStatus: 404 });
      for (const options of [{ ignoreValue: true }, { ignoreLease: true }]) {
        const error = await rejection(etcd.put(`${p}missing`, options.ignoreValue ? undefined : "v", options));
        expect(error).toMatchObject({ code: "INVALID_ARGUMENT", grpcCode: 3, httpStatus: 400 });
        expect(error.message).toContain("key not found");
      }
      // 3.4 checks the lease before the key for a plain put: both wrong → LEASE_NOT_FOUND.
      await expect(etcd.put(`${p}missing`, undefined, { ignoreValue: true, lease: lease.id })).rejects.toMatchObject({
        code: "LEASE_NOT_FOUND",
      });
      expect(await etcd.get(`${p}missing`)).toBeUndefined();
      // ignoreValue with a value, and ignoreLease with a lease, are refused by the client before any request.
      await expect(etcd.put(`${p}k`, "v", { ignoreValue: true })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
      await expect(etcd.put(`${p}k`, "v", { ignoreLease: true, lease: "7" })).rejects.toMatchObject({
        code: "INVALID_ARGUMENT",
      });
    },
  );
});

describe("compaction (a member of its own: compaction is member-wide)", () => {
  const { etcd: c } = useBackend({ dedicated: true });

  it(
    "historical reads below the compaction → COMPACTED; " +
      "at and after it they still work; compacting again → COMPACTED; ahead → FUTURE_REVISION",
    async () => {
      const r1 = (await c.put("k", "v1")).header.revision;
      const r2 = (await c.put("k", "v2")).header.revision;
      const r3 = (await c.put("k", "v3")).header.revision;
      const compacted = await c.compact(r2, { physical: true });
      expect(compacted.header.revision).toBe(r3);
      const error = await rejection(c.get("k", { revision: r1 }));
      expect(error).toBeInstanceOf(EtcdCompactedError);
      expect(error).toMatchObject({ code: "COMPACTED", name: "EtcdCompactedError" });
      expect(error.message).toContain("required revision has been compacted");
      expect(await c.get("k", { revision: r2 })).toMatchObject({ value: "v2", version: 2 });
      expect(await c.get("k", { revision: r3 })).toMatchObject({ value: "v3", version: 3 });
      expect(await c.get("k")).toMatchObject({ value: "v3", createRevision: r1 });
      await expect(c.compact(r2)).rejects.toMatchObject({ code: "COMPACTED" });
      await expect(c.compact(r1)).rejects.toMatchObject({ code: "COMPACTED" });
      await expect(c.compact(r3 + 100)).rejects.toMatchObject({ code: "FUTURE_REVISION" });
      // A txn read at a compacted revision fails the same way.
      const { op } = await import("../../src/index.js");
      await expect(
        c
          .txn()
          .then(op.get({ key: "k", revision: r1 }))
          .commit(),
      ).rejects.toMatchObject({ code: "COMPACTED" });
    },
  );

  it("a deleted key's history goes with compaction past the delete", async () => {
    const r1 = (await c.put("gone", "x")).header.revision;
    const r2 = (await c.delete("gone")).header.revision;
    await c.put("other", "y");
    await c.compact(r2);
    await expect(c.get("gone", { revision: r1 })).rejects.toMatchObject({ code: "COMPACTED" });
    expect(await c.get("gone", { revision: r2 })).toBeUndefined();
    expect(await c.get("gone")).toBeUndefined();
  });
});
